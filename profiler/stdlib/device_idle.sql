-- device_idle: THE idle share of each device core, with or without steps.
--
-- Per device core of the run (a TensorCore, each SparseCore, a GPU, a host's CPU device;
-- a device plane without events too: it is a chip, busy 0), its busy time (device_busy,
-- set 'ops': the union of its ops), the interval from its first op's start to its last
-- op's end (active), and the capture's span (runs.first_ps .. last_ps). Two shares:
--   idle_share_active  1 - busy / active: XProf's device idle (its overview's
--                      device_idle_time_percent sums busy and active over the cores);
--   idle_share_span    1 - busy / span: how much of the capture the core sat idle, counting
--                      the time before its first op and after its last (an inference
--                      server waiting for requests; a capture cut mid-step).
WITH devices AS (
    SELECT run_id, chip, core, kind AS track_kind, min(plane) AS plane
    FROM tracks
    WHERE chip >= 0 AND kind IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device')
    GROUP BY ALL
),
busy AS (
    SELECT run_id, chip, core, track_kind, sum(end_ps - start_ps)::BIGINT AS busy_ps, min(start_ps) AS first_ps,
           max(end_ps) AS last_ps
    FROM device_busy
    WHERE busy_set = 'ops'
    GROUP BY ALL
)
SELECT d.run_id, d.chip, d.core, d.track_kind, d.plane, coalesce(b.busy_ps, 0) AS busy_ps, b.first_ps, b.last_ps,
       b.last_ps - b.first_ps AS active_ps, r.last_ps - r.first_ps AS span_ps,
       1 - b.busy_ps / nullif(b.last_ps - b.first_ps, 0) AS idle_share_active,
       1 - coalesce(b.busy_ps, 0) / nullif(r.last_ps - r.first_ps, 0) AS idle_share_span
FROM devices d
JOIN runs r USING (run_id)
LEFT JOIN busy b USING (run_id, chip, core, track_kind)

-- step_spans: every interval a step occupies on a chip, by where it is measured.
--
-- The raw material of the step rules (chip_steps, step_windows, step_times): per run,
-- chip (-1: the host) and step, one span per source, ranked by how directly it
-- measures the chip's step (rank 1 first):
--   1 tensorcore_steps  markers on a device chip's TensorCore `Steps` line
--   2 device_steps      the chip's other step markers (`Sparse Core Steps`, ...)
--   3 host_steps        on a device chip: its host's step markers (e.g. a JAX training
--                       loop's StepTraceAnnotation), for a chip without markers of its
--                       own (a GPU's streams, a CPU's XLA threads): a step lasts as long
--                       as the host's step, however little of it the device works (a
--                       host-bound step is mostly device idle time)
--   4 device_events     the extent of the chip's events tagged with the step
--                       (step_event_extents, summed at ingest)
--   4 host_steps        on the host (chip -1): its step markers
--   5 host_events       the extent of the host's events tagged with the step
-- A source with several markers of a step on one chip (e.g. one per SparseCore, or one
-- per host) spans from the earliest start to the latest end. A chip's host is the prefix
-- of its plane's name (`host3 /device:GPU:0`; none in a single-host capture). Extend the
-- rules here (one more source and rank) and chip_steps, step_windows and step_times follow.
WITH marker_spans AS (
    SELECT s.run_id, t.chip, regexp_extract(t.plane, '^(.*?)/(host|device):', 1) AS host, s.step,
           CASE WHEN t.chip < 0 THEN 'host_steps' WHEN t.line = 'Steps' THEN 'tensorcore_steps'
                ELSE 'device_steps' END AS source,
           min(s.start_ps) AS start_ps, max(s.start_ps + s.dur_ps) AS end_ps
    FROM steps s
    JOIN tracks t USING (run_id, track_id)
    GROUP BY ALL
),
device_chips AS (
    SELECT DISTINCT run_id, chip, regexp_extract(plane, '^(.*?)/(host|device):', 1) AS host
    FROM tracks
    WHERE chip >= 0 AND kind <> 'counter'
)
SELECT run_id, chip, step, source,
       CASE source WHEN 'tensorcore_steps' THEN 1 WHEN 'device_steps' THEN 2 ELSE 4 END AS rank,
       min(start_ps) AS start_ps, max(end_ps) AS end_ps
FROM marker_spans
GROUP BY run_id, chip, step, source
UNION ALL
SELECT c.run_id, c.chip, h.step, 'host_steps' AS source, 3 AS rank, h.start_ps, h.end_ps
FROM device_chips c
JOIN marker_spans h ON h.run_id = c.run_id AND h.chip < 0 AND h.host = c.host
UNION ALL
SELECT run_id, chip, step, CASE WHEN chip < 0 THEN 'host_events' ELSE 'device_events' END AS source,
       CASE WHEN chip < 0 THEN 5 ELSE 4 END AS rank, start_ps, end_ps
FROM step_event_extents

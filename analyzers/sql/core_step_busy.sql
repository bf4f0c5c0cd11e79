-- core_step_busy: per counted step, chip and device core (a TensorCore's op line, its
-- collectives line, each SparseCore), the core's busy time inside the chip's step window:
-- the union of its ops (device_busy, set 'ops') clipped to the window.
WITH w AS (
    SELECT w.chip, w.step, w.start_ps, w.end_ps
    FROM {step_windows} w JOIN step_times s ON s.run_id = $run AND s.step = w.step AND s.counted
)
SELECT w.step, b.chip, b.core, b.track_kind,
       sum(least(b.end_ps, w.end_ps) - greatest(b.start_ps, w.start_ps))::BIGINT AS busy_ps
FROM device_busy b JOIN w ON b.chip = w.chip AND b.start_ps < w.end_ps AND b.end_ps > w.start_ps
WHERE b.run_id = $run AND b.busy_set = 'ops' AND b.track_kind IN ('tensorcore', 'sparsecore')
GROUP BY ALL
ORDER BY ALL

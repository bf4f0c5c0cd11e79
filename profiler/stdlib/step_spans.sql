-- step_spans: every interval a step occupies on a chip, by where it is measured.
--
-- The raw material of the step rules (chip_steps, step_windows, step_times): per run,
-- chip (-1: the host) and step, one span per source, ranked by how directly it
-- measures the chip's step (rank 1 first):
--   1 tensorcore_steps  markers on a device chip's TensorCore `Steps` line
--   2 device_steps      the chip's other step markers (`Sparse Core Steps`, ...)
--   3 device_events     the extent of the chip's events tagged with the step
--                       (step_event_extents, summed at ingest)
--   4 host_steps        markers on the host (e.g. a JAX training loop's step TraceMe)
--   5 host_events       the extent of the host's events tagged with the step
-- A source with several markers of a step on one chip (e.g. one per SparseCore)
-- spans from the earliest start to the latest end. Extend the rules here (one more
-- source and rank) and chip_steps, step_windows and step_times follow.
SELECT run_id, chip, step, source,
       CASE source WHEN 'tensorcore_steps' THEN 1 WHEN 'device_steps' THEN 2 ELSE 4 END AS rank,
       start_ps, end_ps
FROM (
    SELECT s.run_id, t.chip, s.step,
           CASE WHEN t.chip < 0 THEN 'host_steps' WHEN t.line = 'Steps' THEN 'tensorcore_steps'
                ELSE 'device_steps' END AS source,
           min(s.start_ps) AS start_ps, max(s.start_ps + s.dur_ps) AS end_ps
    FROM steps s
    JOIN tracks t USING (run_id, track_id)
    GROUP BY ALL
)
UNION ALL
SELECT run_id, chip, step, CASE WHEN chip < 0 THEN 'host_events' ELSE 'device_events' END AS source,
       CASE WHEN chip < 0 THEN 5 ELSE 3 END AS rank, start_ps, end_ps
FROM step_event_extents

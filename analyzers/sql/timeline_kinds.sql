-- timeline_kinds: how the wall-time split (analyzers/timeline.py) classes the work of
-- each op track and each category id the run uses (-1: the event records none):
--   chip       where the work counts (-1: the host, whose work counts on every chip)
--   priority   index into timeline.CATEGORIES of the recorded category, else of the
--              track's default category
--   core_kind  0 for TensorCore ops, 1 for SparseCore ops (XLA Ops / Sparse Core Ops
--              lines: what the overlap analysis counts as a busy core), -1 for the rest
-- A few rows (tracks x categories): breakdown.py applies it to every event.
CREATE OR REPLACE TEMP TABLE {table} AS
WITH used AS (SELECT DISTINCT coalesce(category_id, -1) AS category_id FROM events WHERE run_id = $run)
SELECT t.track_id, u.category_id, t.chip,
       CASE coalesce(c.value, t.default_category)
           WHEN 'tc_forward' THEN 0 WHEN 'tc_backward' THEN 1 WHEN 'tc_collective' THEN 2
           WHEN 'tc_other' THEN 3 WHEN 'sc_forward' THEN 4 WHEN 'sc_backward' THEN 5
           WHEN 'sc_collective' THEN 6 WHEN 'sc_other' THEN 7 WHEN 'device_compute' THEN 8
           WHEN 'device_collective' THEN 9 WHEN 'device_memcpy' THEN 10 WHEN 'host_to_device' THEN 11
           WHEN 'host_preprocess' THEN 12 WHEN 'host_launch' THEN 13 ELSE 14 END::TINYINT AS priority,
       CASE WHEN t.line NOT IN ('XLA Ops', 'Sparse Core Ops') THEN -1
            WHEN t.track_kind = 'tensorcore' THEN 0 WHEN t.track_kind = 'sparsecore' THEN 1 ELSE -1 END::TINYINT AS core_kind
FROM {op_tracks} t CROSS JOIN used u
LEFT JOIN strings c ON c.run_id = $run AND c.string_id = u.category_id;

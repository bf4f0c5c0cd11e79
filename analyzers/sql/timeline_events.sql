-- timeline_events: op events as (chip, start_ps, end_ps, priority, core_kind) for the
-- wall-time split (analyzers/timeline.py); priority indexes timeline.CATEGORIES;
-- core_kind is 0 for TensorCore ops, 1 for SparseCore ops (XLA Ops / Sparse Core Ops
-- lines: what the overlap analysis counts as a busy core), -1 for the rest. Host
-- events (chip -1) are copied onto every chip, since the host feeds them all.
-- Zero-length events take no time. Reads op_base and resolves only the category
-- (as op_events does): this query scans every event of the run.
WITH chips AS (SELECT DISTINCT chip FROM {step_windows}),
ev AS (
    SELECT b.chip, b.start_ps, b.end_ps,
           CASE coalesce(c.value, b.default_category)
               WHEN 'tc_forward' THEN 0 WHEN 'tc_backward' THEN 1 WHEN 'tc_collective' THEN 2
               WHEN 'tc_other' THEN 3 WHEN 'sc_forward' THEN 4 WHEN 'sc_backward' THEN 5
               WHEN 'sc_collective' THEN 6 WHEN 'sc_other' THEN 7 WHEN 'host_to_device' THEN 8
               WHEN 'host_preprocess' THEN 9 ELSE 10 END::TINYINT AS priority,
           CASE WHEN line NOT IN ('XLA Ops', 'Sparse Core Ops') THEN -1
                WHEN track_kind = 'tensorcore' THEN 0 WHEN track_kind = 'sparsecore' THEN 1 ELSE -1 END::TINYINT AS core_kind
    FROM {op_base} b LEFT JOIN strings c ON c.run_id = b.run_id AND c.string_id = b.category_id
    WHERE b.dur_ps > 0
)
SELECT chip, start_ps, end_ps, priority, core_kind FROM ev WHERE chip >= 0
UNION ALL
SELECT chips.chip, ev.start_ps, ev.end_ps, ev.priority, ev.core_kind FROM ev, chips WHERE ev.chip < 0

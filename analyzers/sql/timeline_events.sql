-- timeline_events: op events as (chip, start_ps, end_ps, priority, core_kind) for the
-- wall-time split (analyzers/timeline.py), classed by sql/timeline_kinds.sql. Host
-- events (chip -1) are copied onto every chip, since the host feeds them all.
-- Zero-length events take no time. The exporter reads this per time span; the
-- analyzers apply timeline_kinds to analyzers/op_arrays.py's columns instead
-- (breakdown.py), which the idle-gap search has loaded already.
WITH chips AS (SELECT DISTINCT chip FROM {step_windows}),
ev AS (
    SELECT k.chip, b.start_ps, b.end_ps, k.priority, k.core_kind
    FROM {op_base} b
    JOIN {timeline_kinds} k ON k.track_id = b.track_id AND k.category_id = coalesce(b.category_id, -1)
    WHERE b.dur_ps > 0
)
SELECT chip, start_ps, end_ps, priority, core_kind FROM ev WHERE chip >= 0
UNION ALL
SELECT chips.chip, ev.start_ps, ev.end_ps, ev.priority, ev.core_kind FROM ev, chips WHERE ev.chip < 0

-- op_events: the run's units of work, as every analyzer sees them: op_base (events on
-- op-level lines with the track's chip/core/kind) with name, table and category
-- resolved. Events without a recorded category are classed by their track
-- (op_base.default_category: tc_other, sc_other, host_other).
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT b.event_id, b.track_id, b.chip, b.core, b.track_kind, b.plane, b.line,
       n.value AS name, tb.value AS table_name,
       coalesce(c.value, b.default_category) AS category,
       b.step, b.start_ps, b.dur_ps, b.end_ps,
       b.sc, b.minibatch, b.ids, b.unique_ids, b.dropped_ids, b.bytes, b.flops
FROM {op_base} b
JOIN strings n ON n.run_id = $run AND n.string_id = b.name_id
LEFT JOIN strings tb ON tb.run_id = $run AND tb.string_id = b.table_id
LEFT JOIN strings c ON c.run_id = $run AND c.string_id = b.category_id;

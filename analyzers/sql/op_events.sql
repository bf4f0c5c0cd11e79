-- op_events: the run's units of work, as every analyzer sees them: events on
-- op-level lines (XLA Ops, Sparse Core Ops, host threads, ICI ...), with the
-- track's chip/core/kind and the category resolved. Module and step lines are
-- left out (they span their ops), as are counter tracks. Events without a
-- recorded category are classed by their track: tc_other, sc_other, host_other.
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT e.event_id, e.track_id, t.chip, t.core, t.kind AS track_kind, t.plane, t.line,
       n.value AS name, tb.value AS table_name,
       coalesce(c.value, CASE t.kind WHEN 'tensorcore' THEN 'tc_other'
                                     WHEN 'host' THEN 'host_other' ELSE 'sc_other' END) AS category,
       e.step, e.start_ps, e.dur_ps, e.start_ps + e.dur_ps AS end_ps,
       e.sc, e.minibatch, e.ids, e.unique_ids, e.dropped_ids, e.bytes, e.flops
FROM events e
JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
LEFT JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
LEFT JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
WHERE e.run_id = $run AND t.kind <> 'counter'
  AND t.line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules');

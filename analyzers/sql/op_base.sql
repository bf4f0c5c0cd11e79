-- op_base: the run's units of work with ids instead of strings (name_id, table_id,
-- category_id), for queries that scan every event and need no names: the events of
-- op_tracks (XLA Ops, Sparse Core Ops, host threads, ICI ...) with the track's
-- chip/core/kind and default category (op_tracks). op_events adds the names on top.
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT e.run_id, e.event_id, e.track_id, t.chip, t.core, t.track_kind, t.plane, t.line,
       e.name_id, e.table_id, e.category_id,
       t.default_category,
       e.step, e.start_ps, e.dur_ps, e.start_ps + e.dur_ps AS end_ps,
       e.sc, e.minibatch, e.ids, e.unique_ids, e.dropped_ids, e.bytes, e.flops
FROM events e
JOIN {op_tracks} t ON t.track_id = e.track_id
WHERE e.run_id = $run;

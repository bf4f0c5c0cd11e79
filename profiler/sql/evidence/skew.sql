-- @module evidence.skew
-- The evidence query of the skew analyzer's findings (analyzers/rules/skew.py): shown with each finding (its
-- evidence_sql), for a user to run with `scprof sql`.
-- @include schema.views

-- @query partition_loads
-- The partition loads of one table per step, the hottest first.
-- @param run INTEGER The run (runs.run_id).
-- @param table VARCHAR The table group (stack).

-- partition loads of the table per step
SELECT step, chip, sc, ids, unique_ids FROM sc_partition_stats WHERE run_id = $run AND table_name = $table ORDER BY step, ids DESC;

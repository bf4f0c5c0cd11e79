-- @module evidence.minibatching
-- The evidence queries of the minibatching analyzer's findings (analyzers/rules/minibatching.py): shown with each finding
-- (its evidence_sql), for a user to run with `scprof sql`.
-- @include schema.views

-- @query partition_load_vs_limits
-- One table's observed load per partition and step against its compiled limits (minibatching).
-- @param run INTEGER The run (runs.run_id).
-- @param table VARCHAR The table group (stack).

-- observed per-partition load vs compiled limits
SELECT step, chip, sc, ids, max_ids_per_partition, unique_ids, max_unique_ids_per_partition, minibatches FROM sc_partition_stats WHERE run_id = $run AND table_name = $table ORDER BY step, chip, sc;

-- @query group_load_vs_limits
-- Each table group's largest observed load per partition against its compiled limits (oversized_limits).
-- @param run INTEGER The run (runs.run_id).

-- observed per-partition load vs compiled limits, per table group
SELECT table_name, max(ids) AS observed_max_ids, max(max_ids_per_partition) AS max_ids_per_partition, max(unique_ids) AS observed_max_unique_ids, max(max_unique_ids_per_partition) AS max_unique_ids_per_partition FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name ORDER BY table_name;

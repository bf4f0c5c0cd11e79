-- @module evidence.id_dropping
-- The evidence queries of the ID-dropping analyzer's findings (analyzers/rules/id_dropping.py): shown with each finding
-- (its evidence_sql), for a user to run with `scprof sql`.
-- @include schema.views

-- @query dropped_ids
-- One table's dropped IDs per step and partition (id_dropping).
-- @param run INTEGER The run (runs.run_id).
-- @param table VARCHAR The table group (stack).

-- dropped IDs per step and partition
SELECT step, chip, sc, ids, dropped_ids, max_ids_per_partition FROM sc_partition_stats WHERE run_id = $run AND table_name = $table AND dropped_ids > 0 ORDER BY step, chip, sc;

-- @query host_dropped_ids
-- The IDs the host dropped per step (chip_cap_dropping).
-- @param run INTEGER The run (runs.run_id).

-- IDs dropped per step on the host (the chip cap's are in no partition's dropped_ids)
SELECT ts_ps, value AS dropped_ids FROM counter_samples WHERE run_id = $run AND counter = 'Dropped IDs' ORDER BY ts_ps;

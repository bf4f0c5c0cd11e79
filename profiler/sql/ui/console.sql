-- @module ui.console
-- The SQL console's reads of the store's catalog (ui/pages/sql.py): its tables and views, and their columns, with the
-- documentation the schema's COMMENTs give them; and the examples it offers (example_*: the doc is the button's
-- label, the text what the console shows and a user runs as their own SQL).
-- @include schema.views

-- @query schema_objects
-- The store's tables and views (DuckDB's catalog, internal ones aside), with their comments.
-- @column kind VARCHAR table or view.
-- @column name VARCHAR Its name.
-- @column comment VARCHAR Its documentation.
SELECT 'table' AS kind, table_name AS name, comment FROM duckdb_tables() WHERE NOT internal
UNION ALL
SELECT 'view', view_name, comment FROM duckdb_views() WHERE NOT internal;

-- @query schema_columns
-- Every column of the store's tables and views, in order, with its type and comment.
-- @column name VARCHAR The table or view.
-- @column column_name VARCHAR The column.
-- @column data_type VARCHAR Its type.
-- @column comment VARCHAR Its documentation.
SELECT table_name AS name, column_name, data_type, comment FROM duckdb_columns() WHERE NOT internal
ORDER BY table_name, column_index;

-- @query example_runs
-- Runs
SELECT run_id, name, source, status, steps, events FROM runs ORDER BY run_id;

-- @query example_longest_ops
-- Longest ops
SELECT run_id, plane, name, dur_ps / 1e6 AS dur_us, step
FROM slices
ORDER BY dur_ps DESC
LIMIT 20;

-- @query example_time_per_op_name
-- Time per op name
SELECT run_id, line, name, count(*) AS n, sum(dur_ps) / 1e9 AS total_ms
FROM slices
GROUP BY ALL ORDER BY total_ms DESC
LIMIT 20;

-- @query example_partitions_over_the_limit
-- Partitions over the limit
SELECT run_id, step, chip, sc, table_name, ids, max_ids_per_partition, minibatches
FROM sc_partition_stats
WHERE ids > max_ids_per_partition
ORDER BY ids DESC
LIMIT 50;

-- @query example_hbm_peak_per_chip
-- HBM peak per chip
SELECT run_id, chip, counter, max(value) / 2^30 AS peak_gib
FROM counter_samples
WHERE unit = 'bytes'
GROUP BY ALL ORDER BY run_id, chip;

-- @module store.faults
-- Which blocks a store file's data uses (profiler/store_faults.py's check_blocks: a file shorter than its header
-- says is refused when it ends before the last block its tables or metadata use).

-- @query tables
-- The tables of the store's own database (not of attached or TEMP ones).
-- @column schema_name VARCHAR Schema.
-- @column table_name VARCHAR Table.
SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database();

-- @query metadata_last_block
-- The last block the database's metadata uses (NULL: none).
-- @column last_block BIGINT Its block id.
SELECT max(block_id) AS last_block FROM pragma_metadata_info();

-- @query table_last_block
-- The last block one table's data uses (NULL: none).
-- @param table VARCHAR The table, quoted: "schema"."name" (NULL: scprof_meta, which every store has).
-- @column last_block BIGINT Its block id.
SELECT max(block_id) AS last_block FROM pragma_storage_info(coalesce($table, 'scprof_meta'));

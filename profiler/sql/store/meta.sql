-- @module store.meta
-- The store's own bookkeeping, read and written by profiler/store.py when it opens a store: scprof_meta's keys
-- (schema_version, the digests of the DDL and of the standard library's SQL), and what the store's catalog holds
-- (whether scprof_meta exists, the events table's columns, every table and view).

-- @query has_meta
-- Whether the database has an scprof_meta table (else it is empty, or not an scprof store).
-- @column n BIGINT 1 when scprof_meta exists, else 0.
SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'scprof_meta';

-- @query meta_value
-- The value stored under one scprof_meta key (no row: none stored).
-- @param key VARCHAR The key: schema_version, ddl_sha1 or stdlib_sha1.
-- @column value VARCHAR Its value.
SELECT value FROM scprof_meta WHERE key = $key;

-- @statement set_meta
-- Stores (replaces) the value of one scprof_meta key.
-- @param key VARCHAR The key.
-- @param value VARCHAR Its value.
INSERT OR REPLACE INTO scprof_meta VALUES ($key, $value);

-- @query events_columns
-- The columns the store's events table has (none: no events table yet).
-- @column column_name VARCHAR A column of events.
SELECT column_name FROM information_schema.columns WHERE table_name = 'events';

-- @query object_names
-- Every table and (not internal) view of the database, the TEMP ones included.
-- @column table_name VARCHAR A table's or view's name.
SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal;

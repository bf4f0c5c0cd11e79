-- @module ui.console
-- The SQL console's reads of the store's catalog (ui/pages/sql.py): its tables and views, and their columns, with the
-- documentation the schema's COMMENTs give them.

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

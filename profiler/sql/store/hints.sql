-- @module store.hints
-- The store's catalog, read to explain a user's failed query (profiler/sql_hints.py): which views expose a column,
-- what each view reads, which columns a table has.

-- @query views
-- The store's views (not DuckDB's own), with the SQL that defines them; a read-only open of a store whose library
-- is older reads TEMP views of the new SQL (profiler/store.py), named here too.
-- @column view_name VARCHAR The view.
-- @column sql VARCHAR Its CREATE VIEW statement.
SELECT view_name, arg_max(sql, database_name = 'temp') AS sql
FROM duckdb_views()
WHERE database_name IN (current_database(), 'temp') AND NOT internal
GROUP BY view_name
ORDER BY view_name;

-- @query columns
-- The columns of the store's tables and views (the TEMP ones too).
-- @column table_name VARCHAR The table or view.
-- @column column_name VARCHAR One of its columns.
SELECT table_name, column_name
FROM information_schema.columns
WHERE table_catalog IN (current_database(), 'temp')
ORDER BY table_name, table_catalog = 'temp', ordinal_position;

-- @query parse
-- A SELECT's parse tree as JSON (DuckDB's parser only: nothing is bound or run); {"error": true, ...} when it does
-- not parse or is not a SELECT.
-- @param sql VARCHAR The statement.
-- @column tree VARCHAR The tree.
SELECT json_serialize_sql($sql) AS tree;

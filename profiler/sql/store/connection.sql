-- @module store.connection
-- The settings profiler/store.py gives a connection it opens: no progress bar on every connection, and on a
-- read-only one (users' SQL runs there) no file-system access, a bounded buffer pool, then the configuration
-- locked. Run in this order (nothing can be set once lock_configuration is).

-- @query lock_configuration
-- Whether the connection's configuration is locked (a second read-only open in one process shares the first's
-- database, locked already).
-- @column locked BOOLEAN current_setting('lock_configuration').
SELECT current_setting('lock_configuration') AS locked;

-- @query external_access
-- Whether the connection may reach the file system (enable_external_access).
-- @column external_access BOOLEAN current_setting('enable_external_access').
SELECT current_setting('enable_external_access') AS external_access;

-- @statement no_progress_bar
-- DuckDB's own progress bar would write to stdout in the middle of scprof's output.
SET enable_progress_bar = false;

-- @statement no_external_access
-- Keeps users' SQL on a read-only connection away from the file system.
SET enable_external_access = false;

-- @statement memory_limit
-- Bounds DuckDB's buffer pool (which otherwise keeps every block a long scan reads, up to 80% of RAM): past the
-- limit DuckDB evicts or spills. NULL leaves it as it is.
-- @param limit VARCHAR A DuckDB memory size, e.g. '1GB' or '512MB'.
SET memory_limit = coalesce($limit, current_setting('memory_limit'));

-- @statement lock_configuration_now
-- Locks the connection's configuration (users' SQL cannot undo the settings above).
SET lock_configuration = true;

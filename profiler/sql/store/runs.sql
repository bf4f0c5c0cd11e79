-- @module store.runs
-- The store's runs as profiler/store.py and profiler/safe_output.py look them up: a run a user names (by id, name
-- or uuid prefix), and the source files of stored runs (which exports never overwrite).

-- @query resolve
-- The runs `ref` may name: its run_id, its name, or (6 characters or more) a prefix of its uuid; an exact name
-- first, then by run_id.
-- @param ref VARCHAR What the user typed.
-- @column run_id INTEGER A run it names.
SELECT run_id FROM runs
WHERE CAST(run_id AS VARCHAR) = $ref OR name = $ref OR (length($ref) >= 6 AND uuid LIKE $ref || '%')
ORDER BY (name = $ref) DESC, run_id;

-- @query names
-- Every run's name, oldest first (an error names the runs there are).
-- @column name VARCHAR The run's name.
SELECT name FROM runs ORDER BY run_id;

-- @query count_named
-- How many runs are named `name`.
-- @param name VARCHAR A run name.
-- @column n BIGINT Runs of that name.
SELECT count(*) AS n FROM runs WHERE name = $name;

-- @query source_paths
-- The source file of every stored run that has one, as given to ingest, oldest run first.
-- @column name VARCHAR The run's name.
-- @column source_path VARCHAR Its source file.
SELECT name, source_path FROM runs WHERE source_path IS NOT NULL ORDER BY run_id;

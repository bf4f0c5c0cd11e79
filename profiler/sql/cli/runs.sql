-- @module cli.runs
-- The runs table as the commands read it (scprof/: the CLI and the MCP tools; whatif/: the what-if
-- sessions they run): a run's row, its name, status and stamp, and the checks before a run is stored.

-- @query run
-- A run's row (every column of runs).
-- @param run INTEGER The run.
SELECT * FROM runs WHERE run_id = $run;

-- @query run_name
-- A run's name.
-- @param run INTEGER The run.
-- @column name VARCHAR runs.name.
SELECT name FROM runs WHERE run_id = $run;

-- @query run_status
-- A run's name, status and tags (a failed run's tags say why).
-- @param run INTEGER The run.
-- @column name VARCHAR runs.name.
-- @column status VARCHAR runs.status.
-- @column tags JSON runs.tags.
SELECT name, status, tags FROM runs WHERE run_id = $run;

-- @query runs_named
-- The runs of the given names.
-- @param names VARCHAR[] The names.
-- @column name VARCHAR runs.name.
-- @column run_id INTEGER runs.run_id.
SELECT name, run_id FROM runs WHERE name IN (SELECT unnest($names));

-- @query runs_of_uuid
-- The runs of a uuid.
-- @param uuid VARCHAR The uuid.
-- @column run_id INTEGER runs.run_id.
SELECT run_id FROM runs WHERE uuid = $uuid;

-- @query name_taken
-- One row when a run has this name.
-- @param name VARCHAR The name.
-- @column taken INTEGER 1.
SELECT 1 AS taken FROM runs WHERE name = $name;

-- @query clash
-- The first run that a new run of this name or uuid would clash with.
-- @param name VARCHAR The new run's name.
-- @param uuid VARCHAR The new run's uuid.
-- @column run_id INTEGER runs.run_id.
-- @column name VARCHAR runs.name.
-- @column uuid VARCHAR runs.uuid.
SELECT run_id, name, uuid FROM runs WHERE name = $name OR uuid = $uuid LIMIT 1;

-- @query identities
-- Every run's id, name, uuid and source, by id.
-- @column run_id INTEGER runs.run_id.
-- @column name VARCHAR runs.name.
-- @column uuid VARCHAR runs.uuid.
-- @column source_path VARCHAR runs.source_path.
SELECT run_id, name, uuid, source_path FROM runs ORDER BY run_id;

-- @query source_paths
-- Every run's source path (NULL where none).
-- @column source_path VARCHAR runs.source_path.
SELECT source_path FROM runs;

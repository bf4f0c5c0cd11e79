-- @module ui.runs
-- The UI's reads of one run's header and strings, shared by its pages and the trace viewer (ui/data.py,
-- ui/store_access.py, ui/trace_api.py, ui/whatif_data.py, ui/downloads.py, ui/warmup.py). Times are picoseconds.
-- @include stdlib.steps

-- @query run
-- Every column of one run (hardware header, config, tags, extent): the columns of the runs table.
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM runs WHERE run_id = $run;

-- @query timed_steps
-- The steps of one run that have a step time (step_times rows): what `scprof runs` lists as steps, so every
-- surface counts a run's steps one way (runs.steps counts the distinct step ids its events carry).
-- @param run INTEGER The run (runs.run_id).
-- @column steps BIGINT Steps with a step time; 0 for a run without steps.
SELECT count(*) AS steps FROM step_times WHERE run_id = $run;

-- @query run_key
-- What identifies a run's content, for caching analyses (an id can be reused after a delete).
-- @param run INTEGER The run (runs.run_id).
-- @column run_id INTEGER The run.
-- @column uuid VARCHAR The run's uuid.
-- @column ingested_at VARCHAR When it was ingested, as text.
-- @column events BIGINT Its number of events.
SELECT run_id, uuid, CAST(ingested_at AS VARCHAR) AS ingested_at, events FROM runs WHERE run_id = $run;

-- @query run_names
-- Every run's id and name, by id, and whether it is a what-if trial (the run pickers' options).
-- @column run_id INTEGER The run.
-- @column name VARCHAR Its name.
-- @column trial BOOLEAN Whether it is a what-if trial (it has a whatif_origin tag).
SELECT run_id, name, json_extract_string(tags, '$.whatif_origin') IS NOT NULL AS trial FROM runs ORDER BY run_id;

-- @query run_name
-- One run's name (no row: no such run).
-- @param run INTEGER The run (runs.run_id).
-- @column name VARCHAR Its name.
SELECT name FROM runs WHERE run_id = $run;

-- @query run_exists
-- One row when the run is stored, none otherwise.
-- @param run INTEGER The run (runs.run_id).
-- @column 1 INTEGER Always 1.
SELECT 1 FROM runs WHERE run_id = $run;

-- @query newest_runs
-- The ids of the $runs newest runs, newest first (what the UI warms up).
-- @param runs BIGINT How many.
-- @column run_id INTEGER The run.
SELECT run_id FROM runs ORDER BY run_id DESC LIMIT $runs;

-- @query string_ids
-- The ids of some strings of a run (exact values), to filter events by integer id instead of joining names.
-- @param run INTEGER The run (runs.run_id).
-- @param values VARCHAR[] The strings.
-- @column string_id INTEGER The string's id (strings.string_id).
-- @column value VARCHAR The string.
SELECT string_id, value FROM strings WHERE run_id = $run AND list_contains($values, value);

-- @query names_of
-- The strings of some string ids of a run.
-- @param run INTEGER The run (runs.run_id).
-- @param ids INTEGER[] The string ids.
-- @column string_id INTEGER The string's id (strings.string_id).
-- @column value VARCHAR The string.
SELECT string_id, value FROM strings WHERE run_id = $run AND list_contains($ids, string_id);

-- @module export.xspace
-- The XSpace export's reads (exporters/xspace.py, exporters/xspace_kept.py): one run, all of it or the
-- events of steps [$step_a, $step_b) (--steps A:B). $all_steps TRUE keeps every step (the step bounds NULL).

-- @query run
-- The run's row of runs (every column).
-- @param run INTEGER The run.
SELECT * FROM runs WHERE run_id = $run;

-- @query strings
-- The run's strings, by id.
-- @param run INTEGER The run.
-- @column string_id INTEGER The string id.
-- @column value VARCHAR The string.
SELECT string_id, value FROM strings WHERE run_id = $run ORDER BY string_id;

-- @query tracks
-- The run's tracks (every column of tracks), by id.
-- @param run INTEGER The run.
SELECT * FROM tracks WHERE run_id = $run ORDER BY track_id;

-- @query events
-- The kept events by track, then start: ids, times, and the typed fields with NULL as -1 (string ids: 0).
-- @generated tools/gen_sql.py (the integer typed fields of profiler/xspace/map_names.py's INT_COLUMNS)
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: every step.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
SELECT event_id, track_id, name_id, start_ps, dur_ps,
       coalesce(step, -1) AS step, coalesce(table_id, 0) AS table_id, coalesce(category_id, 0) AS category_id,
       coalesce(sc, -1) AS sc, coalesce(minibatch, -1) AS minibatch, coalesce(ids, -1) AS ids, coalesce(unique_ids, -1) AS unique_ids, coalesce(dropped_ids, -1) AS dropped_ids, coalesce(bytes, -1) AS bytes, coalesce(flops, -1) AS flops
FROM events WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b)) ORDER BY track_id, start_ps, event_id;

-- @query event_nulls
-- Which of the kept events' integer typed fields (and step) are NULL, in the order of `events`.
-- @generated tools/gen_sql.py (the integer typed fields of profiler/xspace/map_names.py's INT_COLUMNS)
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: every step.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
SELECT sc IS NULL AS sc, minibatch IS NULL AS minibatch, ids IS NULL AS ids, unique_ids IS NULL AS unique_ids, dropped_ids IS NULL AS dropped_ids, bytes IS NULL AS bytes, flops IS NULL AS flops, step IS NULL AS step
FROM events WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b)) ORDER BY track_id, start_ps, event_id;

-- @query event_args
-- The kept events' event_args.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: every step.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @column event_id BIGINT The event.
-- @column key VARCHAR The key.
-- @column int_value BIGINT Its integer value, if one.
-- @column double_value DOUBLE Its float value, if one.
-- @column string_value VARCHAR Its text value, if one.
SELECT a.event_id, a.key, a.int_value, a.double_value, a.string_value FROM event_args a
WHERE a.run_id = $run AND a.event_id IN (
  SELECT event_id FROM events WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b)));

-- @query counters
-- The run's counter samples by track, then time; with $all_samples FALSE only those in [$ts_a, $ts_b].
-- @param run INTEGER The run.
-- @param all_samples BOOLEAN TRUE: every sample (the bounds NULL).
-- @param ts_a BIGINT First time kept (ps).
-- @param ts_b BIGINT Last time kept (ps).
-- @column track_id INTEGER The counter's track.
-- @column ts_ps BIGINT Sample time.
-- @column value DOUBLE Sample value.
SELECT track_id, ts_ps, value FROM counters
WHERE run_id = $run AND ($all_samples OR (ts_ps >= $ts_a AND ts_ps <= $ts_b))
ORDER BY track_id, ts_ps;

-- @query markers
-- The kept step markers by track, then start.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: every step.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @column track_id INTEGER The track.
-- @column step BIGINT The step.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
SELECT track_id, step, start_ps, dur_ps FROM steps
WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b))
ORDER BY track_id, start_ps;

-- @query has_kept_space
-- One row when the run is an imported capture that kept its XSpace.
-- @param run INTEGER The run.
-- @column kept INTEGER 1.
SELECT 1 AS kept FROM xspace_files WHERE run_id = $run LIMIT 1;

-- @query kept_files
-- The kept XSpace's hosts and their files' names.
-- @param run INTEGER The run.
-- @column host INTEGER The host.
-- @column file VARCHAR The capture's file name of that host.
SELECT host, file FROM xspace_files WHERE run_id = $run ORDER BY host;

-- @query kept_space
-- One host's kept XSpace (planes, metadata, line headers; no events).
-- @param run INTEGER The run.
-- @param host INTEGER The host.
-- @column space BLOB The serialized space.
SELECT space FROM xspace_files WHERE run_id = $run AND host = $host;

-- @query kept_events
-- One host's kept XEvents, with their plane and line, by event id.
-- @param run INTEGER The run.
-- @param host INTEGER The host.
-- @column plane INTEGER The plane's index in the space.
-- @column line INTEGER The line's index in the plane.
-- @column xevent BLOB The XEvent message.
SELECT plane, line, xevent FROM xspace_events x WHERE x.run_id = $run AND x.host = $host ORDER BY x.event_id;

-- @query kept_events_of_steps
-- One host's kept XEvents of steps [$step_a, $step_b), with their plane and line, by event id.
-- @param run INTEGER The run.
-- @param host INTEGER The host.
-- @param step_a BIGINT First step kept.
-- @param step_b BIGINT First step after those kept.
-- @column plane INTEGER The plane's index in the space.
-- @column line INTEGER The line's index in the plane.
-- @column xevent BLOB The XEvent message.
SELECT plane, line, xevent FROM xspace_events x
WHERE x.run_id = $run AND x.host = $host
  AND x.event_id IN (SELECT event_id FROM events WHERE run_id = $run AND step >= $step_a AND step < $step_b)
ORDER BY x.event_id;

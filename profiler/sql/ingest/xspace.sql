-- @module ingest.xspace
-- The store's writes of an imported capture (profiler/xspace/store.py for XSpace and Chrome trace JSON
-- imports, profiler/xspace/source.py for the kept XSpace bytes), each from an Arrow table registered as `b`
-- while it runs. Strings, tracks, counters and steps go in by profiler/sql/ingest/trace.sql's statements.

-- @statement insert_events
-- An import's events, by name (their typed columns already NULL where missing).
-- @param run INTEGER The run.
-- @input b(event_id BIGINT, track_id INTEGER, name_id INTEGER, start_ps BIGINT, dur_ps BIGINT, step INTEGER, table_id INTEGER, sc INTEGER, minibatch INTEGER, ids BIGINT, unique_ids BIGINT, dropped_ids BIGINT, bytes BIGINT, flops BIGINT, category_id INTEGER) The events (the events table's columns but run_id).
INSERT INTO events BY NAME SELECT $run AS run_id, * FROM b;

-- @statement insert_args
-- An import's event arguments, their keys and text values resolved to strings (string_id 0: no text).
-- @param run INTEGER The run (its strings are in).
-- @input b(event_id BIGINT, key BIGINT, int_value BIGINT, double_value DOUBLE, string_id BIGINT) The arguments.
INSERT INTO event_args
SELECT $run, a.event_id, k.value, a.int_value, a.double_value,
       CASE WHEN a.string_id <> 0 THEN s.value END
FROM b a JOIN strings k ON k.run_id = $run AND k.string_id = a.key
LEFT JOIN strings s ON s.run_id = $run AND s.string_id = a.string_id;

-- @statement insert_files
-- The kept XSpace of each file (its events' bytes cut out).
-- @param run INTEGER The run.
-- @input b(host INTEGER, file VARCHAR, space BLOB) The files.
INSERT INTO xspace_files SELECT $run, host, file, space FROM b;

-- @statement insert_kept_events
-- Each kept event's XEvent bytes.
-- @param run INTEGER The run.
-- @input b(event_id BIGINT, host INTEGER, plane INTEGER, line INTEGER, xevent BLOB) The events.
INSERT INTO xspace_events SELECT $run, event_id, host, plane, line, xevent FROM b;

-- @module ingest.chrome_json
-- The Chrome trace JSON import (profiler/chrome_json_to_store.py), in the order it runs: the parse's
-- settings, the table `raw` filled from NDJSON blocks by DuckDB's JSON reader, then the mapping of planes,
-- lines, events, times, typed fields, strings, arguments and counters, each a table of the parse's own
-- in-memory connection (never the store's). docs/trace-format.md, "Chrome trace JSON mapping", says what
-- maps to what.
-- Its queries read the tables its statements made before them, so their columns are named in their docs
-- (an @column is checked on a bare store, which holds none of these tables).

-- @statement no_progress_bar
-- The parse prints nothing.
SET enable_progress_bar = false;

-- @statement spill_to
-- Where the parse's tables spill past its memory limit (an in-memory database has no directory of its own).
-- @param dir VARCHAR A directory of the parse's temporary folder.
SET temp_directory = $dir;

-- @statement memory_limit
-- The parse's memory limit: its tables spill to its temporary directory past it.
SET memory_limit = '1GB';

-- @statement create_raw
-- The trace's events as read: each field as its JSON text (VARCHAR) or as JSON.
CREATE TABLE raw (ph VARCHAR, name VARCHAR, cat VARCHAR, pid VARCHAR, tid VARCHAR, ts VARCHAR, dur VARCHAR, id VARCHAR, args JSON);

-- @statement read_block
-- One NDJSON block of the trace's events (profiler/chrome_json_scan.py) appended to `raw`, read by
-- DuckDB's JSON reader: `ts` and `dur` as text (read as exact decimals later), pid, tid, id and args as JSON.
-- The reader's maximum_object_size is chrome_json_scan.MAX_EVENT_BYTES (64 MiB), the largest event a
-- block holds (tests/profiler/test_chrome_json.py checks the two agree).
-- @param path VARCHAR The block's NDJSON file (NULL reads /dev/null: nothing).
INSERT INTO raw SELECT ph, name, cat, pid, tid, ts, dur, id, args FROM read_json(coalesce($path, '/dev/null'), format = 'newline_delimited', columns = {ph: 'VARCHAR', name: 'VARCHAR', cat: 'VARCHAR', pid: 'JSON', tid: 'JSON', ts: 'VARCHAR', dur: 'VARCHAR', id: 'JSON', args: 'JSON'}, maximum_object_size = 67108864);

-- @statement planes
-- Step 1: planes (processes): a process is its `process_name` when that is an XProf plane name, a GPU
-- plane for Kineto's GPU processes, else '/host:CPU'.
CREATE TABLE planes AS
WITH p AS (
    SELECT pid,
           arg_max(json_extract_string(args, '$.name'), rowid) FILTER (WHERE ph = 'M' AND name = 'process_name') AS pname,
           arg_max(json_extract_string(args, '$.labels'), rowid) FILTER (WHERE ph = 'M' AND name = 'process_labels') AS labels,
           bool_or(cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'gpu_user_annotation')) AS gpu_work,
           min(TRY_CAST(json_extract(args, '$.device') AS INTEGER)) FILTER (WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')) AS device
    FROM raw GROUP BY pid
)
SELECT pid,
       CASE WHEN pname LIKE '/%' THEN pname
            WHEN regexp_matches(labels, '^GPU \d+') THEN '/device:GPU:' || regexp_extract(labels, '^GPU (\d+)', 1)
            WHEN gpu_work THEN '/device:GPU:' || coalesce(device, TRY_CAST(pid AS INTEGER), 0)
            ELSE '/host:CPU' END AS plane
FROM p;

-- @statement threads
-- Step 1: the threads' names (a thread is a line).
CREATE TABLE threads AS
SELECT pid, tid, trim(arg_max(json_extract_string(args, '$.name'), rowid)) AS tname
FROM raw WHERE ph = 'M' AND name = 'thread_name' GROUP BY ALL;

-- @statement events
-- Step 2: the events with their plane and times (decimal microseconds, exact): `X` and instants as
-- they are, `B`/`E` pairs (per thread, nested) as one event.
CREATE TABLE ev AS
WITH x AS (
    SELECT r.rowid AS i, r.ph, coalesce(r.name, '') AS name, r.cat, r.pid, r.tid, r.args,
           TRY_CAST(r.ts AS DECIMAL(38, 9)) AS ts, coalesce(TRY_CAST(r.dur AS DECIMAL(38, 9)), 0) AS dur, p.plane
    FROM raw r JOIN planes p USING (pid)
    WHERE r.ph IN ('X', 'B', 'E', 'i', 'I', 'R')
),
be AS (
    SELECT *, CASE ph WHEN 'B' THEN d ELSE d + 1 END AS lvl
    FROM (SELECT *, sum(CASE ph WHEN 'B' THEN 1 ELSE -1 END) OVER (PARTITION BY pid, tid ORDER BY i) AS d
          FROM x WHERE ph IN ('B', 'E'))
),
ranked AS (SELECT *, row_number() OVER (PARTITION BY pid, tid, lvl, ph ORDER BY i) AS k FROM be),
pairs AS (
    SELECT b.i, b.ph, b.name, b.cat, b.pid, b.tid, b.args, b.ts, e.ts - b.ts AS dur, b.plane
    FROM ranked b LEFT JOIN ranked e ON e.ph = 'E' AND e.pid = b.pid AND e.tid = b.tid AND e.lvl = b.lvl AND e.k = b.k
    WHERE b.ph = 'B'
)
SELECT i, ph, name, cat, pid, tid, args, ts, CASE WHEN ph = 'X' THEN dur ELSE 0 END AS dur, plane
FROM x WHERE ph NOT IN ('B', 'E')
UNION ALL SELECT i, ph, name, cat, pid, tid, args, ts, coalesce(dur, 0), plane FROM pairs;

-- @statement lines
-- Step 2: each event's line: 'Annotations' for spans over ops (GPU annotations, profiler spans), 'Steps'
-- for Kineto's host `ProfilerStep#N` (chrome_json_to_store.ANNOTATIONS_LINE, STEPS_LINE, _STEP_RE), else
-- its thread's name.
CREATE TABLE ev_lines AS
SELECT e.i,
       CASE WHEN e.cat = 'gpu_user_annotation' OR (e.cat = 'Trace' AND TRY_CAST(e.pid AS BIGINT) IS NULL)
                THEN 'Annotations'
            WHEN e.plane NOT LIKE '/device:%' AND regexp_matches(e.name, '^ProfilerStep#(\d+)$') THEN 'Steps'
            ELSE coalesce(nullif(t.tname, ''), 'thread ' || trim(e.tid, '"')) END AS line
FROM ev e LEFT JOIN threads t USING (pid, tid);

-- @query skipped
-- The events of phases not stored (flows, async, object events, ...), counted by phase.
-- ph (VARCHAR): The phase (NULL: none given).
-- events (BIGINT): Its events.
SELECT ph, count(*) AS events FROM raw WHERE ph NOT IN ('X', 'B', 'E', 'i', 'I', 'R', 'M', 'C') OR ph IS NULL GROUP BY ALL;

-- @query event_count
-- The events to store, and the first without a numeric `ts`.
-- events (BIGINT): Events.
-- first_bad (BIGINT): Its row in `raw` (NULL: none).
SELECT count(*) AS events, min(i) FILTER (WHERE ts IS NULL) AS first_bad FROM ev;

-- @query counter_count
-- The counter samples (`C` events).
-- samples (BIGINT): `C` events.
SELECT count(*) AS samples FROM raw WHERE ph = 'C';

-- @query origin
-- The run's origin: the earliest event's or counter sample's `ts` (microseconds).
-- origin_us (DECIMAL(38,9)): The earliest ts.
SELECT least(min(ts), (SELECT min(TRY_CAST(ts AS DECIMAL(38, 9))) FROM raw WHERE ph = 'C')) AS origin_us FROM ev;

-- @statement times
-- Start and duration of each event, in ps after the origin.
-- @param origin DECIMAL(38,9) The origin (query origin), microseconds.
CREATE TABLE ev_ps AS
SELECT i, CAST(round((ts - $origin::DECIMAL(38, 9)) * 1000000) AS HUGEINT) AS start_ps,
       CAST(round(dur * 1000000) AS HUGEINT) AS dur_ps FROM ev;

-- @query bad_time
-- The first event whose time breaks the XSpace import's limits: a negative duration, or a start or an end
-- past the largest time a run spans.
-- i (BIGINT): Its row in `raw`.
-- start_ps (HUGEINT): Its start after the origin.
-- dur_ps (HUGEINT): Its duration.
-- @param max_time_ps BIGINT The exclusive bound of starts and ends (profiler/xspace/check.MAX_TIME_PS).
SELECT i, start_ps, dur_ps FROM ev_ps
WHERE dur_ps < 0 OR start_ps >= $max_time_ps OR start_ps + dur_ps >= $max_time_ps
ORDER BY i LIMIT 1;

-- @statement create_typed_names
-- The stat names read into typed columns.
CREATE TABLE typed_names (stat VARCHAR, field VARCHAR, rank INTEGER, is_str BOOLEAN);

-- @statement typed_names
-- Each stat name read into a typed column (profiler/xspace/map_names.TYPED_FIELDS' xspace_read): its
-- field, its rank among the field's names (later names win) and whether the field holds a string.
-- @generated tools/gen_sql.py from profiler/xspace/map_names.py TYPED_FIELDS
INSERT INTO typed_names VALUES
    ('step_num', 'step', 0, false),
    ('group_id', 'step', 1, false),
    ('table', 'table', 0, true),
    ('table_name', 'table', 1, true),
    ('sc', 'sc', 0, false),
    ('sparse_core', 'sc', 1, false),
    ('minibatch', 'minibatch', 0, false),
    ('ids', 'ids', 0, false),
    ('unique_ids', 'unique_ids', 0, false),
    ('dropped_ids', 'dropped_ids', 0, false),
    ('bytes', 'bytes', 0, false),
    ('bytes_accessed', 'bytes', 1, false),
    ('bytes_transferred', 'bytes', 2, false),
    ('flops', 'flops', 0, false),
    ('hlo_category', 'category', 0, true),
    ('category', 'category', 1, true);

-- @statement arg_rows
-- Every arg as a row, parsed once: its key, int, double or text value, and the typed field it may fill.
CREATE TABLE arg_rows AS
WITH j AS (
    SELECT e.i, j.key, j.type, j.value,
           CASE WHEN j.type IN ('BIGINT', 'UBIGINT') THEN TRY_CAST(j.value::VARCHAR AS BIGINT) END AS ival
    FROM ev e, json_each(e.args) j WHERE json_type(e.args) = 'OBJECT'
)
SELECT j.i, j.key, j.type, j.ival,
       CASE WHEN j.type = 'DOUBLE' THEN TRY_CAST(j.value::VARCHAR AS DOUBLE) END AS dval,
       CASE WHEN j.type = 'VARCHAR' THEN j.value ->> '$'
            WHEN j.type IN ('DOUBLE', 'NULL') OR j.ival IS NOT NULL THEN NULL
            ELSE j.value::VARCHAR END AS text,
       n.field, n.rank, n.stat,
       CASE WHEN n.is_str THEN NULL ELSE coalesce(j.ival, TRY_CAST(j.value ->> '$' AS BIGINT)) END AS typed_int,
       CASE WHEN n.is_str AND j.type = 'VARCHAR' THEN j.value ->> '$' END AS typed_str
FROM j LEFT JOIN typed_names n ON n.stat = j.key;

-- @statement untyped_args
-- Args whose value cannot fill their typed column stay arguments.
-- @param null_int BIGINT The int columns' missing value (profiler/xspace/check.NULL).
UPDATE arg_rows SET field = NULL
WHERE field IS NOT NULL AND NOT (typed_int IS NOT NULL AND typed_int > $null_int OR typed_str IS NOT NULL);

-- @statement typed
-- The typed columns' values per event and field (the later stat name wins).
CREATE TABLE typed AS
SELECT i, field, arg_max(typed_int, rank) AS ival, arg_max(typed_str, rank) AS sval,
       bool_or(stat = 'step_num') AS step_num
FROM arg_rows WHERE field IS NOT NULL GROUP BY ALL;

-- @statement strings
-- Every string the run stores, interned: id 1.. in no particular order (0 is '').
CREATE TABLE strs AS
SELECT s, (row_number() OVER ())::BIGINT AS id FROM (
    SELECT DISTINCT s FROM (
        SELECT name AS s FROM ev UNION ALL SELECT plane FROM ev UNION ALL SELECT line FROM ev_lines
        UNION ALL SELECT sval FROM typed UNION ALL SELECT 'cat' UNION ALL SELECT cat FROM ev
        UNION ALL SELECT key FROM arg_rows UNION ALL SELECT text FROM arg_rows WHERE field IS NULL
        UNION ALL SELECT 'device_compute' UNION ALL SELECT 'host_preprocess'
    ) WHERE s IS NOT NULL AND s <> ''
);

-- @query string_count
-- The interned strings.
-- strings (BIGINT): Strings (the largest id).
SELECT count(*) AS strings FROM strs;

-- @query string_ids
-- The interned strings.
-- id (BIGINT): Its id.
-- s (VARCHAR): The string.
SELECT id, s FROM strs;

-- @query tracks
-- One track per (plane, line), in the order of their first events, and whether the line runs `cpu_op` events.
-- plane (VARCHAR): Plane.
-- line (VARCHAR): Line.
-- first (BIGINT): Its first event's row in `raw`.
-- ops (BOOLEAN): Whether it holds a `cpu_op` event.
SELECT e.plane, l.line, min(e.i) AS first, bool_or(e.cat = 'cpu_op') AS ops
FROM ev e JOIN ev_lines l USING (i) GROUP BY ALL ORDER BY first;

-- @statement create_track_ids
-- The tracks' ids (the Decoded's), by plane and line.
CREATE TABLE track_ids (track INTEGER, plane VARCHAR, line VARCHAR);

-- @statement track_id
-- One track's id.
-- @param track INTEGER The id.
-- @param plane VARCHAR Its plane.
-- @param line VARCHAR Its line.
INSERT INTO track_ids VALUES ($track, $plane, $line);

-- @statement event_columns
-- The events' columns, in file order: track, name id, times, plane id, whether a step marker (Kineto's
-- `ProfilerStep#N` on the 'Steps' line, or a `step_num` arg), and a column f_<field> per typed field
-- (a string field: its string id).
-- @generated tools/gen_sql.py from profiler/xspace/map_names.py TYPED_FIELDS
CREATE TABLE ev_cols AS
SELECT e.i, k.track, n.id AS name, p.start_ps::BIGINT AS start_ps, p.dur_ps::BIGINT AS dur_ps,
       pl.id AS plane_id, l.line = 'Steps' AS is_step_line,
       TRY_CAST(regexp_extract(e.name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS profiler_step,
       coalesce(bool_or(y.step_num), false) AS has_step_num,
       max(CASE WHEN y.field = 'step' THEN y.ival END) AS f_step,
       max(CASE WHEN y.field = 'table' THEN sv.id END) AS f_table,
       max(CASE WHEN y.field = 'sc' THEN y.ival END) AS f_sc,
       max(CASE WHEN y.field = 'minibatch' THEN y.ival END) AS f_minibatch,
       max(CASE WHEN y.field = 'ids' THEN y.ival END) AS f_ids,
       max(CASE WHEN y.field = 'unique_ids' THEN y.ival END) AS f_unique_ids,
       max(CASE WHEN y.field = 'dropped_ids' THEN y.ival END) AS f_dropped_ids,
       max(CASE WHEN y.field = 'bytes' THEN y.ival END) AS f_bytes,
       max(CASE WHEN y.field = 'flops' THEN y.ival END) AS f_flops,
       max(CASE WHEN y.field = 'category' THEN sv.id END) AS f_category
FROM ev e JOIN ev_lines l USING (i) JOIN ev_ps p USING (i)
JOIN track_ids k ON k.plane = e.plane AND k.line = l.line
LEFT JOIN strs n ON n.s = e.name JOIN strs pl ON pl.s = e.plane
LEFT JOIN typed y USING (i) LEFT JOIN strs sv ON sv.s = y.sval
GROUP BY ALL ORDER BY e.i;

-- @query event_rows
-- The events' columns (statement event_columns), in file order.
SELECT * FROM ev_cols ORDER BY i;

-- @query cpu_ops
-- Per event, in file order: whether it is a `cpu_op` (NULL: no category).
-- op (BOOLEAN): Whether its `cat` is 'cpu_op'.
SELECT cat = 'cpu_op' AS op FROM ev_cols c JOIN ev USING (i) ORDER BY i;

-- @query args
-- Every arg not read into a typed column, and `cat`, as event_args rows (ids of `strs`).
-- event_id (BIGINT): The event (its position in file order).
-- key (BIGINT): The arg's name.
-- int_value (BIGINT): An integer value.
-- double_value (DOUBLE): A floating value.
-- string_id (BIGINT): A text value.
SELECT c.rowid AS event_id, k.id AS key, a.ival AS int_value, a.dval AS double_value, v.id AS string_id
FROM arg_rows a JOIN ev_cols c USING (i) JOIN strs k ON k.s = a.key LEFT JOIN strs v ON v.s = a.text
WHERE a.field IS NULL
UNION ALL
SELECT c.rowid, (SELECT id FROM strs WHERE s = 'cat'), NULL, NULL, v.id
FROM ev_cols c JOIN ev e USING (i) JOIN strs v ON v.s = e.cat
ORDER BY event_id;

-- @statement samples
-- `C` events: a sample per event and numeric key, on the counter '<name>' (one key) or '<name> <key>'.
-- @param origin DECIMAL(38,9) The run's origin (query origin), microseconds.
CREATE TABLE samples AS
SELECT p.plane, CASE WHEN count(*) OVER (PARTITION BY r.rowid) = 1 THEN coalesce(r.name, 'counter')
                     ELSE coalesce(r.name, 'counter') || ' ' || j.key END AS counter,
       CAST(round((TRY_CAST(r.ts AS DECIMAL(38, 9)) - $origin::DECIMAL(38, 9)) * 1000000) AS HUGEINT) AS ts_ps,
       TRY_CAST(j.value::VARCHAR AS DOUBLE) AS value, r.rowid AS i
FROM raw r JOIN planes p USING (pid), json_each(r.args) j
WHERE r.ph = 'C' AND json_type(r.args) = 'OBJECT' AND j.type IN ('BIGINT', 'UBIGINT', 'DOUBLE');

-- @query bad_sample
-- The first counter sample whose time is missing or out of range.
-- i (BIGINT): Its row in `raw` (NULL: none).
-- @param max_time_ps BIGINT The exclusive bound of times (profiler/xspace/check.MAX_TIME_PS).
SELECT min(i) AS i FROM samples WHERE ts_ps IS NULL OR ts_ps < 0 OR ts_ps >= $max_time_ps;

-- @query counters
-- The counter tracks, sorted.
-- plane (VARCHAR): Plane.
-- counter (VARCHAR): Counter's name.
SELECT DISTINCT plane, counter FROM samples ORDER BY ALL;

-- @query counter_samples
-- One counter's samples, in file order.
-- ts (BIGINT): Sample time, ps after the origin.
-- value (DOUBLE): Value.
-- @param plane VARCHAR Its plane.
-- @param counter VARCHAR Its name.
SELECT ts_ps::BIGINT AS ts, value FROM samples WHERE plane = $plane AND counter = $counter ORDER BY i;

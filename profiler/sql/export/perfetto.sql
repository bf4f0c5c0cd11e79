-- @module export.perfetto
-- The Perfetto export's reads (exporters/perfetto/): one run, all of it or its steps A..B-1 (--steps A:B).
-- The filtered queries take the export's filter as parameters: $all_steps TRUE keeps the whole run (the
-- others NULL); else --steps A:B keeps events of steps [$step_a, $step_b), events without a step that start
-- inside those steps' time span [$span_a, $span_b) (step_span), their step markers, and counter samples
-- inside the span (its end included).
-- @include stdlib.steps

-- @query step_span
-- The time span of steps [$step_a, $step_b): the first start and the last end of their events and step
-- markers (NULLs when they have none).
-- @param run INTEGER The run.
-- @param step_a BIGINT First step kept.
-- @param step_b BIGINT First step after those kept.
-- @column start_ps BIGINT Earliest start.
-- @column end_ps BIGINT Latest end.
SELECT min(s) AS start_ps, max(e) AS end_ps FROM (
  SELECT start_ps AS s, start_ps + dur_ps AS e FROM events
  WHERE run_id = $run AND step >= $step_a AND step < $step_b
  UNION ALL
  SELECT start_ps, start_ps + dur_ps FROM steps
  WHERE run_id = $run AND step >= $step_a AND step < $step_b);

-- @query first_ps
-- The earliest time exported: of the events, step markers and counter samples kept.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @column first_ps BIGINT The earliest start or sample time; NULL when nothing is kept.
SELECT min(t) AS first_ps FROM (
  SELECT min(start_ps) AS t FROM events e WHERE run_id = $run
    AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                        OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
  UNION ALL SELECT min(start_ps) FROM steps WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b))
  UNION ALL SELECT min(ts_ps) FROM counters WHERE run_id = $run AND ($all_steps OR (ts_ps >= $span_a AND ts_ps <= $span_b)));

-- @query event_extent
-- The kept events' first and last start and their number (the stream's windows are planned from them).
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @column first_start_ps BIGINT Earliest start.
-- @column last_start_ps BIGINT Latest start.
-- @column events BIGINT Events kept.
SELECT min(start_ps) AS first_start_ps, max(start_ps) AS last_start_ps, count(*) AS events FROM events e
WHERE run_id = $run
  AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                      OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)));

-- @query start_histogram
-- The kept events starting in [$lo_ps, $hi_ps), counted in buckets of $width_ns from $lo_ns.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @param lo_ns BIGINT Start of the first bucket (ns).
-- @param width_ns BIGINT A bucket's width (ns).
-- @param lo_ps BIGINT Start of the range (ps).
-- @param hi_ps BIGINT End of the range (ps, excluded).
-- @column bucket BIGINT The bucket, from 0.
-- @column events BIGINT Events starting in it.
SELECT (start_ps // 1000 - $lo_ns) // $width_ns AS bucket, count(*) AS events FROM events e
WHERE run_id = $run
  AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                      OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
  AND start_ps >= $lo_ps AND start_ps < $hi_ps
GROUP BY bucket ORDER BY bucket;

-- @query tracks
-- The run's tracks, by id.
-- @param run INTEGER The run.
-- @column track_id INTEGER tracks.track_id.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column kind VARCHAR tracks.kind.
-- @column chip INTEGER tracks.chip.
-- @column core INTEGER tracks.core.
-- @column tile INTEGER tracks.tile.
-- @column unit VARCHAR tracks.unit.
SELECT track_id, plane, line, kind, chip, core, tile, unit
FROM tracks WHERE run_id = $run ORDER BY track_id;

-- @query track_events
-- The kept events per track.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @column track_id INTEGER The track.
-- @column events BIGINT Its events kept.
SELECT track_id, count(*) AS events FROM events e
WHERE run_id = $run
  AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                      OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
GROUP BY 1;

-- @query marker_tracks
-- The tracks with kept step markers.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @column track_id INTEGER The track.
SELECT DISTINCT track_id FROM steps WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b));

-- @query counter_tracks
-- The counter tracks with kept samples.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param span_a BIGINT Start of the steps' span (ps; NULL with all_steps).
-- @param span_b BIGINT End of the steps' span (ps, included).
-- @column track_id INTEGER The track.
SELECT DISTINCT track_id FROM counters WHERE run_id = $run AND ($all_steps OR (ts_ps >= $span_a AND ts_ps <= $span_b));

-- @query event_names
-- The kept events' names, most frequent first (their interning order).
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @column string_id INTEGER The name's string id.
-- @column value VARCHAR The name.
SELECT n.string_id, n.value FROM (
  SELECT name_id, count(*) AS c FROM events e WHERE run_id = $run
    AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                        OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
  GROUP BY 1) u
JOIN strings n ON n.run_id = $run AND n.string_id = u.name_id
ORDER BY u.c DESC, n.string_id;

-- @query annotation_strings
-- The strings the kept events' typed string fields name (table, ...), most frequent first: their
-- interning order as debug annotation string values.
-- @generated tools/gen_sql.py (the typed string fields of profiler/trace_fields.py the export annotates)
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @column string_id INTEGER The string id.
-- @column value VARCHAR The string.
SELECT n.string_id, n.value FROM (
  SELECT sid, count(*) AS c FROM (
    SELECT table_id AS sid FROM events e WHERE run_id = $run
      AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                      OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
      AND table_id IS NOT NULL) GROUP BY 1) u
JOIN strings n ON n.run_id = $run AND n.string_id = u.sid
ORDER BY u.c DESC, n.string_id;

-- @query arg_keys
-- The run's event_args keys, most frequent first.
-- @param run INTEGER The run.
-- @column key VARCHAR The key.
SELECT key FROM event_args WHERE run_id = $run GROUP BY key ORDER BY count(*) DESC, key;

-- @query stream
-- The rows of one time window [$lo, $hi) of the stream, merged and unsorted (DuckDB's sort of all the
-- columns cost more than the rest of the scan; exporters/perfetto/order.py orders them): kind 0 events,
-- 1 step markers, 2 counter samples, 3 step breakdown slices (the `breakdown` input, exporters/perfetto/breakdown.py,
-- empty without them: track_id is the chip, name_id the interned name), with the typed fields the export annotates.
-- @generated tools/gen_sql.py (the typed fields of profiler/trace_fields.py the export annotates)
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @param lo BIGINT Start of the window (ps).
-- @param hi BIGINT End of the window (ps, excluded).
-- @input breakdown(id BIGINT, chip BIGINT, name_iid BIGINT, start_ps BIGINT, dur_ps BIGINT, step BIGINT) Breakdown slices.
SELECT 0::BIGINT AS kind, event_id::BIGINT AS id, track_id::BIGINT AS track_id, name_id::BIGINT AS name_id,
       start_ps::BIGINT AS start_ps, dur_ps::BIGINT AS dur_ps, step::BIGINT AS step, table_id::BIGINT AS table_id, sc::BIGINT AS sc, minibatch::BIGINT AS minibatch, ids::BIGINT AS ids, unique_ids::BIGINT AS unique_ids, dropped_ids::BIGINT AS dropped_ids, bytes::BIGINT AS bytes, flops::BIGINT AS flops, NULL::DOUBLE AS value
FROM events e WHERE run_id = $run
  AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                  OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
  AND start_ps >= $lo AND start_ps < $hi
UNION ALL
SELECT 1, step, track_id, NULL, start_ps, dur_ps, step, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM steps WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b))
  AND start_ps >= $lo AND start_ps < $hi
UNION ALL
SELECT 2, rowid, track_id, NULL, ts_ps, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, value
FROM counters WHERE run_id = $run AND ($all_steps OR (ts_ps >= $span_a AND ts_ps <= $span_b))
  AND ts_ps >= $lo AND ts_ps < $hi
UNION ALL
SELECT 3, id, chip, name_iid, start_ps, dur_ps, step, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM breakdown WHERE start_ps >= $lo AND start_ps < $hi;

-- @query window_args
-- The event_args of the kept events starting in one window [$lo, $hi), by event and key.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: the whole run.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @param span_a BIGINT Start of the steps' span (ps).
-- @param span_b BIGINT End of the steps' span (ps).
-- @param lo BIGINT Start of the window (ps).
-- @param hi BIGINT End of the window (ps, excluded).
-- @column event_id BIGINT The event.
-- @column key VARCHAR The key.
-- @column int_value BIGINT Its integer value, if one.
-- @column double_value DOUBLE Its float value, if one.
-- @column string_value VARCHAR Its text value, if one.
SELECT a.event_id, a.key, a.int_value, a.double_value, a.string_value
FROM event_args a
WHERE a.run_id = $run AND a.event_id IN (
  SELECT event_id FROM events e WHERE run_id = $run
    AND ($all_steps OR ((e.step >= $step_a AND e.step < $step_b)
                        OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))
    AND start_ps >= $lo AND start_ps < $hi)
ORDER BY a.event_id, a.key;

-- @query step_windows
-- The run's step windows of positive length (kept steps only), by chip and start: what the step
-- breakdown splits.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN TRUE: every step.
-- @param step_a BIGINT First step kept (NULL with all_steps).
-- @param step_b BIGINT First step after those kept.
-- @column chip INTEGER The chip.
-- @column step BIGINT The step.
-- @column start_ps BIGINT Window start.
-- @column end_ps BIGINT Window end.
SELECT chip, step, start_ps, end_ps FROM step_windows
WHERE run_id = $run AND end_ps > start_ps AND ($all_steps OR (step >= $step_a AND step < $step_b))
ORDER BY chip, start_ps;

-- @module ui.timeline
-- The trace viewer's reads (ui/trace_api.py, ui/trace_details.py, ui/pages/timeline_page.py): a run's facts and
-- tracks, the tiles (exact slices, counts and short-slice buckets, from the events or the tile pyramid's base), one
-- event's details, an area's names, find, a finding's highlight and flows' ends. One query per question.
-- User strings are data (`contains(lower(name), lower($q))`, never LIKE). Times are int64 picoseconds.
--
-- Overlap of an event with a window [$t0, $t1): it starts before $t1 and either starts at or after $t0 or ends after
-- $t0 (so an instant event at $t0 is kept). `start_ps >= $t0 - $maxdur` (the run's longest event) adds nothing to that
-- but lets DuckDB skip row groups by their start_ps zonemaps. The rule is written out in each query rather than shared
-- as a TEMP macro: a UI request works on a cursor of its own, and creating a table macro there costs about 1 ms, as
-- much as a cached tile request.
--
-- Step markers (table `steps`) have no event id: they are sent with id -1, their step number, and a name id of their
-- own, `$name_base + step` (`$name_base` is above every string id of the run), whose name is "step N".

-- @query trace_run
-- One run's header for the viewer: name, status, extent (events and step markers), the longest event and
-- step marker (overlap bounds), and the base of the step markers' name ids.
-- @param run INTEGER The run (runs.run_id).
-- @column name VARCHAR The run's name.
-- @column status VARCHAR Its status.
-- @column first_ps BIGINT Its first event's start.
-- @column last_ps BIGINT Its last event's end.
-- @column max_event_dur_ps BIGINT Its longest event (NULL: no summary row).
-- @column name_base BIGINT One above its largest string id.
-- @column min_step INTEGER Its first step marker's step.
-- @column max_marker_dur_ps BIGINT Its longest step marker (0: none).
-- @column first_marker_ps BIGINT First step marker's start.
-- @column last_marker_ps BIGINT Last step marker's end.
SELECT r.name, r.status, r.first_ps, r.last_ps, s.max_event_dur_ps,
       (SELECT coalesce(max(string_id), 0) + 1 FROM strings WHERE run_id = $run) AS name_base,
       m.min_step, m.max_marker_dur_ps, m.first_marker_ps, m.last_marker_ps
FROM runs r
LEFT JOIN run_summaries s USING (run_id)
CROSS JOIN (
    SELECT min(step) AS min_step, coalesce(max(dur_ps), 0) AS max_marker_dur_ps,
           min(start_ps) AS first_marker_ps, max(start_ps + dur_ps) AS last_marker_ps
    FROM steps WHERE run_id = $run
) m
WHERE r.run_id = $run;

-- @query max_event_dur
-- The run's longest event (where run_summaries has no row, e.g. an older store).
-- @param run INTEGER The run (runs.run_id).
-- @column d BIGINT Its duration (0: no events).
SELECT coalesce(max(dur_ps), 0) AS d FROM events WHERE run_id = $run;

-- @query marker_tracks
-- The tracks holding step markers.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The track.
SELECT DISTINCT track_id FROM steps WHERE run_id = $run ORDER BY track_id;

-- @query track_ids
-- Every track of the run.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The track.
SELECT track_id FROM tracks WHERE run_id = $run;

-- @query track_chips
-- Every track of the run with its chip (a finding's highlight picks tracks by chip).
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The track.
-- @column chip INTEGER Its chip; -1 for the host.
SELECT track_id, chip FROM tracks WHERE run_id = $run;

-- @query timeline_tracks
-- The tracks of a run that hold events or step markers, with how many (from the tile pyramid's base,
-- tile_sums, which counts each event and marker once), in display order: device chips first (per chip its TensorCore
-- lines, SparseCores and tiles, or a GPU's streams, a CPU's XLA threads), then the host.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The track.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column kind VARCHAR tracks.kind.
-- @column chip INTEGER Chip index; -1 for the host.
-- @column core INTEGER Core index.
-- @column tile INTEGER Tile index.
-- @column n BIGINT Its events and step markers.
WITH n AS (
    SELECT track_id, sum(events)::BIGINT AS n FROM tile_sums WHERE run_id = $run GROUP BY track_id
)
SELECT t.track_id, t.plane, t.line, t.kind, t.chip, t.core, t.tile, n.n
FROM tracks t JOIN n USING (track_id)
WHERE t.run_id = $run AND t.kind <> 'counter'
ORDER BY t.chip < 0, t.chip, CASE t.kind WHEN 'tensorcore' THEN 1 WHEN 'sparsecore' THEN 2 WHEN 'host' THEN 4 ELSE 3 END,
         t.plane, t.core, t.tile,
         CASE WHEN t.line LIKE '%Steps' THEN 0 WHEN t.line LIKE '%Modules' THEN 1 WHEN t.line LIKE '%Ops' THEN 2 ELSE 3 END,
         t.line;

-- @query window_slices
-- The events and step markers of the chosen tracks overlapping [$t0, $t1) (the filters of the tiles'
-- exact mode), in time order (ties: track, then id; markers have id -1), at most $limit: what the viewer draws in the
-- window, as a list (the MCP server's events tool).
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param maxmarker BIGINT The run's longest step marker (a pruning bound).
-- @param name_base INTEGER The step markers' name ids start here (above every string id of the run).
-- @param limit BIGINT At most this many rows.
-- @column id BIGINT events.event_id; -1 for a step marker.
-- @column track_id INTEGER The track.
-- @column name INTEGER The name's string id; a step marker's: $name_base + step.
-- @column start BIGINT Start.
-- @column dur BIGINT Duration.
-- @column step INTEGER The event's or marker's step.
SELECT * FROM (
    SELECT event_id AS id, track_id, name_id AS name, start_ps AS start, dur_ps AS dur, step FROM events
    WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
    UNION ALL
    SELECT -1, track_id, ($name_base + step)::INTEGER, start_ps, dur_ps, step FROM steps WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxmarker AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
) ORDER BY start, track_id, id LIMIT $limit;

-- @query tile_counts
-- Per chosen track, its events and step markers overlapping the tile [$t0, $t1) (which decides exact or
-- aggregated: at most exact_limit of them is exact).
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param maxmarker BIGINT The run's longest step marker (a pruning bound).
-- @column track_id INTEGER The track.
-- @column n BIGINT Events and markers.
SELECT track_id, count(*)::BIGINT AS n FROM (
    SELECT track_id FROM events WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
    UNION ALL
    SELECT track_id FROM steps WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxmarker AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
) GROUP BY track_id;

-- @query tile_slices
-- The events and step markers of the chosen tracks overlapping the tile that are at least $minlen long
-- (0: all of them, the exact mode; one bucket: the aggregated mode's whole slices), by track and start. Markers: id -1,
-- name id $name_base + step, their step.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param maxmarker BIGINT The run's longest step marker (a pruning bound).
-- @param name_base INTEGER The step markers' name ids start here (above every string id of the run).
-- @param minlen BIGINT Shortest slice kept.
-- @column id BIGINT events.event_id; -1 for a step marker.
-- @column track_id INTEGER The track.
-- @column name INTEGER The name's string id; a step marker's: $name_base + step.
-- @column start BIGINT Start.
-- @column dur BIGINT Duration.
-- @column step INTEGER A marker's step; NULL for an event.
SELECT event_id AS id, track_id, name_id AS name, start_ps AS start, dur_ps AS dur, NULL::INTEGER AS step
FROM events WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND dur_ps >= $minlen
UNION ALL
SELECT -1, track_id, ($name_base + step)::INTEGER, start_ps, dur_ps, step
FROM steps WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxmarker AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND dur_ps >= $minlen
ORDER BY track_id, start, id;

-- @query tile_buckets
-- The aggregated mode's short slices: events and step markers shorter than one bucket ($bw = 2^$k ps)
-- overlapping the tile, per track and bucket they start in (clamped to the tile: bucket (max(start, $t0) - $t0) >> $k):
-- their count, summed duration (unclipped) and the dominant name, the one with the largest summed duration in the
-- bucket (ties: the smaller name id). A short slice overlapping the tile starts after $t0 - $bw, the bound used for
-- pruning.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param bw BIGINT The bucket's width, 2^$k.
-- @param name_base INTEGER The step markers' name ids start here (above every string id of the run).
-- @param k INTEGER The tile's level.
-- @column track_id INTEGER The track.
-- @column b INTEGER The bucket of the tile (0 to 1023).
-- @column name INTEGER The dominant name's id (largest summed duration; ties: the smaller id).
-- @column n BIGINT Short slices.
-- @column busy BIGINT Their summed duration (unclipped).
WITH src AS (
    SELECT track_id, name_id, start_ps, dur_ps FROM events
    WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1 AND start_ps >= $t0 - $bw
      AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND dur_ps < $bw
    UNION ALL
    SELECT track_id, ($name_base + step)::INTEGER, start_ps, dur_ps FROM steps
    WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1 AND start_ps >= $t0 - $bw
      AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND dur_ps < $bw
),
per_name AS (
    SELECT track_id, ((greatest(start_ps, $t0) - $t0) >> $k)::INTEGER AS b, name_id,
           count(*) AS n, sum(dur_ps)::BIGINT AS busy
    FROM src GROUP BY ALL
)

SELECT track_id, b, arg_max(name_id, (busy::HUGEINT << 32) + (2147483647 - name_id)) AS name,
       sum(n)::BIGINT AS n, sum(busy)::BIGINT AS busy
FROM per_name GROUP BY track_id, b ORDER BY track_id, b;

-- @query tile_counts_from_sums
-- tile_counts from the tile pyramid's base (table tile_sums, at the run's base level $level <= $k;
-- profiler/summaries.py), for tiles of level $k >= $level, whose bounds are multiples of 2^$level: the events and
-- markers starting in the tile are the base buckets [$lo, $hi). What the base cannot tell, the events and markers
-- starting before $t0 and ending after it, is read from the events and steps (a window of at most the longest event
-- before $t0, pruned by start_ps zonemaps).
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Tile start.
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param maxmarker BIGINT The run's longest step marker (a pruning bound).
-- @param lo BIGINT First base bucket of the tile ($t0 >> $level).
-- @param hi BIGINT Base bucket after the tile ($t1 >> $level).
-- @column track_id INTEGER The track.
-- @column n BIGINT Events and markers.
SELECT track_id, sum(n)::BIGINT AS n FROM (
    SELECT track_id, events AS n FROM tile_sums
    WHERE run_id = $run AND list_contains($tracks, track_id) AND bucket >= $lo AND bucket < $hi
    UNION ALL
    SELECT track_id, 1 FROM events WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t0
    AND start_ps >= $t0 - $maxdur AND start_ps + dur_ps > $t0
    UNION ALL
    SELECT track_id, 1 FROM steps WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t0
    AND start_ps >= $t0 - $maxmarker AND start_ps + dur_ps > $t0
) GROUP BY track_id;

-- @query tile_buckets_from_sums
-- tile_buckets from the tile pyramid's base (as tile_counts_from_sums): short slices (dur_class
-- <= $k: dur_ps < 2^$k) by the tile bucket they start in, bucket b of the tile holding the base buckets whose
-- `bucket >> ($k - $level)` is $b0 + b ($b0 = $t0 >> $k); those crossing $t0 (shorter than one bucket, so starting after
-- $t0 - $bw) go to bucket 0, as in tile_buckets.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The chosen tracks.
-- @param t0 BIGINT Tile start.
-- @param bw BIGINT The bucket's width, 2^$k.
-- @param name_base INTEGER The step markers' name ids start here (above every string id of the run).
-- @param k INTEGER The tile's level.
-- @param level INTEGER The run's tile pyramid base level.
-- @param lo BIGINT First base bucket of the tile ($t0 >> $level).
-- @param hi BIGINT Base bucket after the tile ($t1 >> $level).
-- @param b0 BIGINT The tile's first bucket at level $k ($t0 >> $k).
-- @column track_id INTEGER The track.
-- @column b INTEGER The bucket of the tile (0 to 1023).
-- @column name INTEGER The dominant name's id (largest summed duration; ties: the smaller id).
-- @column n BIGINT Short slices.
-- @column busy BIGINT Their summed duration (unclipped).
WITH src AS (
    SELECT track_id, coalesce(name_id, ($name_base + step)::INTEGER) AS name_id,
           ((bucket >> ($k - $level)) - $b0)::INTEGER AS b, events AS n, busy_ps AS busy
    FROM tile_sums
    WHERE run_id = $run AND list_contains($tracks, track_id) AND bucket >= $lo AND bucket < $hi
      AND dur_class <= $k
    UNION ALL
    SELECT track_id, name_id, 0, 1, dur_ps FROM events WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t0
    AND start_ps >= $t0 - $bw AND start_ps + dur_ps > $t0 AND dur_ps < $bw
    UNION ALL
    SELECT track_id, ($name_base + step)::INTEGER, 0, 1, dur_ps FROM steps
    WHERE run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t0
    AND start_ps >= $t0 - $bw AND start_ps + dur_ps > $t0 AND dur_ps < $bw
),
per_name AS (
    SELECT track_id, b, name_id, sum(n)::BIGINT AS n, sum(busy)::BIGINT AS busy FROM src GROUP BY ALL
)

SELECT track_id, b, arg_max(name_id, (busy::HUGEINT << 32) + (2147483647 - name_id)) AS name,
       sum(n)::BIGINT AS n, sum(busy)::BIGINT AS busy
FROM per_name GROUP BY track_id, b ORDER BY track_id, b;

-- @query tile_level
-- The run's tile pyramid base level (NULL: none stored; every tile from the events).
-- @param run INTEGER The run (runs.run_id).
-- @column level INTEGER The base level.
SELECT min(level) AS level FROM tile_sums WHERE run_id = $run;

-- @query event_row
-- One event with its typed fields by name (the details panel), string ids resolved (as the slices view).
-- @generated tools/gen_sql.py event_row_select (every typed field of profiler/trace_fields.py)
-- @param run INTEGER The run (runs.run_id).
-- @param id BIGINT The event (events.event_id).
-- @column event_id BIGINT The event.
-- @column track_id INTEGER Its track.
-- @column name VARCHAR Its name.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
-- @column step BIGINT step (a typed field, unit index).
-- @column table VARCHAR table (a typed field, unit text).
-- @column sc BIGINT sc (a typed field, unit index).
-- @column minibatch BIGINT minibatch (a typed field, unit index).
-- @column ids BIGINT ids (a typed field, unit count).
-- @column unique_ids BIGINT unique_ids (a typed field, unit count).
-- @column dropped_ids BIGINT dropped_ids (a typed field, unit count).
-- @column bytes BIGINT bytes (a typed field, unit bytes).
-- @column flops BIGINT flops (a typed field, unit flop).
-- @column category VARCHAR category (a typed field, unit text).
SELECT e.event_id, e.track_id, n.value AS name, e.start_ps, e.dur_ps, e.step AS step, s_table.value AS table, e.sc AS sc, e.minibatch AS minibatch, e.ids AS ids, e.unique_ids AS unique_ids, e.dropped_ids AS dropped_ids, e.bytes AS bytes, e.flops AS flops, s_category.value AS category
FROM events e
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
LEFT JOIN strings s_table ON s_table.run_id = e.run_id AND s_table.string_id = e.table_id
LEFT JOIN strings s_category ON s_category.run_id = e.run_id AND s_category.string_id = e.category_id
WHERE e.run_id = $run AND e.event_id = $id;

-- @query event_args
-- An event's further arguments (event_args), as text, by key.
-- @param run INTEGER The run (runs.run_id).
-- @param id BIGINT The event (events.event_id).
-- @column key VARCHAR The argument.
-- @column value VARCHAR Its value as text.
SELECT key, coalesce(CAST(int_value AS VARCHAR), CAST(double_value AS VARCHAR), string_value) AS value
FROM event_args WHERE run_id = $run AND event_id = $id ORDER BY key;

-- @query area
-- Per name, the events (not step markers) of the chosen tracks ($all_tracks: every track) overlapping [$t0, $t1):
-- count, time in the window (durations clipped to it: total and largest), the sum over every name (all_ps) and how
-- many names; largest total first (ties by name), at most $limit names.
-- @param run INTEGER The run (runs.run_id).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param all_tracks BOOLEAN Every track (else $tracks).
-- @param tracks INTEGER[] The chosen tracks (when not $all_tracks).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param limit BIGINT At most this many names.
-- @column name VARCHAR The name.
-- @column count BIGINT Its events.
-- @column total_ps BIGINT Their time in the window.
-- @column max_ps BIGINT The largest.
-- @column all_ps BIGINT Time in the window of every name.
-- @column names BIGINT How many names.
WITH w AS (
    SELECT name_id, least(start_ps + dur_ps, $t1) - greatest(start_ps, $t0) AS clipped_ps FROM events
    WHERE run_id = $run AND ($all_tracks OR list_contains($tracks, track_id)) AND start_ps < $t1
      AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
),
per_name AS (
    SELECT name_id, count(*)::BIGINT AS count, sum(clipped_ps)::BIGINT AS total_ps, max(clipped_ps) AS max_ps
    FROM w GROUP BY name_id
)
SELECT n.value AS name, p.count, p.total_ps, p.max_ps,
       (sum(p.total_ps) OVER ())::BIGINT AS all_ps, count(*) OVER () AS names
FROM per_name p JOIN strings n ON n.run_id = $run AND n.string_id = p.name_id
ORDER BY p.total_ps DESC, n.value
LIMIT $limit;

-- @query find_events
-- Events whose name contains $q, case-insensitively ($q is data, never a pattern), on the chosen tracks
-- ($all_tracks: every track) overlapping the window [$t0, $t1): in time order (ties by id), at most $limit.
-- @param run INTEGER The run (runs.run_id).
-- @param all_tracks BOOLEAN Every track (else $tracks).
-- @param tracks INTEGER[] The chosen tracks (when not $all_tracks).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param q VARCHAR The text.
-- @param limit BIGINT At most this many.
-- @column id BIGINT events.event_id.
-- @column track INTEGER The track.
-- @column start BIGINT Start.
-- @column dur BIGINT Duration.
-- @column name INTEGER The name's string id.
SELECT event_id AS id, track_id AS track, start_ps AS start, dur_ps AS dur, name_id AS name
FROM events WHERE run_id = $run AND ($all_tracks OR list_contains($tracks, track_id))
  AND start_ps < $t1 AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND name_id IN (SELECT string_id FROM strings WHERE run_id = $run AND contains(lower(value), lower($q)))
ORDER BY start_ps, event_id LIMIT $limit;

-- @query find_count
-- How many events find_events finds in all.
-- @param run INTEGER The run (runs.run_id).
-- @param all_tracks BOOLEAN Every track (else $tracks).
-- @param tracks INTEGER[] The chosen tracks (when not $all_tracks).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param q VARCHAR The text.
-- @column n BIGINT Events.
SELECT count(*) AS n FROM events WHERE run_id = $run AND ($all_tracks OR list_contains($tracks, track_id))
  AND start_ps < $t1 AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0) AND name_id IN (SELECT string_id FROM strings WHERE run_id = $run AND contains(lower(value), lower($q)));

-- @query highlight_events
-- Events a finding points at: on the chosen tracks (those of its chips and tracks; $all_tracks: every
-- track), overlapping the window [$t0, $t1), named one of $name_ids, of a table among $table_ids and of a category among
-- $category_ids, each filter only where on ($any_*: off); in time order (ties by id), at most $limit.
-- @param run INTEGER The run (runs.run_id).
-- @param all_tracks BOOLEAN Every track (else $tracks).
-- @param tracks INTEGER[] The chosen tracks (when not $all_tracks).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param any_name BOOLEAN Any name.
-- @param name_ids INTEGER[] The names' string ids.
-- @param any_table BOOLEAN Any table.
-- @param table_ids INTEGER[] The tables' string ids.
-- @param any_category BOOLEAN Any category.
-- @param category_ids INTEGER[] The categories' string ids.
-- @param limit BIGINT At most this many.
-- @column id BIGINT events.event_id.
-- @column track INTEGER The track.
-- @column start BIGINT Start.
-- @column dur BIGINT Duration.
-- @column name INTEGER The name's string id.
SELECT event_id AS id, track_id AS track, start_ps AS start, dur_ps AS dur, name_id AS name
FROM events WHERE run_id = $run AND ($all_tracks OR list_contains($tracks, track_id))
  AND start_ps < $t1 AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
  AND ($any_name OR list_contains($name_ids, name_id))
  AND ($any_table OR list_contains($table_ids, table_id))
  AND ($any_category OR list_contains($category_ids, category_id))
ORDER BY start_ps, event_id LIMIT $limit;

-- @query highlight_count
-- How many events highlight_events finds in all.
-- @param run INTEGER The run (runs.run_id).
-- @param all_tracks BOOLEAN Every track (else $tracks).
-- @param tracks INTEGER[] The chosen tracks (when not $all_tracks).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param maxdur BIGINT The run's longest event (a pruning bound).
-- @param any_name BOOLEAN Any name.
-- @param name_ids INTEGER[] The names' string ids.
-- @param any_table BOOLEAN Any table.
-- @param table_ids INTEGER[] The tables' string ids.
-- @param any_category BOOLEAN Any category.
-- @param category_ids INTEGER[] The categories' string ids.
-- @column n BIGINT Events.
SELECT count(*) AS n FROM events WHERE run_id = $run AND ($all_tracks OR list_contains($tracks, track_id))
  AND start_ps < $t1 AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)
  AND ($any_name OR list_contains($name_ids, name_id))
  AND ($any_table OR list_contains($table_ids, table_id))
  AND ($any_category OR list_contains($category_ids, category_id));

-- @query event_step
-- The step of one event (flows of an event are computed within its step).
-- @param run INTEGER The run (runs.run_id).
-- @param id BIGINT The event (events.event_id).
-- @column step INTEGER Its step.
SELECT step FROM events WHERE run_id = $run AND event_id = $id;

-- @query flow_ends
-- Where flows' ends are: track, start and duration of some events ($lo, $hi: the least and largest of $ids, for pruning).
-- @param run INTEGER The run (runs.run_id).
-- @param lo BIGINT The least of $ids.
-- @param hi BIGINT The largest of $ids.
-- @param ids BIGINT[] The events.
-- @column event_id BIGINT The event.
-- @column track_id INTEGER Its track.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
SELECT event_id, track_id, start_ps, dur_ps FROM events
WHERE run_id = $run AND event_id BETWEEN $lo AND $hi AND list_contains($ids, event_id);

-- @query steps_in_window
-- The first and last step of the step markers overlapping [$t0, $t1) (the Timeline's Perfetto links).
-- @param run INTEGER The run (runs.run_id).
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @column lo INTEGER First step (NULL: none).
-- @column hi INTEGER Last step.
SELECT min(step) AS lo, max(step) AS hi FROM steps WHERE run_id = $run AND start_ps < $t1 AND start_ps + dur_ps > $t0;

-- @query derived_device_steps
-- The `Steps` row XProf's trace viewer derives on a GPU's plane (DeriveStepEventsFromGroups), for every device chip
-- (a GPU, a CPU running XLA ops, a device) whose tracks hold no step markers and no `Steps` line of their own: the
-- chip's events tagged with a step (its group_id), in time order (ties: the longer first, then the step), and each run
-- of consecutive events of one step merged into one span, from the first one's start to the latest end. Derived lines
-- a capture may already hold (TensorFlow Ops, Name Scope, XLA Modules, XLA Ops, Source) are not read. The span is the
-- device's work on the step, which is shorter than the step (step_times) where the device waits.
-- The row is a track of the viewer's own, numbered after the run's tracks (one per chip, in chip order).
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The row's track id: above every track of the run.
-- @column chip INTEGER The device chip.
-- @column plane VARCHAR The chip's device plane (its first by name).
-- @column kind VARCHAR The chip's track kind (gpu, cpu or device).
-- @column step INTEGER The step.
-- @column start_ps BIGINT Start of the span.
-- @column dur_ps BIGINT Its duration.
WITH chip_tracks AS (
    SELECT t.track_id, t.chip, t.plane, t.kind, t.line,
           bool_or(t.line = 'Steps' OR s.track_id IS NOT NULL) OVER (PARTITION BY t.chip) AS has_steps
    FROM tracks t
    LEFT JOIN (SELECT DISTINCT track_id FROM steps WHERE run_id = $run) s USING (track_id)
    WHERE t.run_id = $run AND t.chip >= 0 AND t.kind IN ('gpu', 'cpu', 'device')
),
derived_from AS (
    SELECT track_id, chip FROM chip_tracks
    WHERE NOT has_steps AND line NOT IN ('TensorFlow Ops', 'TensorFlow Name Scope', 'Framework Ops',
                                         'Framework Name Scope', 'XLA Modules', 'XLA Ops', 'Source code')
),
tagged AS (
    SELECT d.chip, e.step, e.start_ps, e.dur_ps,
           e.step IS DISTINCT FROM lag(e.step) OVER w AS opens
    FROM events e JOIN derived_from d USING (track_id)
    WHERE e.run_id = $run AND e.step IS NOT NULL
    WINDOW w AS (PARTITION BY d.chip ORDER BY e.start_ps, e.dur_ps DESC, e.step)
),
numbered AS (
    SELECT chip, step, start_ps, dur_ps,
           sum(opens::INTEGER) OVER (PARTITION BY chip ORDER BY start_ps, dur_ps DESC, step
                                     ROWS UNBOUNDED PRECEDING) AS span
    FROM tagged
),
planes AS (
    SELECT chip, min(plane) AS plane, min(kind) AS kind FROM chip_tracks WHERE NOT has_steps GROUP BY chip
)
SELECT (SELECT coalesce(max(track_id), -1) FROM tracks WHERE run_id = $run)
           + dense_rank() OVER (ORDER BY n.chip)::INTEGER AS track_id,
       n.chip, p.plane, p.kind, min(n.step) AS step, min(n.start_ps) AS start_ps,
       max(n.start_ps + n.dur_ps) - min(n.start_ps) AS dur_ps
FROM numbered n JOIN planes p USING (chip)
GROUP BY n.chip, p.plane, p.kind, n.span
ORDER BY n.chip, start_ps, step;

"""The trace viewer API's SQL (ui/trace_api.py): one query per question, each with its rule.

Parameters are bound by name (`$run`, `$t0`, ...), never formatted into the text; user strings
are data (`contains(lower(name), lower($q))`, never LIKE). Times are int64 picoseconds.

Overlap of an event with a window [$t0, $t1): it starts before $t1 and either starts at or after
$t0 or ends after $t0 (so an instant event at $t0 is kept). `start_ps >= $t0 - $maxdur` (the run's
longest event) adds nothing to that but lets DuckDB skip row groups by their start_ps zonemaps.

Step markers (table `steps`) have no event id: they are sent with id -1, their step number, and a
name id of their own, `$name_base + step` (`$name_base` is above every string id of the run), whose
name is "step N".
"""

from __future__ import annotations

from profiler.trace_fields import TYPED_FIELDS

# trace_run: one run's header for the viewer: name, status, extent (events and step markers),
# the longest event and step marker (overlap bounds), and the base of the step markers' name ids.
TRACE_RUN = """
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
WHERE r.run_id = $run
"""

# max_event_dur: the run's longest event (where run_summaries has no row, e.g. an older store).
MAX_EVENT_DUR = "SELECT coalesce(max(dur_ps), 0) AS d FROM events WHERE run_id = $run"

# marker_tracks: the tracks holding step markers.
MARKER_TRACKS = "SELECT DISTINCT track_id FROM steps WHERE run_id = $run ORDER BY track_id"

# The overlap filters of events and step markers on the chosen tracks (see the module docstring).
_EVENTS_IN = """run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)"""
_MARKERS_IN = """run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t1
    AND start_ps >= $t0 - $maxmarker AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)"""

# window_slices: the events and step markers of the chosen tracks overlapping [$t0, $t1) (the
# filters of the tiles' exact mode), in time order (ties: track, then id; markers have id -1), at
# most $limit: what the viewer draws in the window, as a list (the MCP server's events tool).
WINDOW_SLICES = f"""
SELECT * FROM (
    SELECT event_id AS id, track_id, name_id AS name, start_ps AS start, dur_ps AS dur, step FROM events
    WHERE {_EVENTS_IN}
    UNION ALL
    SELECT -1, track_id, ($name_base + step)::INTEGER, start_ps, dur_ps, step FROM steps WHERE {_MARKERS_IN}
) ORDER BY start, track_id, id LIMIT $limit
"""

# tile_counts: per chosen track, its events and step markers overlapping the tile [$t0, $t1)
# (which decides exact or aggregated: at most exact_limit of them is exact).
TILE_COUNTS = f"""
SELECT track_id, count(*)::BIGINT AS n FROM (
    SELECT track_id FROM events WHERE {_EVENTS_IN}
    UNION ALL
    SELECT track_id FROM steps WHERE {_MARKERS_IN}
) GROUP BY track_id
"""

# tile_slices: the events and step markers of the chosen tracks overlapping the tile that are at
# least $minlen long (0: all of them, the exact mode; one bucket: the aggregated mode's whole
# slices), by track and start. Markers: id -1, name id $name_base + step, their step.
TILE_SLICES = f"""
SELECT event_id AS id, track_id, name_id AS name, start_ps AS start, dur_ps AS dur, NULL::INTEGER AS step
FROM events WHERE {_EVENTS_IN} AND dur_ps >= $minlen
UNION ALL
SELECT -1, track_id, ($name_base + step)::INTEGER, start_ps, dur_ps, step
FROM steps WHERE {_MARKERS_IN} AND dur_ps >= $minlen
ORDER BY track_id, start, id
"""

# tile_buckets: the aggregated mode's short slices: events and step markers shorter than one
# bucket ($bw = 2^$k ps) overlapping the tile, per track and bucket they start in (clamped to the
# tile: bucket (max(start, $t0) - $t0) >> $k): their count, summed duration (unclipped) and the
# dominant name, the one with the largest summed duration in the bucket (ties: the smaller name
# id). A short slice overlapping the tile starts after $t0 - $bw, the bound used for pruning.
_DOMINANT_NAME = """
SELECT track_id, b, arg_max(name_id, (busy::HUGEINT << 32) + (2147483647 - name_id)) AS name,
       sum(n)::BIGINT AS n, sum(busy)::BIGINT AS busy
FROM per_name GROUP BY track_id, b ORDER BY track_id, b
"""
TILE_BUCKETS = f"""
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
{_DOMINANT_NAME}"""

# The same two answers from the tile pyramid's base (table tile_sums, at the run's base level
# $level <= $k; profiler/summaries.py), for tiles of level $k >= $level, whose bounds are
# multiples of 2^$level: the events and markers starting in the tile are the base buckets
# [$lo, $hi) = [$t0 >> $level, $t1 >> $level), and bucket b of the tile holds the base buckets
# whose `bucket >> ($k - $level)` is $b0 + b ($b0 = $t0 >> $k). What the base cannot tell, the
# events and markers starting before $t0 and ending after it, is read from the events and steps
# (a window of at most the longest event before $t0, pruned by start_ps zonemaps).
_CROSSING = """run_id = $run AND list_contains($tracks, track_id) AND start_ps < $t0
    AND start_ps >= $t0 - {bound} AND start_ps + dur_ps > $t0"""

TILE_COUNTS_FROM_SUMS = f"""
SELECT track_id, sum(n)::BIGINT AS n FROM (
    SELECT track_id, events AS n FROM tile_sums
    WHERE run_id = $run AND list_contains($tracks, track_id) AND bucket >= $lo AND bucket < $hi
    UNION ALL
    SELECT track_id, 1 FROM events WHERE {_CROSSING.format(bound="$maxdur")}
    UNION ALL
    SELECT track_id, 1 FROM steps WHERE {_CROSSING.format(bound="$maxmarker")}
) GROUP BY track_id
"""

# Short slices (dur_class <= $k: dur_ps < 2^$k) by the tile bucket they start in; those crossing
# $t0 (shorter than one bucket, so starting after $t0 - $bw) go to bucket 0, as in TILE_BUCKETS.
TILE_BUCKETS_FROM_SUMS = f"""
WITH src AS (
    SELECT track_id, coalesce(name_id, ($name_base + step)::INTEGER) AS name_id,
           ((bucket >> ($k - $level)) - $b0)::INTEGER AS b, events AS n, busy_ps AS busy
    FROM tile_sums
    WHERE run_id = $run AND list_contains($tracks, track_id) AND bucket >= $lo AND bucket < $hi
      AND dur_class <= $k
    UNION ALL
    SELECT track_id, name_id, 0, 1, dur_ps FROM events WHERE {_CROSSING.format(bound="$bw")} AND dur_ps < $bw
    UNION ALL
    SELECT track_id, ($name_base + step)::INTEGER, 0, 1, dur_ps FROM steps
    WHERE {_CROSSING.format(bound="$bw")} AND dur_ps < $bw
),
per_name AS (
    SELECT track_id, b, name_id, sum(n)::BIGINT AS n, sum(busy)::BIGINT AS busy FROM src GROUP BY ALL
)
{_DOMINANT_NAME}"""

# tile_level: the run's tile pyramid base level (NULL: none stored; every tile from the events).
TILE_LEVEL = "SELECT min(level) AS level FROM tile_sums WHERE run_id = $run"

# names_of: the names of some string ids of a run.
NAMES_OF = "SELECT string_id, value FROM strings WHERE run_id = $run AND list_contains($ids, string_id)"


def _event_row() -> str:
    """EVENT_ROW below: every typed field, string ids resolved (as the slices view)."""
    typed, joins = [], []
    for f in TYPED_FIELDS:
        if f.is_string:
            typed.append(f"s_{f.name}.value AS {f.name}")
            joins.append(
                f"LEFT JOIN strings s_{f.name} ON s_{f.name}.run_id = e.run_id AND s_{f.name}.string_id = e.{f.column}"
            )
        else:
            typed.append(f"e.{f.column} AS {f.name}")
    return f"""
SELECT e.event_id, e.track_id, n.value AS name, e.start_ps, e.dur_ps, {", ".join(typed)}
FROM events e
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
{chr(10).join(joins)}
WHERE e.run_id = $run AND e.event_id = $id
"""


# event_row: one event with its typed fields by name (the details panel).
EVENT_ROW = _event_row()

# event_args: an event's further arguments (event_args), as text, by key.
EVENT_ARGS = """
SELECT key, coalesce(CAST(int_value AS VARCHAR), CAST(double_value AS VARCHAR), string_value) AS value
FROM event_args WHERE run_id = $run AND event_id = $id ORDER BY key
"""

# area: per name, the events (not step markers) of the chosen tracks ($all_tracks: every track)
# overlapping [$t0, $t1): count, time in the window (durations clipped to it: total and largest),
# the sum over every name (all_ps) and how many names; largest total first (ties by name), at
# most $limit names.
AREA = """
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
LIMIT $limit
"""

# The filters shared by find and highlight: the chosen tracks ($all_tracks: every track) and the
# window [$t0, $t1) (overlap as in the module docstring).
_MATCH_WHERE = """run_id = $run AND ($all_tracks OR list_contains($tracks, track_id))
  AND start_ps < $t1 AND start_ps >= $t0 - $maxdur AND (start_ps >= $t0 OR start_ps + dur_ps > $t0)"""

# find_events / find_count: events whose name contains $q, case-insensitively ($q is data, never
# a pattern), on the chosen tracks in the window: in time order (ties by id), at most $limit;
# and how many in all.
_FIND_NAMES = "(SELECT string_id FROM strings WHERE run_id = $run AND contains(lower(value), lower($q)))"
FIND_EVENTS = f"""
SELECT event_id AS id, track_id AS track, start_ps AS start, dur_ps AS dur, name_id AS name
FROM events WHERE {_MATCH_WHERE} AND name_id IN {_FIND_NAMES}
ORDER BY start_ps, event_id LIMIT $limit
"""
FIND_COUNT = f"SELECT count(*) AS n FROM events WHERE {_MATCH_WHERE} AND name_id IN {_FIND_NAMES}"

# highlight_events / highlight_count: events a finding points at: on the chosen tracks (those of
# its chips and tracks), in the window, named one of $name_ids, of a table among $table_ids and of
# a category among $category_ids, each filter only where on ($any_*: off); in time order, at most
# $limit; and how many in all.
_HL_WHERE = f"""{_MATCH_WHERE}
  AND ($any_name OR list_contains($name_ids, name_id))
  AND ($any_table OR list_contains($table_ids, table_id))
  AND ($any_category OR list_contains($category_ids, category_id))"""
HIGHLIGHT_EVENTS = f"""
SELECT event_id AS id, track_id AS track, start_ps AS start, dur_ps AS dur, name_id AS name
FROM events WHERE {_HL_WHERE}
ORDER BY start_ps, event_id LIMIT $limit
"""
HIGHLIGHT_COUNT = f"SELECT count(*) AS n FROM events WHERE {_HL_WHERE}"

# string_ids: the ids of some strings of a run (exact values).
STRING_IDS = "SELECT string_id, value FROM strings WHERE run_id = $run AND list_contains($values, value)"

# event_step: the step of one event (flows of an event are computed within its step).
EVENT_STEP = "SELECT step FROM events WHERE run_id = $run AND event_id = $id"

# flow_ends: where flows' ends are: track, start and duration of some events.
FLOW_ENDS = """
SELECT event_id, track_id, start_ps, dur_ps FROM events
WHERE run_id = $run AND event_id BETWEEN $lo AND $hi AND list_contains($ids, event_id)
"""

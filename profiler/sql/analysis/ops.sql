-- @module analysis.ops
-- The run's ops as the analyzers read them: the op scan the numpy interval code groups by track
-- (analyzers/op_arrays.py), the op profile over it (analyzers/rules/op_profile.py, scprof's `ops` answer), each
-- device core's rows of device_idle without the busy columns (analyzers/core_busy.py) and what bounds the main
-- device kind (analyzers/rules/utilization.py).
-- @include analysis.base

-- @query op_array_tracks
-- The run's op tracks, by track id: the tracks op_arrays groups the scan by.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index; -1 for the host.
-- @column track_kind VARCHAR tracks.kind.
-- @column line VARCHAR tracks.line.
SELECT track_id, chip, track_kind, line FROM run_op_tracks($run) ORDER BY track_id;

-- @query string_ids
-- The ids of a string of the run (a category's ids, to mask the scan's rows by category).
-- @param run INTEGER The run (runs.run_id).
-- @param value VARCHAR The string.
-- @column string_id INTEGER strings.string_id.
SELECT string_id FROM strings WHERE run_id = $run AND value = $value;

-- @query op_arrays
-- The events of the op tracks $tracks as the narrow columns the numpy interval code reads (analyzers/op_arrays.py).
-- A filter, not a join, so the scan keeps the file order (time order within a track, as a rule) and sorts nothing.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The op tracks' ids (op_array_tracks).
-- @column track_id INTEGER tracks.track_id.
-- @column event_id BIGINT events.event_id.
-- @column step INTEGER Training step; -1 when the event has none.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
-- @column category_id INTEGER events.category_id; -1 when the event records none.
-- @column name_id INTEGER events.name_id.
SELECT track_id, event_id, coalesce(step, -1) AS step, start_ps, start_ps + dur_ps AS end_ps,
       coalesce(category_id, -1) AS category_id, name_id
FROM events
WHERE run_id = $run AND list_contains($tracks, track_id);

-- @query op_arrays_span
-- op_arrays restricted to the events that overlap [$lo, $hi): starting before $hi and ending after $lo. $max_dur,
-- the run's longest event, bounds how early such an event starts, so the scan's zonemaps skip the rest.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The op tracks' ids (op_array_tracks).
-- @param lo BIGINT The span's start (ps).
-- @param hi BIGINT The span's end (ps).
-- @param max_dur BIGINT The run's longest event (max_event_dur), ps.
-- @column track_id INTEGER tracks.track_id.
-- @column event_id BIGINT events.event_id.
-- @column step INTEGER Training step; -1 when the event has none.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
-- @column category_id INTEGER events.category_id; -1 when the event records none.
-- @column name_id INTEGER events.name_id.
SELECT track_id, event_id, coalesce(step, -1) AS step, start_ps, start_ps + dur_ps AS end_ps,
       coalesce(category_id, -1) AS category_id, name_id
FROM events
WHERE run_id = $run AND list_contains($tracks, track_id)
  AND start_ps < $hi AND start_ps >= $lo - $max_dur AND start_ps + dur_ps > $lo;

-- @query max_event_dur
-- The run's longest event (its summary row; none for a run without one).
-- @param run INTEGER The run (runs.run_id).
-- @column max_event_dur_ps BIGINT The longest event's duration.
SELECT max_event_dur_ps FROM run_summaries WHERE run_id = $run;

-- @query op_profile
-- Per kind of track, op name and category: events, total and self time, the share of the kind's self time (device
-- work, host_to_device copies included, and host work apart: a CPU device's threads run both), and the FLOPs and
-- bytes the events record (NULL when none does); host_work: the row is the host's work (a host_* category other than
-- host_to_device), which `scprof analyze` leaves out of its top device ops. Device work first, then by self time.
-- The FLOPs and bytes are those of the same events as the times: of the steps [$step_lo, $step_hi) when given (the
-- rows then hold those steps' events), of the whole run when NULL; the rows' tracks bound them to a chip.
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step of the rows (inclusive); NULL: the rows are the whole run's.
-- @param step_hi INTEGER Step after the last; NULL: the rows are the whole run's.
-- @input rows(track_id INTEGER, name_id INTEGER, category_id INTEGER, dur_ps BIGINT, self_ps BIGINT) Every op event of op_arrays with its self time, as analyzers/rules/op_profile.py computes it; category_id -1 when none is recorded.
-- @column track_kind VARCHAR tracks.kind.
-- @column name VARCHAR The op's name.
-- @column category VARCHAR Its category (recorded, else the track's default).
-- @column host_work BOOLEAN Whether the row is the host's work (a host_* category other than host_to_device).
-- @column events BIGINT Events.
-- @column total_ps BIGINT Their total duration.
-- @column self_ps BIGINT Their total self time (less the ops nested directly inside).
-- @column share DOUBLE Share of the kind's self time (device work and host work apart).
-- @column flops BIGINT FLOPs the events record; NULL when none does.
-- @column bytes BIGINT Bytes the events record; NULL when none does.
-- @column flop_per_byte DOUBLE Arithmetic intensity: flops / bytes (FLOP/byte); NULL without both or with 0 bytes.
-- @column flop_per_s DOUBLE Achieved FLOP/s over the op's self time (all cores' summed): flops / (self_ps * 1e-12).
WITH per_op AS (
    SELECT track_id, name_id, category_id, count(*) AS events, sum(dur_ps) AS total_ps, sum(self_ps) AS self_ps
    FROM rows
    GROUP BY ALL
),
work AS (  -- the FLOPs and bytes events record (typed columns)
    SELECT track_id, name_id, coalesce(category_id, -1) AS category_id, sum(flops) AS flops, sum(bytes) AS bytes
    FROM events
    WHERE run_id = $run AND (flops IS NOT NULL OR bytes IS NOT NULL)
      AND ($step_lo IS NULL OR (step >= $step_lo AND step < $step_hi))
    GROUP BY ALL
),
named AS (
    SELECT t.track_kind, n.value AS name, coalesce(c.value, t.default_category) AS category,
           sum(p.events)::BIGINT AS events, sum(p.total_ps)::BIGINT AS total_ps, sum(p.self_ps)::BIGINT AS self_ps,
           sum(w.flops)::BIGINT AS flops, sum(w.bytes)::BIGINT AS bytes
    FROM per_op p
    JOIN run_op_tracks($run) t ON t.track_id = p.track_id
    JOIN strings n ON n.run_id = $run AND n.string_id = p.name_id
    LEFT JOIN strings c ON c.run_id = $run AND c.string_id = p.category_id
    LEFT JOIN work w ON w.track_id = p.track_id AND w.name_id = p.name_id AND w.category_id = p.category_id
    GROUP BY ALL
)
SELECT track_kind, name, category, host_work, events, total_ps, self_ps,
       coalesce(self_ps / nullif(sum(self_ps) OVER (PARTITION BY track_kind, host_work), 0), 0) AS share, flops, bytes,
       flops / nullif(bytes, 0)::DOUBLE AS flop_per_byte, flops / nullif(self_ps * 1e-12, 0) AS flop_per_s
FROM (SELECT *, category LIKE 'host%' AND category <> 'host_to_device' AS host_work FROM named)
WHERE total_ps > 0
ORDER BY track_kind NOT IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device') OR host_work, self_ps DESC,
         track_kind, name, category;

-- @query device_cores
-- Every device core of the run (empty device planes too) and the capture's span: device_idle's rows without the busy
-- columns, which analyzers/core_busy.py computes from the op scan. By kind, chip, core.
-- @param run INTEGER The run (runs.run_id).
-- @param kinds VARCHAR[] The device track kinds.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR The core's plane (the first by name).
-- @column span_ps BIGINT The capture's span (runs.last_ps - runs.first_ps).
SELECT run_id, chip, core, kind AS track_kind, min(plane) AS plane, any_value(r.last_ps - r.first_ps) AS span_ps
FROM tracks JOIN runs r USING (run_id)
WHERE run_id = $run AND chip >= 0 AND list_contains($kinds, kind)
GROUP BY ALL
ORDER BY track_kind, chip, core;

-- @query device_op_tracks
-- The op tracks of device cores (their rows in the op scan count towards the core's busy time): device kinds, less
-- tracks of host work.
-- @param run INTEGER The run (runs.run_id).
-- @param kinds VARCHAR[] The device track kinds.
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
SELECT track_id, chip, core, track_kind FROM run_op_tracks($run)
WHERE chip >= 0 AND list_contains($kinds, track_kind) AND NOT starts_with(default_category, 'host_');

-- @query host_work_categories
-- The ids of the run's host-work categories (host_*): a CPU device's host work is not device busy time.
-- @param run INTEGER The run (runs.run_id).
-- @column string_id INTEGER strings.string_id.
SELECT string_id FROM strings WHERE run_id = $run AND starts_with(value, 'host_');

-- @query device_work
-- The FLOPs, bytes, collective time and op time the device ops of one kind record (what bounds the kind).
-- @param run INTEGER The run (runs.run_id).
-- @param collectives VARCHAR[] The collective categories.
-- @param kind VARCHAR The device track kind.
-- @column flops DOUBLE FLOPs the ops record.
-- @column bytes DOUBLE Bytes the ops record.
-- @column coll_ps DOUBLE Time of the collective ops.
-- @column op_ps DOUBLE Time of all the ops.
SELECT sum(e.flops)::DOUBLE AS flops, sum(e.bytes)::DOUBLE AS bytes,
       sum(e.dur_ps) FILTER (WHERE list_contains($collectives, coalesce(c.value, t.default_category)))::DOUBLE AS coll_ps,
       sum(e.dur_ps)::DOUBLE AS op_ps
FROM events e JOIN op_tracks t USING (run_id, track_id)
LEFT JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
WHERE e.run_id = $run AND t.track_kind = $kind AND t.chip >= 0;

-- @query device_idle_evidence
-- The evidence of the device_idle finding (shown, not run): the run's cores, the idlest first.
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM device_idle WHERE run_id = $run ORDER BY idle_share_span DESC;

-- @module stdlib.ops
-- Ops: which tracks hold units of work (op_tracks), when each device core is busy and idle (device_busy,
-- device_idle), async op windows (async_spans), the top ops (op_stats), op self times (op_self_times) and
-- SparseCore ops per embedding table (sc_table_stats). Over the tables only.

-- @view op_tracks
-- Tracks whose events are units of work (ops): all but counters and the step and module lines; with the category of
-- an op that records none.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index; -1 for the host.
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column default_category VARCHAR tc_other, sc_other or host_other by the track's kind.
CREATE VIEW op_tracks AS
-- op_tracks: the tracks whose events are units of work (ops): every track but counter
-- tracks, the step, module and annotation lines (`Steps`, `XLA Modules`, `Sparse Core Steps`,
-- `Sparse Core Modules`, `Annotations`: their events span the ops below them; `Annotations`
-- holds a Chrome trace's GPU annotations and profiler spans, profiler/chrome_json_to_store.py)
-- and `Async XLA Ops` (an
-- async op's window from its start to its done, which overlaps the ops the core runs
-- meanwhile: async_spans), and the lines XProf derives from the ops of other lines, which
-- would count their time twice: `TensorFlow Ops`, `TensorFlow Name Scope`, `Source code`
-- (framework ops and scopes over the kernels), and on a GPU `XLA Ops` (over its streams'
-- kernels); and `XLA TraceMe` (the TPU runtime's own markers: dependency waits, barriers).
-- default_category is the
-- category of an op that records none, by its track: tc_other, sc_other, host_other, or
-- device_compute on a GPU, a CPU running XLA ops or another device.
SELECT run_id, track_id, chip, core, kind AS track_kind, plane, line,
       CASE kind WHEN 'tensorcore' THEN 'tc_other' WHEN 'host' THEN 'host_other'
                 WHEN 'gpu' THEN 'device_compute' WHEN 'cpu' THEN 'device_compute' WHEN 'device' THEN 'device_compute'
                 ELSE 'sc_other' END
           AS default_category
FROM tracks
WHERE kind <> 'counter'
  AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules', 'Annotations', 'Async XLA Ops',
                   'TensorFlow Ops', 'TensorFlow Name Scope', 'Source code', 'XLA TraceMe')
  AND NOT (kind = 'gpu' AND line = 'XLA Ops');

-- @view device_busy
-- When each device core is busy: the union of its ops' intervals as disjoint islands, in two sets: 'ops' (every op
-- on a device core but a CPU device's host work) and 'compute' (the same less async starts and dones).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip (a SparseCore's number; 0 otherwise).
-- @column track_kind VARCHAR tensorcore, sparsecore, gpu, cpu or device.
-- @column busy_set VARCHAR ops or compute.
-- @column start_ps BIGINT Island start.
-- @column end_ps BIGINT Island end (before the next island's start).
CREATE VIEW device_busy AS
-- device_busy: when each device core is busy: the union of its ops' intervals, as disjoint
-- intervals (islands), in two sets.
--   ops      every op (op_tracks, dur_ps > 0) on a device chip (TensorCore, SparseCore, GPU,
--            a CPU running XLA ops, another device) but the host work on a CPU device's threads
--            (host_* categories): what keeps the core from idling. An async op's done
--            (`copy-done`, `all-reduce-done`) counts: the core waits in it (XProf's op time).
--   compute  the same less the async ops' ends (`<op>-start`, `<op>-done`, with a `.N`
--            suffix or none): what an async window can hide behind (async_spans); built
--            only for runs with such ops (elsewhere it would repeat 'ops').
-- A device core is (chip, core, track_kind): a TensorCore, each SparseCore, a GPU (all its
-- streams), a host's CPU device (all its XLA threads).
-- Islands as gaps-and-islands build them: ops by (start, end); a new island starts where an
-- op starts after every earlier op of the core ended.
WITH names AS (  -- per distinct name, not per event: whether it is an async op's start or done
    SELECT run_id, string_id, regexp_matches(value, '^.+-(start|done)(\.[0-9]+)?$') AS async_end FROM strings
),
host_work AS (SELECT run_id, string_id FROM strings WHERE starts_with(value, 'host_')),
ops AS (
    SELECT e.run_id, t.chip, t.core, t.track_kind, n.async_end, e.start_ps, e.start_ps + e.dur_ps AS end_ps
    FROM events e
    JOIN op_tracks t USING (run_id, track_id)
    JOIN names n ON n.run_id = e.run_id AND n.string_id = e.name_id
    WHERE t.chip >= 0 AND t.track_kind IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device') AND e.dur_ps > 0
      AND NOT starts_with(t.default_category, 'host_')
      AND NOT EXISTS (SELECT 1 FROM host_work h WHERE h.run_id = e.run_id AND h.string_id = e.category_id)
),
sets AS (
    SELECT run_id, chip, core, track_kind, 'ops' AS busy_set, start_ps, end_ps FROM ops
    UNION ALL
    SELECT run_id, chip, core, track_kind, 'compute' AS busy_set, start_ps, end_ps FROM ops
    WHERE NOT async_end AND run_id IN (SELECT run_id FROM ops WHERE async_end)  -- only where async ops ran
),
marked AS (
    SELECT *, max(end_ps) OVER (PARTITION BY run_id, chip, core, track_kind, busy_set ORDER BY start_ps, end_ps
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_ps
    FROM sets
),
numbered AS (
    SELECT *, sum(CASE WHEN before_ps IS NULL OR start_ps > before_ps THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, chip, core, track_kind, busy_set ORDER BY start_ps, end_ps
                        ROWS UNBOUNDED PRECEDING) AS island
    FROM marked
)
SELECT run_id, chip, core, track_kind, busy_set, min(start_ps) AS start_ps, max(end_ps) AS end_ps
FROM numbered
GROUP BY run_id, chip, core, track_kind, busy_set, island;

-- @view device_idle
-- The idle share of each device core (empty device planes too): busy time, active interval (first op to last), and
-- idle over it (XProf's) and over the capture's span.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip.
-- @column track_kind VARCHAR tensorcore, sparsecore, gpu, cpu or device.
-- @column plane VARCHAR The core's plane (the first by name).
-- @column busy_ps BIGINT Union of its ops' intervals (device_busy, set 'ops'); 0 without events.
-- @column first_ps BIGINT Its first op's start; NULL without ops.
-- @column last_ps BIGINT Its last op's end; NULL without ops.
-- @column active_ps BIGINT last_ps - first_ps.
-- @column span_ps BIGINT The capture's span (runs.last_ps - runs.first_ps).
-- @column idle_share_active DOUBLE 1 - busy_ps / active_ps (XProf's device idle); NULL without ops.
-- @column idle_share_span DOUBLE 1 - busy_ps / span_ps: idle over the whole capture.
CREATE VIEW device_idle AS
-- device_idle: THE idle share of each device core, with or without steps.
--
-- Per device core of the run (a TensorCore, each SparseCore, a GPU, a host's CPU device;
-- a device plane without events too: it is a chip, busy 0), its busy time (device_busy,
-- set 'ops': the union of its ops), the interval from its first op's start to its last
-- op's end (active), and the capture's span (runs.first_ps .. last_ps). Two shares:
--   idle_share_active  1 - busy / active: XProf's device idle (its overview's
--                      device_idle_time_percent sums busy and active over the cores);
--   idle_share_span    1 - busy / span: how much of the capture the core sat idle, counting
--                      the time before its first op and after its last (an inference
--                      server waiting for requests; a capture cut mid-step).
WITH devices AS (
    SELECT run_id, chip, core, kind AS track_kind, min(plane) AS plane
    FROM tracks
    WHERE chip >= 0 AND kind IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device')
    GROUP BY ALL
),
busy AS (
    SELECT run_id, chip, core, track_kind, sum(end_ps - start_ps)::BIGINT AS busy_ps, min(start_ps) AS first_ps,
           max(end_ps) AS last_ps
    FROM device_busy
    WHERE busy_set = 'ops'
    GROUP BY ALL
)
SELECT d.run_id, d.chip, d.core, d.track_kind, d.plane, coalesce(b.busy_ps, 0) AS busy_ps, b.first_ps, b.last_ps,
       b.last_ps - b.first_ps AS active_ps, r.last_ps - r.first_ps AS span_ps,
       1 - b.busy_ps / nullif(b.last_ps - b.first_ps, 0) AS idle_share_active,
       1 - coalesce(b.busy_ps, 0) / nullif(r.last_ps - r.first_ps, 0) AS idle_share_span
FROM devices d
JOIN runs r USING (run_id)
LEFT JOIN busy b USING (run_id, chip, core, track_kind);

-- @view async_spans
-- Async op windows (start to done) per device core, from the `Async XLA Ops` line or from <op>-start / <op>-done
-- pairs, with the time the core's compute hides of each and the rest exposed.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column event_id BIGINT The window's event (the async line's, or the start op's).
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR tracks.plane.
-- @column name VARCHAR The async op (its start's name, e.g. copy-start.2).
-- @column op VARCHAR The op's kind (copy, all-reduce, ...).
-- @column source VARCHAR async_line or start_done.
-- @column start_ps BIGINT Window start.
-- @column end_ps BIGINT Window end.
-- @column dur_ps BIGINT end_ps - start_ps.
-- @column hidden_ps BIGINT Of the window, time the core's compute (device_busy 'compute') covers.
-- @column exposed_ps BIGINT dur_ps - hidden_ps.
CREATE VIEW async_spans AS
-- async_spans: the windows of async ops (copies, collectives): from an op's start to its done,
-- spans of their own kind, never op self time or device busy time (op_tracks leaves the
-- `Async XLA Ops` line out; the short start and done ops stay ops).
--
-- Per device core, from the `Async XLA Ops` line where the core's plane has events there
-- (source async_line: each event is a window, named by its op, e.g. `copy-start.2`), else
-- from `<op>-start[.N]` / `<op>-done[.N]` pairs on the core's op tracks (source
-- start_done): on a track, the k-th start of an (op, suffix) pairs with its k-th done
-- (a window from the start's start to the done's end). hidden_ps is how much of the window
-- the core's compute (device_busy, set 'compute': its ops but async starts and dones)
-- covers, exposed_ps the rest (XProf's analyze_async_overlap: hidden at 90% covered or
-- more, exposed at 10% or less, partial between).
WITH line_windows AS (
    SELECT e.run_id, e.event_id, t.chip, t.core, t.kind AS track_kind, t.plane, n.value AS name,
           'async_line' AS source, e.start_ps, e.start_ps + e.dur_ps AS end_ps
    FROM events e
    JOIN tracks t USING (run_id, track_id)
    JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
    WHERE t.line = 'Async XLA Ops'
),
ends_names AS (  -- per distinct name, not per event: an async op's start or done
    SELECT run_id, string_id, value AS name,
           regexp_extract(value, '^(.+)-(start|done)(\.[0-9]+)?$', 1) AS op,
           regexp_extract(value, '^(.+)-(start|done)(\.[0-9]+)?$', 2) AS side,
           regexp_extract(value, '^(.+)-(start|done)(\.[0-9]+)?$', 3) AS suffix
    FROM strings
    WHERE regexp_matches(value, '^.+-(start|done)(\.[0-9]+)?$')
),
ends AS (
    SELECT e.run_id, e.event_id, e.track_id, t.chip, t.core, t.track_kind, t.plane, n.name, n.op, n.side, n.suffix,
           e.start_ps, e.start_ps + e.dur_ps AS end_ps
    FROM events e
    JOIN op_tracks t USING (run_id, track_id)
    JOIN ends_names n ON n.run_id = e.run_id AND n.string_id = e.name_id
    WHERE NOT EXISTS (SELECT 1 FROM line_windows l WHERE l.run_id = e.run_id AND l.plane = t.plane)
),
ranked AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, track_id, op, suffix, side ORDER BY start_ps, event_id) AS k
    FROM ends
),
pair_windows AS (
    SELECT s.run_id, s.event_id, s.chip, s.core, s.track_kind, s.plane, s.name, 'start_done' AS source,
           s.start_ps, greatest(d.end_ps, s.end_ps) AS end_ps
    FROM ranked s
    JOIN ranked d ON d.run_id = s.run_id AND d.track_id = s.track_id AND d.op = s.op
                 AND d.suffix = s.suffix AND d.k = s.k AND d.side = 'done'
    WHERE s.side = 'start'
),
windows AS (SELECT * FROM line_windows UNION ALL SELECT * FROM pair_windows),
covered AS (
    SELECT w.run_id, w.event_id, sum(least(w.end_ps, b.end_ps) - greatest(w.start_ps, b.start_ps))::BIGINT AS hidden_ps
    FROM windows w
    JOIN device_busy b ON b.run_id = w.run_id AND b.chip = w.chip AND b.core = w.core
                      AND b.track_kind = w.track_kind AND b.busy_set = 'compute'
                      AND b.start_ps < w.end_ps AND b.end_ps > w.start_ps
    GROUP BY ALL
)
SELECT w.run_id, w.event_id, w.chip, w.core, w.track_kind, w.plane, w.name,
       regexp_extract(w.name, '^(.+?)-start(\.[0-9]+)?$', 1) AS op, w.source, w.start_ps, w.end_ps,
       w.end_ps - w.start_ps AS dur_ps, coalesce(c.hidden_ps, 0) AS hidden_ps,
       w.end_ps - w.start_ps - coalesce(c.hidden_ps, 0) AS exposed_ps
FROM windows w
LEFT JOIN covered c USING (run_id, event_id);

-- @view op_stats
-- The top ops: per run, kind of core and op name, events, distinct steps and total time (names whose events take no
-- time left out).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column track_kind VARCHAR Kind of the op's tracks (tensorcore, sparsecore, host, ...).
-- @column name VARCHAR Op name.
-- @column events BIGINT Times it ran.
-- @column steps BIGINT Distinct steps it ran in.
-- @column total_ps BIGINT Sum of its durations.
CREATE VIEW op_stats AS
-- op_stats: the top ops: per run, kind of core and op name, how often it ran and how long
-- (the events of op_tracks). Names whose events all take no time (table layout,
-- debug-check and other marker events) are not ops and are left out. steps counts the
-- distinct steps the op ran in (NULL-step events count as one more). The ops of a run
-- ranked: ORDER BY total_ps DESC. A nested op's total includes its children's time;
-- op_self_times gives each op event's own.
SELECT e.run_id, t.track_kind, n.value AS name, count(*) AS events, count(DISTINCT e.step) AS steps,
       sum(e.dur_ps)::BIGINT AS total_ps
FROM events e
JOIN op_tracks t USING (run_id, track_id)
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
GROUP BY ALL
HAVING sum(e.dur_ps) > 0;

-- @view op_self_times
-- Per op event that takes time: the event it is nested in on its track and its self time (duration less that of the
-- events nested directly in it).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column event_id BIGINT events.event_id.
-- @column track_id INTEGER tracks.track_id.
-- @column name VARCHAR Op name.
-- @column step INTEGER Step; NULL if none.
-- @column start_ps BIGINT Start time.
-- @column dur_ps BIGINT Duration (> 0).
-- @column parent_event_id BIGINT event_id of the event it is nested in directly; NULL at top level.
-- @column self_ps BIGINT dur_ps less its direct children's (>= 0).
CREATE VIEW op_self_times AS
-- op_self_times: per op event that takes time (op_tracks, dur_ps > 0), the event it is
-- nested in on its track and its self time: its duration less that of the events nested
-- directly in it (XProf's self time). On the device op lines ops do not nest (self time
-- = duration); host threads of imported captures do (TraceMe scopes).
--
-- Nesting as a stack builds it: events of a track in (start, longest first, event_id)
-- order, an event's parent is the last earlier event still open at its start. Events that
-- overlap without nesting count as nested in the earlier one; self_ps never goes below 0.
-- A range join per track: compute it for the runs you need (WHERE run_id = ...).
WITH e AS (
    SELECT e.run_id, e.track_id, e.event_id, e.name_id, e.step, e.start_ps, e.dur_ps,
           e.start_ps + e.dur_ps AS end_ps,
           row_number() OVER (PARTITION BY e.run_id, e.track_id ORDER BY e.start_ps, e.dur_ps DESC, e.event_id) AS pos
    FROM events e
    JOIN op_tracks USING (run_id, track_id)
    WHERE e.dur_ps > 0
),
parents AS (
    SELECT c.run_id, c.event_id, arg_max(p.event_id, p.pos) AS parent_event_id, any_value(c.dur_ps) AS dur_ps
    FROM e c
    JOIN e p ON p.run_id = c.run_id AND p.track_id = c.track_id AND p.start_ps <= c.start_ps
            AND p.end_ps > c.start_ps AND p.pos < c.pos
    GROUP BY c.run_id, c.event_id
),
children AS (
    SELECT run_id, parent_event_id AS event_id, sum(dur_ps) AS child_ps FROM parents GROUP BY ALL
)
SELECT e.run_id, e.event_id, e.track_id, n.value AS name, e.step, e.start_ps, e.dur_ps, p.parent_event_id,
       greatest(e.dur_ps - coalesce(c.child_ps, 0), 0)::BIGINT AS self_ps
FROM e
LEFT JOIN parents p USING (run_id, event_id)
LEFT JOIN children c USING (run_id, event_id)
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id;

-- @view sc_table_stats
-- Per run and embedding table, its SparseCore ops: count, distinct steps, time and IDs.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column table_name VARCHAR Embedding table.
-- @column ops BIGINT Events on SparseCore tracks naming the table.
-- @column steps BIGINT Distinct steps they ran in.
-- @column total_ps BIGINT Their summed duration.
-- @column ids BIGINT Their summed IDs; NULL if none recorded.
CREATE VIEW sc_table_stats AS
-- sc_table_stats: per run and embedding table, the SparseCore work on it: ops (events on
-- SparseCore tracks naming the table), the distinct steps they ran in, their time and
-- the IDs they processed.
SELECT e.run_id, tb.value AS table_name, count(*) AS ops, count(DISTINCT e.step) AS steps,
       sum(e.dur_ps)::BIGINT AS total_ps, sum(e.ids)::BIGINT AS ids
FROM events e
JOIN tracks t USING (run_id, track_id)
JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
WHERE t.kind = 'sparsecore'
GROUP BY ALL;

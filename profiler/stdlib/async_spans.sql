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
LEFT JOIN covered c USING (run_id, event_id)

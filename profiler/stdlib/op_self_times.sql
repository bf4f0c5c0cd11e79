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
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id

-- @module cli.events
-- Events as the answers read them (scprof/answers.py: `ops --steps`, `events`, MCP find).
-- @include schema.views

-- @query steps_span
-- The first start and the last end of the events of steps [$step_a, $step_b) (NULLs when none).
-- @param run INTEGER The run.
-- @param step_a BIGINT First step.
-- @param step_b BIGINT First step after them.
-- @column lo BIGINT Earliest start (ps).
-- @column hi BIGINT Latest end (ps).
SELECT min(start_ps) AS lo, max(start_ps + dur_ps) AS hi FROM events WHERE run_id = $run AND step >= $step_a AND step < $step_b;

-- @query events_by_id
-- The given events with their track, name and step, in time order.
-- @param run INTEGER The run.
-- @param ids BIGINT[] The events' ids.
-- @column event_id BIGINT The event.
-- @column track_id INTEGER Its track.
-- @column plane VARCHAR The track's plane.
-- @column line VARCHAR The track's line.
-- @column track_kind VARCHAR The track's kind.
-- @column chip INTEGER The track's chip.
-- @column name VARCHAR The event's name.
-- @column step BIGINT Its step.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
SELECT event_id, track_id, plane, line, track_kind, chip, name, step, start_ps, dur_ps
FROM slices WHERE run_id = $run AND list_contains($ids, event_id) ORDER BY start_ps, event_id;

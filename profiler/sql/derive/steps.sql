-- @module derive.steps
-- What ingest derives per step from a run's events, in one scan (profiler/summaries.py runs these inside
-- ingest's transaction, in this order): the run's per step, track and SparseCore figures into the TEMP table
-- sc_step_tracks, then from it the SparseCore page's and Overview's per step figures for runs without partition
-- statistics (sc_step_cells, sc_step_totals) and the extent of each step's events per chip (step_event_extents,
-- where the step rules of stdlib.steps fall back to when a chip has no step markers); then sc_step_tracks is
-- dropped. Over the tables only.

-- @query sc_forward_id
-- The run's string id of the category sc_forward, -1 when it has none.
-- @param run INTEGER The run.
-- @column forward_id INTEGER strings.string_id of 'sc_forward', else -1.
SELECT coalesce(min(string_id), -1) AS forward_id FROM strings WHERE run_id = $run AND value = 'sc_forward';

-- @statement create_step_tracks
-- One scan of the run's events for the per step summaries: per step, track and sc, the figures of SparseCore op
-- events (`ok`: ids set, category sc_forward or none) and of all events, and the events' extent.
-- @param run INTEGER The run.
-- @param forward INTEGER The run's string id of sc_forward (sc_forward_id).
CREATE TEMP TABLE sc_step_tracks AS
SELECT step, track_id, sc, sum(ids) FILTER (ok) AS ids, sum(unique_ids) FILTER (ok) AS unique_ids,
       max(minibatch) FILTER (ok) AS op_minibatch, sum(dropped_ids) FILTER (ok) AS op_dropped,
       max(minibatch) AS minibatch, sum(dropped_ids) AS dropped,
       min(start_ps) AS start_ps, max(start_ps + dur_ps) AS end_ps
FROM (SELECT step, track_id, sc, ids, unique_ids, minibatch, dropped_ids, start_ps, dur_ps,
             ids IS NOT NULL AND (category_id IS NULL OR category_id = $forward) AS ok
      FROM events WHERE run_id = $run AND step IS NOT NULL)
GROUP BY ALL;

-- @statement fill_sc_step_cells
-- The run's sc_step_cells: per step, chip and SparseCore, over all tables, the SparseCore op events on SparseCore
-- tracks (ui.sparsecore.sc_cells_from_events with no table chosen reads the events the same way).
-- @param run INTEGER The run.
INSERT INTO sc_step_cells
SELECT $run, x.step, t.chip, x.sc, sum(x.ids)::BIGINT, sum(x.unique_ids)::BIGINT,
       least(max(x.op_minibatch)::BIGINT + 1, 2147483647)::INTEGER, sum(x.op_dropped)::BIGINT
FROM sc_step_tracks x
JOIN tracks t ON t.run_id = $run AND t.track_id = x.track_id AND t.chip >= 0 AND t.kind IN ('sparsecore', 'sc_tile')
WHERE x.sc IS NOT NULL AND x.ids IS NOT NULL
GROUP BY ALL;

-- @statement fill_sc_step_totals
-- The run's sc_step_totals: per step, over every event, minibatches (highest minibatch index + 1, at most
-- 2**31 - 1: the column is INTEGER) and dropped IDs; steps where no event has either are left out.
-- @param run INTEGER The run.
INSERT INTO sc_step_totals
SELECT $run, step, least(max(minibatch)::BIGINT + 1, 2147483647)::INTEGER, sum(dropped)::BIGINT
FROM sc_step_tracks
GROUP BY step
HAVING max(minibatch) IS NOT NULL OR sum(dropped) IS NOT NULL;

-- @statement fill_step_event_extents
-- The run's step_event_extents: per chip (-1: the host) and step, the extent of the events tagged with the step.
-- @param run INTEGER The run.
INSERT INTO step_event_extents
SELECT $run, t.chip, x.step, min(x.start_ps), max(x.end_ps)
FROM sc_step_tracks x
JOIN tracks t ON t.run_id = $run AND t.track_id = x.track_id
GROUP BY ALL;

-- @statement drop_step_tracks
-- Drops the TEMP table sc_step_tracks once the run's per step summaries are in.
DROP TABLE sc_step_tracks;

-- @macro all_step_event_extents()
-- Every run's step_event_extents from its events (fill_step_event_extents over all runs at once). The migration
-- to schema version 3 stores them; a read-only connection to a version 2 store reads them as a TEMP view
-- (profiler/store.py).
-- @column run_id INTEGER Run.
-- @column chip INTEGER Chip index; -1 for the host.
-- @column step INTEGER Step.
-- @column start_ps BIGINT Earliest start of the step's events on the chip.
-- @column end_ps BIGINT Latest end of them.
CREATE MACRO all_step_event_extents() AS TABLE
SELECT e.run_id, t.chip, e.step, min(e.start_ps) AS start_ps, max(e.start_ps + e.dur_ps) AS end_ps
FROM events e
JOIN tracks t USING (run_id, track_id)
WHERE e.step IS NOT NULL
GROUP BY ALL;

-- @statement clear_step_event_extents
-- Deletes every run's step_event_extents (the migration to schema version 3 stores them afresh).
DELETE FROM step_event_extents;

-- @statement fill_all_step_event_extents
-- Every run's step_event_extents (the migration to schema version 3; all_step_event_extents installed).
INSERT INTO step_event_extents SELECT * FROM all_step_event_extents();

-- @statement temp_step_event_extents
-- step_event_extents as a TEMP view computed from the events on each query (a read-only connection to a version 2
-- store; all_step_event_extents installed as a TEMP macro).
CREATE OR REPLACE TEMP VIEW step_event_extents AS SELECT * FROM all_step_event_extents();

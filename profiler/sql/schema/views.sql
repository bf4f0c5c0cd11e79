-- @module schema.views
-- The schema's views: raw rows joined to their tracks and strings, so that users' SQL reads names instead of ids.
-- Over the tables only (profiler/schema.py: TABLES).

-- @view slices
-- Events with names resolved: plane, line, kind, chip, core, name, table_name, category, end_ps.
-- @generated tools/gen_sql.py (the typed columns and string joins of profiler/trace_fields.py)
CREATE VIEW slices AS
SELECT e.run_id, e.event_id, t.plane, t.line, t.kind AS track_kind, t.chip, t.core, t.tile,
       e.track_id, n.value AS name, e.start_ps, e.dur_ps, e.start_ps + e.dur_ps AS end_ps,
       e.step,
       s_table.value AS table_name,
       e.sc,
       e.minibatch,
       e.ids,
       e.unique_ids,
       e.dropped_ids,
       e.bytes,
       e.flops,
       s_category.value AS category
FROM events e
JOIN tracks t USING (run_id, track_id)
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
LEFT JOIN strings s_table ON s_table.run_id = e.run_id AND s_table.string_id = e.table_id
LEFT JOIN strings s_category ON s_category.run_id = e.run_id AND s_category.string_id = e.category_id;

-- @view counter_samples
-- Counter samples with their track's plane, counter name (line), chip and unit.
CREATE VIEW counter_samples AS
SELECT c.run_id, t.plane, t.line AS counter, t.chip, t.unit, c.track_id, c.ts_ps, c.value
FROM counters c JOIN tracks t USING (run_id, track_id);

-- @view step_markers
-- Step markers with their track's plane and chip, and end_ps.
CREATE VIEW step_markers AS
SELECT s.run_id, t.plane, t.chip, s.track_id, s.step, s.start_ps, s.dur_ps,
       s.start_ps + s.dur_ps AS end_ps
FROM steps s JOIN tracks t USING (run_id, track_id);

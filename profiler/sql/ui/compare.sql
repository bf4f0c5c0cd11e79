-- @module ui.compare
-- The Compare page's reads (ui/compare_data.py) beyond the runs listing and the comparison itself.
-- @include stdlib.ops

-- @query op_cores
-- Per kind of op track (tensorcore, sparsecore, host, ...) of a run, how many cores (chip, core) carry ops: what the
-- Compare page's per-op time per step is summed over.
-- @param run INTEGER The run (runs.run_id).
-- @column track_kind VARCHAR tracks.kind.
-- @column cores BIGINT Cores of that kind carrying ops.
SELECT track_kind, count(DISTINCT (chip, core)) AS cores FROM op_tracks WHERE run_id = $run GROUP BY track_kind;

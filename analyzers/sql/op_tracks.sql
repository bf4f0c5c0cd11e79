-- op_tracks: the run's tracks whose events are units of work: not counter tracks, and
-- not the step and module lines (their events span the ops below them).
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT track_id, chip, core, kind AS track_kind, plane, line
FROM tracks
WHERE run_id = $run AND kind <> 'counter'
  AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules');

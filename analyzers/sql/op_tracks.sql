-- op_tracks: the run's tracks whose events are units of work: not counter tracks, and
-- not the step and module lines (their events span the ops below them).
-- default_category is the category of an event that records none: tc_other, sc_other
-- or host_other by its track.
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT track_id, chip, core, kind AS track_kind, plane, line,
       CASE kind WHEN 'tensorcore' THEN 'tc_other' WHEN 'host' THEN 'host_other' ELSE 'sc_other' END AS default_category
FROM tracks
WHERE run_id = $run AND kind <> 'counter'
  AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules');

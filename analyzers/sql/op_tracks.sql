-- op_tracks: the run's rows of the store's op_tracks view (profiler/stdlib/op_tracks.sql:
-- tracks whose events are units of work, with the category of an op that records none).
CREATE OR REPLACE TEMP VIEW {table} AS
SELECT track_id, chip, core, track_kind, plane, line, default_category FROM op_tracks WHERE run_id = $run;

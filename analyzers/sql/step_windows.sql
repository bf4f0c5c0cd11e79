-- step_windows: the run's rows of the store's step_windows view (profiler/stdlib/
-- step_windows.sql: each device chip's step windows, cut where its next one starts), kept
-- as a temp table because several analyses join it.
CREATE OR REPLACE TEMP TABLE {table} AS
SELECT chip, step, start_ps, end_ps FROM step_windows WHERE run_id = $run;

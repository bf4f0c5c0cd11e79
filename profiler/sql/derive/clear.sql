-- @module derive.clear
-- Deletes one run's rows of every summary (profiler/summaries.py's SUMMARY_TABLES), before ingest (re)computes
-- them; one statement per table, written by tools/gen_sql.py.
-- @include stdlib.steps, stdlib.memory

-- @statement delete_run_summaries
-- Deletes the run's rows of run_summaries.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM run_summaries WHERE run_id = $run;

-- @statement delete_sc_step_cells
-- Deletes the run's rows of sc_step_cells.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM sc_step_cells WHERE run_id = $run;

-- @statement delete_sc_step_totals
-- Deletes the run's rows of sc_step_totals.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM sc_step_totals WHERE run_id = $run;

-- @statement delete_step_event_extents
-- Deletes the run's rows of step_event_extents.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM step_event_extents WHERE run_id = $run;

-- @statement delete_tile_sums
-- Deletes the run's rows of tile_sums.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM tile_sums WHERE run_id = $run;

-- @statement delete_chip_steps
-- Deletes the run's rows of chip_steps.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM chip_steps WHERE run_id = $run;

-- @statement delete_step_times
-- Deletes the run's rows of step_times.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM step_times WHERE run_id = $run;

-- @statement delete_hbm_peaks
-- Deletes the run's rows of hbm_peaks.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (SUMMARY_TABLES)
DELETE FROM hbm_peaks WHERE run_id = $run;

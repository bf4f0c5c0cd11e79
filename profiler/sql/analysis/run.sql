-- @module analysis.run
-- The facts of one run every analysis starts from (analyzers/context.py): its row of runs and its step times.
-- @include stdlib.steps

-- @query run_row
-- The run's row of runs.
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM runs WHERE run_id = $run;

-- @query step_times
-- The run's rows of step_times, by step: each step's time on the slice and whether summaries count it.
-- @param run INTEGER The run (runs.run_id).
-- @column step INTEGER Training step.
-- @column step_ps BIGINT Step time: the longest chip's step.
-- @column start_ps BIGINT The longest chip's step start.
-- @column counted BOOLEAN Whether summaries count the step.
SELECT step, dur_ps AS step_ps, start_ps, counted FROM step_times WHERE run_id = $run ORDER BY step;

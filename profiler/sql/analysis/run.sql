-- @module analysis.run
-- The facts of one run every analysis starts from (analyzers/context.py): its row of runs and its step times.
-- @include stdlib.steps

-- @query run_row
-- The run's row of runs.
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM runs WHERE run_id = $run;

-- @query device_kinds
-- The kinds of the run's device tracks (counters and host threads aside): what its device memory is called
-- (profiler.units.memory_word: HBM on a TPU, device memory on a GPU or CPU).
-- @param run INTEGER The run (runs.run_id).
-- @column kind VARCHAR tracks.kind.
SELECT DISTINCT kind FROM tracks WHERE run_id = $run AND chip >= 0 AND kind NOT IN ('counter', 'host') ORDER BY kind;

-- @query step_times
-- The run's rows of step_times, by step: each step's time on the slice and whether summaries count it.
-- @param run INTEGER The run (runs.run_id).
-- @column step INTEGER Training step.
-- @column step_ps BIGINT Step time: the longest chip's step.
-- @column start_ps BIGINT The longest chip's step start.
-- @column counted BOOLEAN Whether summaries count the step.
SELECT step, dur_ps AS step_ps, start_ps, counted FROM step_times WHERE run_id = $run ORDER BY step;

-- @query slow_steps
-- The counted steps longer than twice the median counted step (DuckDB's median interpolates, as numpy's 50th
-- percentile), and their share of the counted steps' time: whether a few slow steps carry the mean step time.
-- @param run INTEGER The run (runs.run_id).
-- @column slow_steps BIGINT Counted steps over twice the median step time.
-- @column slow_steps_time_share DOUBLE Their share of the counted steps' summed time (NULL without counted time).
WITH counted AS (SELECT dur_ps FROM step_times WHERE run_id = $run AND counted),
     middle AS (SELECT median(dur_ps) AS p50_ps FROM counted)
SELECT count(*) FILTER (WHERE dur_ps > 2 * p50_ps) AS slow_steps,
       (coalesce(sum(dur_ps) FILTER (WHERE dur_ps > 2 * p50_ps), 0) / nullif(sum(dur_ps), 0))::DOUBLE
           AS slow_steps_time_share
FROM counted, middle;

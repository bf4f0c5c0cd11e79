-- @module ui.overview
-- The Overview's reads (ui/data.py): a run's steps, their times and span, per-chip step times, SparseCore minibatches
-- and the chips' kinds. Steps are inclusive ranges [$step_lo, $step_hi]; times are picoseconds.
-- @include stdlib.steps

-- @query step_times
-- Per step of a run in [$step_lo, $step_hi]: its time and start, and whether summaries count it (the store's
-- step_times view).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @column step INTEGER Training step.
-- @column step_ps BIGINT The step's time.
-- @column start_ps BIGINT Its start.
-- @column counted BOOLEAN Whether summaries count it.
SELECT step, dur_ps AS step_ps, start_ps, counted FROM step_times
WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi ORDER BY step;

-- @query steps_span
-- The stretch of time the steps in [$step_lo, $step_hi] cover on the timeline: every step marker of a device chip
-- (step_spans), else the steps' step times (e.g. host-only runs).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @column t0 BIGINT Start (NULL: no such steps).
-- @column t1 BIGINT End.
WITH m AS (
    SELECT min(start_ps) AS t0, max(end_ps) AS t1 FROM step_spans
    WHERE run_id = $run AND chip >= 0 AND source IN ('tensorcore_steps', 'device_steps')
      AND step BETWEEN $step_lo AND $step_hi
),
t AS (
    SELECT min(start_ps) AS t0, max(start_ps + dur_ps) AS t1 FROM step_times
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
)
SELECT coalesce(m.t0, t.t0) AS t0, CASE WHEN m.t0 IS NULL THEN t.t1 ELSE m.t1 END AS t1 FROM m, t;

-- @query step_range
-- First and last step of a run (its step times).
-- @param run INTEGER The run (runs.run_id).
-- @column lo INTEGER First step (NULL: no steps).
-- @column hi INTEGER Last step.
SELECT min(step) AS lo, max(step) AS hi FROM step_times WHERE run_id = $run;

-- @query chip_step_times
-- Per chip, mean and max of its step (chip_steps: the chip's TensorCore `Steps` marker where it has one) over the
-- counted steps in range (the per-chip view of the Overview).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @column chip INTEGER Chip index.
-- @column mean_step_ps DOUBLE Mean step time.
-- @column max_step_ps BIGINT Longest step time.
-- @column steps BIGINT Steps counted.
SELECT c.chip, avg(c.dur_ps) AS mean_step_ps, max(c.dur_ps) AS max_step_ps, count(*) AS steps
FROM chip_steps c JOIN step_times t USING (run_id, step)
WHERE c.run_id = $run AND c.chip >= 0 AND t.counted AND c.step BETWEEN $step_lo AND $step_hi
GROUP BY c.chip ORDER BY c.chip;

-- @query step_minibatches
-- SparseCore minibatches per step (mean and max over the counted steps in range) and dropped IDs (total over every
-- step in range), from the store's step_minibatches view (partition statistics, else events).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @column rows BIGINT Steps with any record.
-- @column minibatches_per_step DOUBLE Mean minibatches per counted step.
-- @column max_minibatches INTEGER Most minibatches of a counted step.
-- @column dropped_ids DOUBLE Dropped IDs over every step in range.
SELECT count(*) AS rows, avg(minibatches) FILTER (WHERE counted)::DOUBLE AS minibatches_per_step,
       max(minibatches) FILTER (WHERE counted) AS max_minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids
FROM step_minibatches WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi;

-- @query chip_kinds
-- Each device chip of a run with the first kind of its device tracks (counters and a chip's host threads aside): what
-- names it (TPU, GPU, CPU).
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column kind VARCHAR tracks.kind, the least by text.
SELECT chip, min(kind) AS kind
FROM tracks
WHERE run_id = $run AND chip >= 0 AND kind NOT IN ('counter', 'host')
GROUP BY chip;

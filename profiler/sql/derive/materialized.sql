-- @module derive.materialized
-- The materialized views of the analysis standard library (profiler/sql/stdlib/), filled from their SQL:
-- per view, one run's rows (ingest, profiler/summaries.py), and every run's afresh (a migration, new step
-- rules). Written by tools/gen_sql.py from the stdlib modules: regenerate after changing a view's SQL.
-- @include stdlib.steps, stdlib.memory

-- @statement fill_chip_steps
-- Inserts one run's rows of chip_steps.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.chip_steps)
INSERT INTO chip_steps BY NAME SELECT * FROM (
-- chip_steps: THE rule for what a step is: each chip's step, as the chip measures it.
--
-- A chip's step is its span from the best-ranked source of step_spans the chip has:
-- its TensorCore `Steps` markers, else its other step markers, else the extent of its
-- events tagged with the step. The TensorCore's markers come first because they tile
-- the chip's timeline (a step ends where the next begins), so step times add up to
-- the run's wall time; a SparseCore's marker spans from the early start pipelining
-- gives it to its last op, and two consecutive ones overlap.
-- The host (chip -1) counts only in runs where no device chip has any span: a
-- host-only capture (e.g. JAX on the CPU) is measured by its host step markers, else
-- by the extent of its host events; in a run with device chips the host's work only
-- feeds them.
SELECT run_id, chip, step, source, start_ps, end_ps, end_ps - start_ps AS dur_ps
FROM (
    SELECT *, min(rank) OVER (PARTITION BY run_id, chip) AS best, max(chip) OVER (PARTITION BY run_id) AS top_chip
    FROM step_spans
)
WHERE rank = best AND (chip >= 0 OR top_chip < 0)
) WHERE run_id = $run;

-- @statement clear_chip_steps
-- Deletes every run's rows of chip_steps.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.chip_steps)
DELETE FROM chip_steps;

-- @statement fill_all_chip_steps
-- Inserts every run's rows of chip_steps.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.chip_steps)
INSERT INTO chip_steps BY NAME SELECT * FROM (
-- chip_steps: THE rule for what a step is: each chip's step, as the chip measures it.
--
-- A chip's step is its span from the best-ranked source of step_spans the chip has:
-- its TensorCore `Steps` markers, else its other step markers, else the extent of its
-- events tagged with the step. The TensorCore's markers come first because they tile
-- the chip's timeline (a step ends where the next begins), so step times add up to
-- the run's wall time; a SparseCore's marker spans from the early start pipelining
-- gives it to its last op, and two consecutive ones overlap.
-- The host (chip -1) counts only in runs where no device chip has any span: a
-- host-only capture (e.g. JAX on the CPU) is measured by its host step markers, else
-- by the extent of its host events; in a run with device chips the host's work only
-- feeds them.
SELECT run_id, chip, step, source, start_ps, end_ps, end_ps - start_ps AS dur_ps
FROM (
    SELECT *, min(rank) OVER (PARTITION BY run_id, chip) AS best, max(chip) OVER (PARTITION BY run_id) AS top_chip
    FROM step_spans
)
WHERE rank = best AND (chip >= 0 OR top_chip < 0)
);

-- @statement fill_step_times
-- Inserts one run's rows of step_times.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.step_times)
INSERT INTO step_times BY NAME SELECT * FROM (
-- step_times: THE step time of every step, and which steps summaries count.
--
-- A step's time is its longest chip's step (chip_steps: the TensorCore `Steps` marker
-- where there is one): a synchronous step ends when its slowest chip does (XProf's step
-- time too: the longest step marker of any core). start_ps is that same chip's start, so
-- a step's window [start_ps, start_ps + dur_ps) is one interval of the trace, never one
-- chip's start with another's duration (chips of a multi-worker capture may run a step
-- hundreds of ms apart); of chips with equal steps, the earliest.
--
-- counted: the steps that summaries (mean, p50, p90 step time; breakdown shares;
-- minibatches per step) cover, one rule everywhere (scprof analyze, scprof compare,
-- the UI): every step but the run's first and last when the run has at least 5
-- steps, every step of a shorter run.
--   - The first step is warm-up: it pays start-up (the first transfer, compilation
--     in a real capture) and starts with the input pipeline empty.
--   - The last step is the drain: nothing overlaps it from a next step (with pipelining
--     its SparseCore work ran ahead and its TensorCore step is short), and a recording
--     cut short ends inside it.
--   - Below 5 steps, dropping two would leave too few to summarise.
-- Totals (dropped IDs, events) cover every step.
WITH per_step AS (
    SELECT run_id, step, arg_max(start_ps, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS start_ps, max(dur_ps) AS dur_ps,
           arg_max(source, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS source
    FROM chip_steps
    GROUP BY run_id, step
)
SELECT run_id, step, start_ps, dur_ps,
       count(*) OVER r < 5 OR (step > min(step) OVER r AND step < max(step) OVER r) AS counted,
       source
FROM per_step
WINDOW r AS (PARTITION BY run_id)
) WHERE run_id = $run;

-- @statement clear_step_times
-- Deletes every run's rows of step_times.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.step_times)
DELETE FROM step_times;

-- @statement fill_all_step_times
-- Inserts every run's rows of step_times.
-- @generated tools/gen_sql.py (the SQL of stdlib.steps.step_times)
INSERT INTO step_times BY NAME SELECT * FROM (
-- step_times: THE step time of every step, and which steps summaries count.
--
-- A step's time is its longest chip's step (chip_steps: the TensorCore `Steps` marker
-- where there is one): a synchronous step ends when its slowest chip does (XProf's step
-- time too: the longest step marker of any core). start_ps is that same chip's start, so
-- a step's window [start_ps, start_ps + dur_ps) is one interval of the trace, never one
-- chip's start with another's duration (chips of a multi-worker capture may run a step
-- hundreds of ms apart); of chips with equal steps, the earliest.
--
-- counted: the steps that summaries (mean, p50, p90 step time; breakdown shares;
-- minibatches per step) cover, one rule everywhere (scprof analyze, scprof compare,
-- the UI): every step but the run's first and last when the run has at least 5
-- steps, every step of a shorter run.
--   - The first step is warm-up: it pays start-up (the first transfer, compilation
--     in a real capture) and starts with the input pipeline empty.
--   - The last step is the drain: nothing overlaps it from a next step (with pipelining
--     its SparseCore work ran ahead and its TensorCore step is short), and a recording
--     cut short ends inside it.
--   - Below 5 steps, dropping two would leave too few to summarise.
-- Totals (dropped IDs, events) cover every step.
WITH per_step AS (
    SELECT run_id, step, arg_max(start_ps, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS start_ps, max(dur_ps) AS dur_ps,
           arg_max(source, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS source
    FROM chip_steps
    GROUP BY run_id, step
)
SELECT run_id, step, start_ps, dur_ps,
       count(*) OVER r < 5 OR (step > min(step) OVER r AND step < max(step) OVER r) AS counted,
       source
FROM per_step
WINDOW r AS (PARTITION BY run_id)
);

-- @statement fill_hbm_peaks
-- Inserts one run's rows of hbm_peaks.
-- @param run INTEGER The run.
-- @generated tools/gen_sql.py (the SQL of stdlib.memory.hbm_peaks)
INSERT INTO hbm_peaks BY NAME SELECT * FROM (
-- hbm_peaks: THE HBM peak of each chip: the highest heap + stack in use (hbm_usage),
-- the earliest time it was reached, and the share of the chip's HBM capacity (from
-- the run's hardware header; NULL when the header lacks it). A run's HBM peak is its
-- highest chip's (the lowest chip number on a tie).
SELECT u.run_id, u.chip, max(u.hbm_bytes) AS hbm_peak_bytes,
       arg_max(u.ts_ps, struct_pack(b := u.hbm_bytes, t := -(u.ts_ps::HUGEINT))) AS hbm_peak_ts_ps,
       any_value(r.hbm_bytes) AS hbm_capacity_bytes,
       max(u.hbm_bytes) / nullif(any_value(r.hbm_bytes), 0) AS hbm_peak_share
FROM hbm_usage u
JOIN runs r USING (run_id)
GROUP BY u.run_id, u.chip
) WHERE run_id = $run;

-- @statement clear_hbm_peaks
-- Deletes every run's rows of hbm_peaks.
-- @generated tools/gen_sql.py (the SQL of stdlib.memory.hbm_peaks)
DELETE FROM hbm_peaks;

-- @statement fill_all_hbm_peaks
-- Inserts every run's rows of hbm_peaks.
-- @generated tools/gen_sql.py (the SQL of stdlib.memory.hbm_peaks)
INSERT INTO hbm_peaks BY NAME SELECT * FROM (
-- hbm_peaks: THE HBM peak of each chip: the highest heap + stack in use (hbm_usage),
-- the earliest time it was reached, and the share of the chip's HBM capacity (from
-- the run's hardware header; NULL when the header lacks it). A run's HBM peak is its
-- highest chip's (the lowest chip number on a tie).
SELECT u.run_id, u.chip, max(u.hbm_bytes) AS hbm_peak_bytes,
       arg_max(u.ts_ps, struct_pack(b := u.hbm_bytes, t := -(u.ts_ps::HUGEINT))) AS hbm_peak_ts_ps,
       any_value(r.hbm_bytes) AS hbm_capacity_bytes,
       max(u.hbm_bytes) / nullif(any_value(r.hbm_bytes), 0) AS hbm_peak_share
FROM hbm_usage u
JOIN runs r USING (run_id)
GROUP BY u.run_id, u.chip
);

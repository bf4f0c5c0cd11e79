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
    SELECT run_id, step, arg_max(start_ps, struct_pack(d := dur_ps, s := -start_ps)) AS start_ps, max(dur_ps) AS dur_ps,
           arg_max(source, struct_pack(d := dur_ps, s := -start_ps)) AS source
    FROM chip_steps
    GROUP BY run_id, step
)
SELECT run_id, step, start_ps, dur_ps,
       count(*) OVER r < 5 OR (step > min(step) OVER r AND step < max(step) OVER r) AS counted,
       source
FROM per_step
WINDOW r AS (PARTITION BY run_id)

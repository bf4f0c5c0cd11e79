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
WITH device AS (SELECT DISTINCT run_id FROM step_spans WHERE chip >= 0),
eligible AS (
    SELECT * FROM step_spans WHERE chip >= 0 OR run_id NOT IN (SELECT run_id FROM device)
),
best AS (SELECT run_id, chip, min(rank) AS rank FROM eligible GROUP BY ALL)
SELECT e.run_id, e.chip, e.step, e.source, e.start_ps, e.end_ps, e.end_ps - e.start_ps AS dur_ps
FROM eligible e
JOIN best b USING (run_id, chip, rank)

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

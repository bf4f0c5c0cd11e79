-- step_windows: the interval of each device chip's timeline that belongs to each step:
-- what the wall-time split (the step breakdown, analyzers/breakdown.py) divides into
-- categories.
--
-- chip_steps on device chips (chip >= 0), each window cut where the chip's next one
-- starts, so a chip's windows never overlap (TensorCore `Steps` markers tile the
-- timeline already; other sources may overlap and are cut). Host-only runs have no
-- windows: the split is measured on device chips.
SELECT run_id, chip, step, source, start_ps,
       least(end_ps, coalesce(lead(start_ps) OVER (PARTITION BY run_id, chip ORDER BY start_ps, step), end_ps))
           AS end_ps
FROM chip_steps
WHERE chip >= 0

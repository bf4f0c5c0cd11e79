-- @module evidence.memory
-- The evidence query of the memory analyzer's findings (analyzers/rules/memory.py): shown with each finding (its
-- evidence_sql), for a user to run with `scprof sql`.
-- @include schema.views

-- @query hbm_counters
-- The HBM counters over time (hbm_heap_pressure, hbm_stack_pressure).
-- @param run INTEGER The run (runs.run_id).

-- HBM counters over time
SELECT chip, counter, ts_ps, value FROM counter_samples WHERE run_id = $run AND unit = 'bytes' AND counter LIKE 'HBM %' ORDER BY chip, counter, ts_ps;

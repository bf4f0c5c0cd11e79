-- @module cli.demo
-- The query `make demo` runs with `scprof sql` (scprof/demo.py), as a user would: text for the SQL guard, not run by
-- the product itself.
-- @include schema.views, stdlib.runs

-- @query sparsecore_time_per_op
-- SparseCore time per step of each op, summed over all SparseCores, per run (what-if trials left out).
-- @column run VARCHAR The run's name.
-- @column op VARCHAR The op's name.
-- @column ops BIGINT How many ran.
-- @column us_per_step_all_scs DOUBLE Microseconds per step, all SparseCores summed.
SELECT r.name AS run, s.name AS op, count(*) AS ops, round(sum(s.dur_ps) / 1e6 / any_value(r.steps), 1) AS us_per_step_all_scs FROM slices s JOIN run_list r USING (run_id) WHERE r.whatif_origin IS NULL AND s.track_kind = 'sparsecore' AND s.line = 'Sparse Core Ops' GROUP BY r.name, s.name ORDER BY run, us_per_step_all_scs DESC;

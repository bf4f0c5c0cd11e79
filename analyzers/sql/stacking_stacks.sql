-- stacking_stacks: per stack (the `table` of SparseCore ops), what one step costs
-- it on a SparseCore: passes (ops per SparseCore per step, forward and backward:
-- one per minibatch), SparseCore time, IDs looked up, the most minibatches any step
-- needed (partition statistics), and the fixed cost of one op: the intercept of a
-- least-squares fit of forward-op duration on IDs over the run's forward ops of
-- stacks with the same width (they share the per-ID cost), with its R², capped by
-- the shortest such op (no op is cheaper than its fixed cost).
WITH ops AS (
    SELECT table_name, category, step, chip, coalesce(sc, core) AS core, dur_ps, ids
    FROM {op_events}
    WHERE category IN ('sc_forward', 'sc_backward') AND table_name IS NOT NULL AND step IS NOT NULL
),
per_stack AS (
    SELECT table_name AS stack_name,
           count(DISTINCT step) AS steps,
           count(DISTINCT chip::VARCHAR || ':' || core::VARCHAR) AS sparsecores,
           count(*) FILTER (WHERE category = 'sc_forward') AS fwd_ops,
           count(*) FILTER (WHERE category = 'sc_backward') AS bwd_ops,
           sum(dur_ps) AS sc_ps,
           (sum(ids) FILTER (WHERE category = 'sc_forward'))::BIGINT AS ids
    FROM ops GROUP BY table_name
),
mb AS (
    SELECT table_name AS stack_name, max(minibatches) AS max_minibatches
    FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name
),
widths AS (
    SELECT DISTINCT l.stack_name, l.width, l.dtype_bytes FROM {stacking_layout} l
),
fit AS (
    SELECT w.width, w.dtype_bytes,
           least(regr_intercept(o.dur_ps, o.ids), min(o.dur_ps))::DOUBLE AS fixed_ps_per_op,
           regr_r2(o.dur_ps, o.ids)::DOUBLE AS fit_r2
    FROM ops o JOIN widths w ON w.stack_name = o.table_name
    WHERE o.category = 'sc_forward'
    GROUP BY ALL
)
SELECT w.stack_name, w.width, w.dtype_bytes, p.steps, p.sparsecores,
       (p.fwd_ops + p.bwd_ops)::DOUBLE / nullif(p.steps * p.sparsecores, 0) AS passes_per_step,
       p.sc_ps::DOUBLE / nullif(p.steps * p.sparsecores, 0) AS sc_ps_per_step,
       p.ids, m.max_minibatches, f.fixed_ps_per_op, f.fit_r2
FROM widths w
LEFT JOIN per_stack p USING (stack_name)
LEFT JOIN mb m USING (stack_name)
LEFT JOIN fit f ON f.width = w.width AND f.dtype_bytes = w.dtype_bytes
ORDER BY w.stack_name

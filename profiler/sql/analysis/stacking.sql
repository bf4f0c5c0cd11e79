-- @module analysis.stacking
-- The stacking analysis of one run (analyzers/rules/stacking.py, analyzers/rules/padding.py): the table layout the compiler
-- recorded (the stacking_layout macro of analysis.base) and what each stack costs per step on the SparseCores.
-- @include analysis.base

-- @query stacking_tables
-- The recorded table layout, one row per table (the columns of stacking_layout), largest padding waste first.
-- @param run INTEGER The run (runs.run_id).
-- @column stack_name VARCHAR The stack (the layout event's table).
-- @column table_name VARCHAR The embedding table.
-- @column stack_tables BIGINT How many tables the stack holds.
-- @column features BIGINT Features.
-- @column vocab BIGINT Vocabulary size.
-- @column padded_vocab BIGINT Vocabulary padded to a multiple of the SparseCore count.
-- @column width BIGINT Embedding width.
-- @column padded_width BIGINT Width padded.
-- @column dtype_bytes BIGINT Bytes per element.
-- @column row_bytes BIGINT Bytes per row.
-- @column padded_row_bytes BIGINT Bytes per row padded to 32 bytes.
-- @column optimizer_slots BIGINT Optimizer slots.
-- @column stored_bytes BIGINT vocab x width x dtype bytes: what the table needs.
-- @column padded_bytes BIGINT padded vocab x padded row bytes: what HBM holds (one copy, without optimizer slots).
-- @column row_padding_bytes BIGINT vocab x (padded row - row): rows padded to 32 bytes.
-- @column vocab_padding_bytes BIGINT (padded vocab - vocab) x padded row: vocabulary padded to a multiple of the SparseCore count.
-- @column waste_share DOUBLE 1 - stored / padded (width 1 f32: 7/8).
-- @column row_padding_share DOUBLE 1 - row bytes / padded row bytes.
SELECT * FROM stacking_layout($run)
ORDER BY vocab_padding_bytes + row_padding_bytes DESC, stack_name, table_name;

-- @query stacking_stacks
-- Per stack (the `table` of SparseCore ops), what one step costs it on a SparseCore: passes (ops per SparseCore per
-- step, forward and backward: one per minibatch), SparseCore time, IDs looked up, the most minibatches any step
-- needed (partition statistics), and the fixed cost of one op: the intercept of a least-squares fit of forward-op
-- duration on IDs over the run's forward ops of stacks with the same width (they share the per-ID cost), with its R²,
-- capped by the shortest such op (no op is cheaper than its fixed cost).
-- @param run INTEGER The run (runs.run_id).
-- @column stack_name VARCHAR The stack.
-- @column width BIGINT Embedding width.
-- @column dtype_bytes BIGINT Bytes per element.
-- @column steps BIGINT Steps with SparseCore ops of the stack.
-- @column sparsecores BIGINT SparseCores that ran them.
-- @column passes_per_step DOUBLE Forward and backward ops per SparseCore and step.
-- @column sc_ps_per_step DOUBLE SparseCore time per SparseCore and step, ps.
-- @column ids BIGINT IDs its forward ops looked up.
-- @column max_minibatches INTEGER Most minibatches of a step.
-- @column fixed_ps_per_op DOUBLE Fixed cost of one op, ps.
-- @column fit_r2 DOUBLE R² of the fit.
WITH ops AS (
    SELECT table_name, category, step, chip, coalesce(sc, core) AS core, dur_ps, ids
    FROM op_events($run)
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
    SELECT DISTINCT l.stack_name, l.width, l.dtype_bytes FROM stacking_layout($run) l
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
ORDER BY w.stack_name;

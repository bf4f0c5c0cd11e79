-- minibatching: per table, how many minibatches its steps needed, the largest
-- observed per-partition ID and unique-ID counts against the compiled limits,
-- and the SparseCore forward ops per step actually executed (one per minibatch
-- per SparseCore, so more ops than SparseCores means minibatching), with the
-- fixed cost of an op from a least-squares fit of op duration on its IDs.
WITH stats AS (
    SELECT table_name, count(DISTINCT step) AS steps, max(minibatches) AS max_minibatches,
           avg(minibatches)::DOUBLE AS mean_minibatches,
           count(DISTINCT step) FILTER (WHERE minibatches > 1) AS steps_minibatched,
           max(ids) AS observed_max_ids, max(unique_ids) AS observed_max_unique_ids,
           max(max_ids_per_partition) AS max_ids_per_partition,
           max(max_unique_ids_per_partition) AS max_unique_ids_per_partition
    FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name
),
ops AS (  -- op_base and ids, not op_events: only the forward ops' table names are looked up
    SELECT tb.value AS table_name, (count(*) / count(DISTINCT b.step))::DOUBLE AS fwd_ops_per_step,
           count(DISTINCT (b.chip, coalesce(b.sc, b.core))) AS sparsecores,
           regr_intercept(b.dur_ps, b.ids)::DOUBLE AS fixed_ps_per_op, regr_r2(b.dur_ps, b.ids)::DOUBLE AS fit_r2
    FROM {op_base} b JOIN strings tb ON tb.run_id = $run AND tb.string_id = b.table_id
    WHERE b.category_id IN (SELECT string_id FROM strings WHERE run_id = $run AND value = 'sc_forward')
    GROUP BY tb.value
)
SELECT s.*, o.fwd_ops_per_step, o.sparsecores, o.fixed_ps_per_op, o.fit_r2
FROM stats s LEFT JOIN ops o USING (table_name)
ORDER BY s.max_minibatches DESC, s.table_name

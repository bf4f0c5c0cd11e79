-- @module analysis.memory
-- The memory analysis of one run (analyzers/rules/memory.py): peaks of every memory counter, what HBM holds at the worst
-- chip's peak, and the HBM stack recomputed from the SparseCore guide's formulas.
-- @include analysis.base, stdlib.memory, schema.views

-- @query memory_peaks
-- Per chip and memory counter (HBM heap, HBM stack, SPMEM ..., any counter track in bytes), the peak value, when it
-- first happened and its mean, with the chip's HBM peak from the store's hbm_peaks view (heap + stack sampled
-- together, its earliest time, the capacity from the run's hardware header).
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column counter VARCHAR The counter.
-- @column peak_bytes DOUBLE Its peak.
-- @column peak_ts_ps BIGINT The earliest time at the peak.
-- @column mean_bytes DOUBLE Its mean over the samples.
-- @column hbm_peak_bytes DOUBLE The chip's HBM peak (heap + stack).
-- @column hbm_peak_ts_ps BIGINT Its earliest time.
-- @column hbm_capacity_bytes BIGINT HBM capacity per chip (runs.hbm_bytes).
WITH peaks AS (
    SELECT chip, counter, max(value) AS peak_bytes, avg(value) AS mean_bytes,
           arg_max(ts_ps, struct_pack(v := value, t := -ts_ps)) AS peak_ts_ps  -- the earliest at the peak
    FROM counter_samples
    WHERE run_id = $run AND unit = 'bytes' AND chip >= 0
    GROUP BY chip, counter
)
SELECT p.chip, p.counter, p.peak_bytes, p.peak_ts_ps, p.mean_bytes,
       h.hbm_peak_bytes, h.hbm_peak_ts_ps,
       (SELECT hbm_bytes FROM runs WHERE run_id = $run) AS hbm_capacity_bytes
FROM peaks p
LEFT JOIN (SELECT * FROM hbm_peaks WHERE run_id = $run) h USING (chip)
ORDER BY p.chip, p.counter;

-- @query memory_contributors
-- What HBM holds on chip `chip` at time `ts` (the combined peak): every HBM counter in bytes ('HBM heap', its
-- contributors 'HBM heap: <name>', 'HBM stack'), with its value held at `ts`, its first value (before any step: the
-- static part; 0 for a counter that starts later) and its growth since (value at `ts` minus it).
-- @param run INTEGER The run (runs.run_id).
-- @param chip INTEGER The chip.
-- @param ts BIGINT The time, ps.
-- @column counter VARCHAR The counter.
-- @column contributor VARCHAR What a 'HBM heap: <name>' counter names; NULL for the others.
-- @column bytes_at_peak DOUBLE Its value held at `ts`.
-- @column first_bytes DOUBLE Its first value (0 for a counter that starts after the chip's first HBM sample).
-- @column growth_bytes DOUBLE Its growth since.
WITH s AS (
    SELECT counter, ts_ps, value
    FROM counter_samples
    WHERE run_id = $run AND chip = $chip AND unit = 'bytes' AND counter LIKE 'HBM %'
)
SELECT counter,
       CASE WHEN counter LIKE 'HBM heap: %' THEN substr(counter, 11) END AS contributor,
       arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts) AS bytes_at_peak,
       first_bytes,
       coalesce(arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts), 0) - first_bytes AS growth_bytes
FROM (
    -- a counter whose first sample comes after the chip's first HBM sample held 0 before it
    SELECT *, CASE WHEN min(ts_ps) OVER (PARTITION BY counter) > min(ts_ps) OVER () THEN 0
                   ELSE first_value(value) OVER (PARTITION BY counter ORDER BY ts_ps) END AS first_bytes
    FROM s
)
GROUP BY counter, first_bytes
ORDER BY bytes_at_peak DESC NULLS LAST, counter;

-- @query stack_estimate
-- The HBM stack of each table group (stack) per chip, recomputed from the SparseCore guide's formulas
-- (docs/emulator.md "Memory model") with trace data only: forward = (2 * width + 1) * max_unique_nz_per_row *
-- logical_replica_count * 4 bytes, backward = 3 * width * max_unique_nz_per_row * logical_replica_count * 4 bytes per
-- SparseCore, times the SparseCores of a chip; logical_replica_count = every SparseCore of the slice (each serves one
-- buffer from every SparseCore), width from the table layout events, and max_unique_nz_per_row twice: the compiled
-- max_unique_ids_per_partition (what the compiler reserves) and the most unique IDs any partition saw in the run (what
-- the IDs needed: the floor lower limits could reach).
-- @param run INTEGER The run (runs.run_id).
-- @column stack_name VARCHAR The table group (stack).
-- @column width BIGINT Embedding width.
-- @column compiled_unique BIGINT The compiled max_unique_ids_per_partition.
-- @column observed_unique BIGINT The most unique IDs a partition saw.
-- @column logical_replica_count INTEGER Every SparseCore of the slice.
-- @column forward_bytes BIGINT Forward stack per chip with the compiled limit.
-- @column backward_bytes BIGINT Backward stack per chip with the compiled limit.
-- @column forward_observed_bytes BIGINT Forward stack per chip with the observed unique IDs.
-- @column backward_observed_bytes BIGINT Backward stack per chip with the observed unique IDs.
WITH hw AS (
    SELECT num_chips * sparsecores_per_chip AS replicas, sparsecores_per_chip AS spc
    FROM runs WHERE run_id = $run
),
widths AS (SELECT stack_name, max(width) AS width FROM stacking_layout($run) GROUP BY stack_name),
uniq AS (
    SELECT table_name AS stack_name, max(max_unique_ids_per_partition) AS compiled_unique,
           max(unique_ids) AS observed_unique
    FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name
)
SELECT u.stack_name, w.width, u.compiled_unique, u.observed_unique, hw.replicas AS logical_replica_count,
       (2 * w.width + 1) * u.compiled_unique * hw.replicas * 4 * hw.spc AS forward_bytes,
       3 * w.width * u.compiled_unique * hw.replicas * 4 * hw.spc AS backward_bytes,
       (2 * w.width + 1) * u.observed_unique * hw.replicas * 4 * hw.spc AS forward_observed_bytes,
       3 * w.width * u.observed_unique * hw.replicas * 4 * hw.spc AS backward_observed_bytes
FROM uniq u JOIN widths w USING (stack_name), hw
ORDER BY u.stack_name;

-- @query table_groups
-- How many table groups (stacks) the run's partition statistics hold.
-- @param run INTEGER The run (runs.run_id).
-- @column n BIGINT Table groups.
SELECT count(DISTINCT table_name) AS n FROM sc_partition_stats WHERE run_id = $run;

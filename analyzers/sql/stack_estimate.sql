-- stack_estimate: the HBM stack of each table group (stack) per chip, recomputed from
-- the SparseCore guide's formulas (docs/emulator.md "Memory model") with trace data only:
--   forward  = (2 * width + 1) * max_unique_nz_per_row * logical_replica_count * 4 bytes
--   backward = 3 * width * max_unique_nz_per_row * logical_replica_count * 4 bytes
-- per SparseCore, times the SparseCores of a chip; logical_replica_count = every
-- SparseCore of the slice (each serves one buffer from every SparseCore), width from the
-- table layout events, and max_unique_nz_per_row twice: the compiled
-- max_unique_ids_per_partition (what the compiler reserves) and the most unique IDs any
-- partition saw in the run (what the IDs needed: the floor lower limits could reach).
WITH hw AS (
    SELECT num_chips * sparsecores_per_chip AS replicas, sparsecores_per_chip AS spc
    FROM runs WHERE run_id = $run
),
widths AS (SELECT stack_name, max(width) AS width FROM {stacking_layout} GROUP BY stack_name),
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
ORDER BY u.stack_name

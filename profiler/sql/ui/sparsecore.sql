-- @module ui.sparsecore
-- The SparseCore page's reads (ui/data.py): a run's embedding tables, the heatmaps' cells per step bucket and
-- partition (from partition statistics, else from SparseCore op events or their per-step summary) and the per-table
-- summary. Steps are inclusive ranges [$step_lo, $step_hi]; $sb is the number of steps per heatmap column.

-- @query sc_tables
-- Embedding tables with partition statistics in a run.
-- @param run INTEGER The run (runs.run_id).
-- @column table_name VARCHAR The table.
SELECT DISTINCT table_name FROM sc_partition_stats WHERE run_id = $run ORDER BY table_name;

-- @query sc_tables_from_events
-- Tables named on events (from the run's summary), for runs without partition statistics.
-- @param run INTEGER The run (runs.run_id).
-- @column table_name VARCHAR The table.
SELECT unnest(event_tables) AS table_name FROM run_summaries WHERE run_id = $run ORDER BY 1;

-- @query sc_cells
-- The SparseCore heatmaps: per step bucket (steps // $sb) and partition (chip, sc), IDs, unique IDs, minibatches and
-- dropped IDs over the chosen tables ($tables; empty: all), and the highest ratio of IDs (unique IDs) to the compiled
-- limit of any chosen table.
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @param tables VARCHAR[] The chosen tables (empty: all).
-- @param sb INTEGER Steps per bucket.
-- @column step INTEGER First step of the bucket.
-- @column chip INTEGER Chip index.
-- @column sc INTEGER SparseCore index.
-- @column ids DOUBLE IDs (the most of a step in the bucket).
-- @column unique_ids DOUBLE Unique IDs (the most of a step).
-- @column minibatches DOUBLE Minibatches (the most of a step).
-- @column dropped_ids DOUBLE Dropped IDs (summed).
-- @column ids_ratio DOUBLE Highest IDs over the compiled limit.
-- @column unique_ratio DOUBLE Highest unique IDs over the compiled limit.
WITH per_step AS (
    SELECT step, chip, sc, sum(ids) AS ids, sum(unique_ids) AS unique_ids, max(minibatches) AS minibatches,
           sum(dropped_ids) AS dropped_ids,
           max(ids::DOUBLE / nullif(max_ids_per_partition, 0)) AS ids_ratio,
           max(unique_ids::DOUBLE / nullif(max_unique_ids_per_partition, 0)) AS unique_ratio
    FROM sc_partition_stats
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi AND (len($tables) = 0 OR list_contains($tables, table_name))
    GROUP BY ALL
)
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       max(ids_ratio) AS ids_ratio, max(unique_ratio) AS unique_ratio
FROM per_step GROUP BY ALL ORDER BY 1, 2, 3;

-- @query sc_cells_from_events
-- sc_cells from SparseCore op events (category sc_forward, or uncategorised), for runs without partition
-- statistics: no limits, so no ratios. Tables and the category are given by string id.
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @param forward_id INTEGER String id of sc_forward (-1: none).
-- @param table_ids INTEGER[] String ids of the chosen tables (empty: all).
-- @param sb INTEGER Steps per bucket.
-- @column step INTEGER First step of the bucket.
-- @column chip INTEGER Chip index.
-- @column sc INTEGER SparseCore index.
-- @column ids DOUBLE IDs (the most of a step in the bucket).
-- @column unique_ids DOUBLE Unique IDs (the most of a step).
-- @column minibatches DOUBLE Minibatches (the most of a step).
-- @column dropped_ids DOUBLE Dropped IDs (summed).
-- @column ids_ratio DOUBLE NULL (no limits).
-- @column unique_ratio DOUBLE NULL (no limits).
WITH sc_tracks AS (SELECT track_id, chip FROM tracks WHERE run_id = $run AND chip >= 0 AND kind IN ('sparsecore', 'sc_tile')),
per_step AS (
    SELECT e.step, t.chip, e.sc, sum(e.ids) AS ids, sum(e.unique_ids) AS unique_ids,
           least(max(e.minibatch)::BIGINT + 1, 2147483647) AS minibatches, sum(e.dropped_ids) AS dropped_ids
    FROM events e JOIN sc_tracks t USING (track_id)
    WHERE e.run_id = $run AND e.ids IS NOT NULL AND e.sc IS NOT NULL AND e.step BETWEEN $step_lo AND $step_hi
      AND (e.category_id IS NULL OR e.category_id = $forward_id)
      AND (len($table_ids) = 0 OR list_contains($table_ids, e.table_id))
    GROUP BY ALL
)
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       NULL::DOUBLE AS ids_ratio, NULL::DOUBLE AS unique_ratio
FROM per_step GROUP BY ALL ORDER BY 1, 2, 3;

-- @query sc_cells_from_summary
-- sc_cells_from_events with no table chosen, from the run's per-step SparseCore summary (the same events, summed per
-- step, chip and SparseCore at ingest).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @param sb INTEGER Steps per bucket.
-- @column step INTEGER First step of the bucket.
-- @column chip INTEGER Chip index.
-- @column sc INTEGER SparseCore index.
-- @column ids DOUBLE IDs (the most of a step in the bucket).
-- @column unique_ids DOUBLE Unique IDs (the most of a step).
-- @column minibatches DOUBLE Minibatches (the most of a step).
-- @column dropped_ids DOUBLE Dropped IDs (summed).
-- @column ids_ratio DOUBLE NULL (no limits).
-- @column unique_ratio DOUBLE NULL (no limits).
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       NULL::DOUBLE AS ids_ratio, NULL::DOUBLE AS unique_ratio
FROM sc_step_cells WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
GROUP BY ALL ORDER BY 1, 2, 3;

-- @query sc_table_summary
-- Per table: largest partition against its compiled limits, minibatches, dropped IDs and skew (largest partition over
-- the mean partition, averaged over steps).
-- @param run INTEGER The run (runs.run_id).
-- @param step_lo INTEGER First step.
-- @param step_hi INTEGER Last step.
-- @param tables VARCHAR[] The chosen tables (empty: all).
-- @column table_name VARCHAR The table.
-- @column max_ids BIGINT Most IDs of a partition.
-- @column max_ids_per_partition BIGINT Its compiled limit.
-- @column max_unique_ids BIGINT Most unique IDs of a partition.
-- @column max_unique_ids_per_partition BIGINT Its compiled limit.
-- @column minibatches_per_step DOUBLE Mean minibatches per step.
-- @column dropped_ids DOUBLE Dropped IDs in all.
-- @column skew DOUBLE Largest over mean partition, averaged over steps.
WITH per_step AS (
    SELECT table_name, step, max(ids) AS max_ids, avg(ids) AS mean_ids, max(unique_ids) AS max_unique,
           max(max_ids_per_partition) AS ids_limit, max(max_unique_ids_per_partition) AS unique_limit,
           max(minibatches) AS minibatches, sum(dropped_ids) AS dropped_ids
    FROM sc_partition_stats
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi AND (len($tables) = 0 OR list_contains($tables, table_name))
    GROUP BY ALL
)
SELECT table_name, max(max_ids) AS max_ids, max(ids_limit) AS max_ids_per_partition,
       max(max_unique) AS max_unique_ids, max(unique_limit) AS max_unique_ids_per_partition,
       avg(minibatches) AS minibatches_per_step, sum(dropped_ids)::DOUBLE AS dropped_ids,
       avg(max_ids / nullif(mean_ids, 0)) AS skew
FROM per_step GROUP BY table_name ORDER BY table_name;

-- @query has_sparsecores
-- Whether a run has SparseCores: its hardware says so (runs.sparsecores_per_chip > 0), or it has SparseCore tracks or
-- partition statistics. A GPU or CPU capture and a PyTorch trace have none: the UI leaves the SparseCore page and
-- figures out for them.
-- @param run INTEGER The run (runs.run_id).
-- @column has_sparsecores BOOLEAN True when the run has SparseCores.
SELECT
    coalesce((SELECT sparsecores_per_chip FROM runs WHERE run_id = $run), 0) > 0
    OR EXISTS (SELECT 1 FROM tracks WHERE run_id = $run AND kind IN ('sparsecore', 'sc_tile'))
    OR EXISTS (SELECT 1 FROM sc_partition_stats WHERE run_id = $run) AS has_sparsecores;

-- partition_load: per step and table, the load on each SparseCore partition from
-- host preprocessing (sc_partition_stats), with the compiled limits, the mean and
-- max over partitions, and each partition's rank.
SELECT step, table_name, chip, sc, ids, unique_ids, max_ids_per_partition, max_unique_ids_per_partition,
       minibatches, dropped_ids,
       avg(ids) OVER t AS mean_ids, max(ids) OVER t AS max_ids, stddev_pop(ids) OVER t AS std_ids,
       rank() OVER (PARTITION BY step, table_name ORDER BY ids DESC, chip, sc) AS load_rank
FROM sc_partition_stats
WHERE run_id = $run
WINDOW t AS (PARTITION BY step, table_name)
ORDER BY step, table_name, chip, sc

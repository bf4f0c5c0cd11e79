-- id_dropping: IDs dropped past the limits (allow_id_dropping), per table and
-- step, against all IDs the table's partitions received. Dropped IDs are lost
-- silently for training: their embeddings are neither looked up nor updated.
SELECT table_name, step, sum(dropped_ids)::BIGINT AS dropped_ids,
       (sum(ids) + sum(dropped_ids))::BIGINT AS all_ids,
       max(ids)::BIGINT AS max_ids_kept, max(max_ids_per_partition) AS max_ids_per_partition,
       max(unique_ids)::BIGINT AS max_unique_ids_kept, max(max_unique_ids_per_partition) AS max_unique_ids_per_partition
FROM sc_partition_stats
WHERE run_id = $run AND dropped_ids IS NOT NULL
GROUP BY ALL
ORDER BY table_name, step

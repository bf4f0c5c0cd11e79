-- step_minibatches: per step, the SparseCore minibatches (the most any partition of the
-- step was split into) and the IDs dropped past the compiled limits, with the step's
-- `counted` (step_times; false for a step without a step time).
--
-- From the partition statistics (sc_partition_stats) when the run has them; else from
-- the events' minibatch index and dropped IDs (sc_step_totals, summed at ingest).
-- NULL where the source records none. Summaries: minibatches per step over counted
-- steps; dropped IDs as a total over every step (each lost ID counts).
WITH stats AS (
    SELECT run_id, step, max(minibatches) AS minibatches, sum(dropped_ids)::BIGINT AS dropped_ids,
           'partition_stats' AS source
    FROM sc_partition_stats
    GROUP BY run_id, step
),
from_events AS (
    SELECT run_id, step, minibatches, dropped_ids, 'events' AS source
    FROM sc_step_totals
    WHERE run_id NOT IN (SELECT run_id FROM sc_partition_stats)
),
both_sources AS (SELECT * FROM stats UNION ALL SELECT * FROM from_events)
SELECT b.run_id, b.step, b.minibatches, b.dropped_ids, coalesce(t.counted, false) AS counted, b.source
FROM both_sources b
LEFT JOIN step_times t USING (run_id, step)

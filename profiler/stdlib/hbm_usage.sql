-- hbm_usage: HBM in use on each chip over time: heap + stack at every sample of either.
--
-- The HBM counters are the byte counters named 'HBM heap' and 'HBM stack' (what
-- scprof traces record; their contributors, 'HBM heap: <name>', are parts of the heap
-- and not added again). A counter holds its value from its sample until the next, so
-- at each sample time of either counter the other's last value is added (0 before its
-- first sample); of two samples of one counter at the same instant the higher counts.
-- A run without these counters has no rows (e.g. an XProf capture, whose allocator
-- counters are named by the allocator).
WITH s AS (
    SELECT c.run_id, t.chip, c.ts_ps, CASE WHEN t.line = 'HBM heap' THEN c.value END AS heap,
           CASE WHEN t.line = 'HBM stack' THEN c.value END AS stack
    FROM counters c
    JOIN tracks t USING (run_id, track_id)
    WHERE t.unit = 'bytes' AND t.chip >= 0 AND t.line IN ('HBM heap', 'HBM stack')
),
per_ts AS (SELECT run_id, chip, ts_ps, max(heap) AS heap, max(stack) AS stack FROM s GROUP BY ALL)
SELECT run_id, chip, ts_ps, heap_bytes, stack_bytes, coalesce(heap_bytes, 0) + coalesce(stack_bytes, 0) AS hbm_bytes
FROM (
    SELECT run_id, chip, ts_ps, last_value(heap IGNORE NULLS) OVER w AS heap_bytes,
           last_value(stack IGNORE NULLS) OVER w AS stack_bytes
    FROM per_ts
    WINDOW w AS (PARTITION BY run_id, chip ORDER BY ts_ps ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)

-- hbm_usage: HBM in use on each chip over time: heap + stack at every sample of either.
--
-- The HBM counters are the byte counters named 'HBM heap' and 'HBM stack' (what
-- scprof traces record; their contributors, 'HBM heap: <name>', are parts of the heap
-- and not added again). A counter holds its value from its sample until the next, so
-- at each sample time of either counter the other's last value is added (0 before its
-- first sample). A run without these counters has no rows (e.g. an XProf capture,
-- whose allocator counters are named by the allocator).
WITH s AS (
    SELECT c.run_id, t.chip, t.line AS counter, c.ts_ps, c.value
    FROM counters c
    JOIN tracks t USING (run_id, track_id)
    WHERE t.unit = 'bytes' AND t.chip >= 0 AND t.line IN ('HBM heap', 'HBM stack')
),
ts AS (SELECT DISTINCT run_id, chip, ts_ps FROM s)
SELECT t.run_id, t.chip, t.ts_ps, h.value AS heap_bytes, k.value AS stack_bytes,
       coalesce(h.value, 0) + coalesce(k.value, 0) AS hbm_bytes
FROM ts t
ASOF LEFT JOIN (SELECT * FROM s WHERE counter = 'HBM heap') h
    ON h.run_id = t.run_id AND h.chip = t.chip AND h.ts_ps <= t.ts_ps
ASOF LEFT JOIN (SELECT * FROM s WHERE counter = 'HBM stack') k
    ON k.run_id = t.run_id AND k.chip = t.chip AND k.ts_ps <= t.ts_ps

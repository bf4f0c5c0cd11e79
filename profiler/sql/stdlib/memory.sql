-- @module stdlib.memory
-- HBM in use per chip over time (the 'HBM heap' and 'HBM stack' counters added) and each chip's peak. Over the
-- tables only.

-- @view hbm_usage
-- HBM in use per chip over time: 'HBM heap' + 'HBM stack' at every sample of either (each holds its value until its
-- next sample).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column ts_ps BIGINT Sample time (of either counter).
-- @column heap_bytes DOUBLE HBM heap then; NULL before its first sample.
-- @column stack_bytes DOUBLE HBM stack then; NULL before its first sample.
-- @column hbm_bytes DOUBLE heap + stack (a missing one as 0).
CREATE VIEW hbm_usage AS
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
);

-- @view hbm_peaks
-- The HBM peak of each chip (highest hbm_usage), when it was first reached and its share of capacity; a run's HBM
-- peak is its highest chip's.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column hbm_peak_bytes DOUBLE Highest heap + stack.
-- @column hbm_peak_ts_ps BIGINT Earliest sample time at that value.
-- @column hbm_capacity_bytes BIGINT runs.hbm_bytes: HBM per chip; NULL if unknown.
-- @column hbm_peak_share DOUBLE hbm_peak_bytes / hbm_capacity_bytes; NULL if the capacity is unknown.
-- @materialized
CREATE VIEW hbm_peaks AS
-- hbm_peaks: THE HBM peak of each chip: the highest heap + stack in use (hbm_usage),
-- the earliest time it was reached, and the share of the chip's HBM capacity (from
-- the run's hardware header; NULL when the header lacks it). A run's HBM peak is its
-- highest chip's (the lowest chip number on a tie).
SELECT u.run_id, u.chip, max(u.hbm_bytes) AS hbm_peak_bytes,
       arg_max(u.ts_ps, struct_pack(b := u.hbm_bytes, t := -(u.ts_ps::HUGEINT))) AS hbm_peak_ts_ps,
       any_value(r.hbm_bytes) AS hbm_capacity_bytes,
       max(u.hbm_bytes) / nullif(any_value(r.hbm_bytes), 0) AS hbm_peak_share
FROM hbm_usage u
JOIN runs r USING (run_id)
GROUP BY u.run_id, u.chip;

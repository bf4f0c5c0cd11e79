-- memory_peaks: per chip and memory counter (HBM heap, HBM stack, SPMEM ...,
-- any counter track in bytes), the peak value, when it happened, and the
-- combined HBM peak (heap + stack sampled together) against the chip's HBM
-- capacity from the run's hardware header (NULL when the header lacks it), with the
-- earliest time of that combined peak (hbm_peak_ts_ps).
WITH s AS (
    SELECT chip, counter, ts_ps, value
    FROM counter_samples
    WHERE run_id = $run AND unit = 'bytes' AND chip >= 0
),
peaks AS (
    SELECT chip, counter, max(value) AS peak_bytes, arg_max(ts_ps, value) AS peak_ts_ps, avg(value) AS mean_bytes
    FROM s GROUP BY chip, counter
),
-- heap + stack at every sample time of either (a counter holds its value until its next sample)
hbm_ts AS (SELECT DISTINCT chip, ts_ps FROM s WHERE counter IN ('HBM heap', 'HBM stack')),
hbm AS (
    SELECT t.chip, t.ts_ps, coalesce(h.value, 0) + coalesce(k.value, 0) AS hbm_bytes
    FROM hbm_ts t
    ASOF LEFT JOIN (SELECT * FROM s WHERE counter = 'HBM heap') h ON h.chip = t.chip AND h.ts_ps <= t.ts_ps
    ASOF LEFT JOIN (SELECT * FROM s WHERE counter = 'HBM stack') k ON k.chip = t.chip AND k.ts_ps <= t.ts_ps
),
hbm_peak AS (
    SELECT chip, max(hbm_bytes) AS hbm_peak_bytes,
           min(ts_ps) FILTER (WHERE hbm_bytes = peak) AS hbm_peak_ts_ps
    FROM (SELECT *, max(hbm_bytes) OVER (PARTITION BY chip) AS peak FROM hbm)
    GROUP BY chip
)
SELECT p.chip, p.counter, p.peak_bytes, p.peak_ts_ps, p.mean_bytes,
       h.hbm_peak_bytes, h.hbm_peak_ts_ps,
       (SELECT hbm_bytes FROM runs WHERE run_id = $run) AS hbm_capacity_bytes
FROM peaks p
LEFT JOIN hbm_peak h USING (chip)
ORDER BY p.chip, p.counter

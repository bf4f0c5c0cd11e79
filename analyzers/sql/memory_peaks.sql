-- memory_peaks: per chip and memory counter (HBM heap, HBM stack, SPMEM ..., any counter
-- track in bytes), the peak value, when it first happened and its mean, with the chip's HBM
-- peak from the store's hbm_peaks view (profiler/stdlib/hbm_peaks.sql: heap + stack
-- sampled together, its earliest time, the capacity from the run's hardware header).
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
ORDER BY p.chip, p.counter

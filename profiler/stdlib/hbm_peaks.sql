-- hbm_peaks: THE HBM peak of each chip: the highest heap + stack in use (hbm_usage),
-- the earliest time it was reached, and the share of the chip's HBM capacity (from
-- the run's hardware header; NULL when the header lacks it). A run's HBM peak is its
-- highest chip's (the lowest chip number on a tie).
SELECT u.run_id, u.chip, max(u.hbm_bytes) AS hbm_peak_bytes,
       arg_max(u.ts_ps, struct_pack(b := u.hbm_bytes, t := -u.ts_ps)) AS hbm_peak_ts_ps,
       any_value(r.hbm_bytes) AS hbm_capacity_bytes,
       max(u.hbm_bytes) / nullif(any_value(r.hbm_bytes), 0) AS hbm_peak_share
FROM hbm_usage u
JOIN runs r USING (run_id)
GROUP BY u.run_id, u.chip

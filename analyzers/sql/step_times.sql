-- step_times: one row per step: its duration on the slice, the longest window of
-- any chip (a synchronous step ends when its slowest chip does).
SELECT step, max(end_ps - start_ps) AS step_ps, min(start_ps) AS start_ps
FROM {step_windows}
GROUP BY step
ORDER BY step

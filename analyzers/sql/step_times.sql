-- step_times: one row per step: its duration as XProf measures it, the longest step
-- marker of any core of any chip (TensorCore `Steps` or `Sparse Core Steps`): a
-- synchronous step ends when its last core does. Runs without device step markers
-- use the longest step window of any chip (sql/step_windows.sql).
WITH marks AS (
    SELECT s.step, max(s.dur_ps) AS step_ps, min(s.start_ps) AS start_ps
    FROM steps s JOIN tracks t USING (run_id, track_id)
    WHERE s.run_id = $run AND t.chip >= 0
    GROUP BY s.step
)
SELECT step, step_ps, start_ps FROM marks
UNION ALL
SELECT step, max(end_ps - start_ps) AS step_ps, min(start_ps) AS start_ps
FROM {step_windows}
WHERE NOT EXISTS (SELECT 1 FROM marks)
GROUP BY step
ORDER BY step

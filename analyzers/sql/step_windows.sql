-- step_windows: the interval each step occupies on each chip.
-- Step time is the TensorCore's, as in XProf: markers on the chip's `Steps` line
-- when present, else any step markers of the chip (e.g. Sparse Core Steps), else
-- the extent of the events tagged with the step. A window ends where the chip's
-- next one starts, so the windows of a chip tile its timeline without overlap.
CREATE OR REPLACE TEMP TABLE {table} AS
WITH marks AS (
    SELECT t.chip, s.step, s.start_ps, s.start_ps + s.dur_ps AS end_ps, (t.line = 'Steps') AS tc_line
    FROM steps s JOIN tracks t USING (run_id, track_id)
    WHERE s.run_id = $run AND t.chip >= 0
),
tc_marks AS (
    SELECT chip, step, min(start_ps) AS start_ps, max(end_ps) AS end_ps FROM marks WHERE tc_line GROUP BY ALL
),
other_marks AS (
    SELECT chip, step, min(start_ps) AS start_ps, max(end_ps) AS end_ps FROM marks
    WHERE chip NOT IN (SELECT chip FROM tc_marks) GROUP BY ALL
),
extents AS (  -- the events of chips without markers only (a semi-join: nothing scanned when all have some)
    SELECT t.chip, e.step, min(e.start_ps) AS start_ps, max(e.start_ps + e.dur_ps) AS end_ps
    FROM events e JOIN tracks t USING (run_id, track_id)
    WHERE e.run_id = $run AND e.step IS NOT NULL
      AND e.track_id IN (SELECT track_id FROM tracks WHERE run_id = $run AND chip >= 0
                         AND chip NOT IN (SELECT chip FROM marks))
    GROUP BY ALL
),
raw AS (SELECT * FROM tc_marks UNION ALL SELECT * FROM other_marks UNION ALL SELECT * FROM extents)
SELECT chip, step, start_ps,
       least(end_ps, coalesce(lead(start_ps) OVER (PARTITION BY chip ORDER BY start_ps, step), end_ps)) AS end_ps
FROM raw;

-- @module ui.whatif
-- The what-if trials the UI shows (ui/whatif_data.py), from whatif_trials (written by analyze --verify, tune and
-- compare --attribute): verified fixes, a tuning session's trials and an attribution's rows. Times are picoseconds.

-- @query verified_fixes
-- Per fix verified for a run (label = the finding's rule, overrides, derive_limits), the row of the latest 'verify'
-- session that tried it, with the trial's run name.
-- @param run INTEGER The run (runs.run_id).
-- @column label VARCHAR The finding's rule.
-- @column overrides JSON The config overrides tried.
-- @column derive_limits BOOLEAN Whether limits were derived.
-- @column trial_run_id INTEGER The trial's run.
-- @column trial_run VARCHAR Its name.
-- @column step_time_ps DOUBLE The trial's step time.
-- @column ref_step_time_ps DOUBLE The reference's.
-- @column change DOUBLE Relative change.
-- @column ci_low DOUBLE Its confidence interval's low end.
-- @column ci_high DOUBLE High end.
-- @column verdict VARCHAR The verdict.
-- @column accepted BOOLEAN Whether it was accepted.
-- @column reason VARCHAR Why.
-- @column created_at TIMESTAMP When.
SELECT w.label, w.overrides, w.derive_limits, w.trial_run_id, r.name AS trial_run, w.step_time_ps,
       w.ref_step_time_ps, w.change, w.ci_low, w.ci_high, w.verdict, w.accepted, w.reason, w.created_at
FROM whatif_trials w LEFT JOIN runs r ON r.run_id = w.trial_run_id
WHERE w.run_id = $run AND w.purpose = 'verify'
QUALIFY row_number() OVER (PARTITION BY w.label, CAST(w.overrides AS VARCHAR), w.derive_limits
                           ORDER BY w.created_at DESC, w.seq DESC) = 1
ORDER BY w.label;

-- @query tune_trials
-- The trials of the run's latest 'tune' session (or of session $session when not '') in order, with their runs'
-- names, and how many tune sessions the run has.
-- @param run INTEGER The run (runs.run_id).
-- @param session VARCHAR The session ('': the latest).
-- @column session VARCHAR The session.
-- @column sessions BIGINT The run's tune sessions.
-- @column seq INTEGER The trial's order.
-- @column label VARCHAR What it tried.
-- @column overrides JSON The config overrides tried.
-- @column derive_limits BOOLEAN Whether limits were derived.
-- @column trial_run_id INTEGER The trial's run.
-- @column trial_run VARCHAR Its name.
-- @column ref_run_id INTEGER The reference run.
-- @column step_time_ps DOUBLE The trial's step time.
-- @column ref_step_time_ps DOUBLE The reference's.
-- @column change DOUBLE Relative change.
-- @column ci_low DOUBLE Its confidence interval's low end.
-- @column ci_high DOUBLE High end.
-- @column verdict VARCHAR The verdict.
-- @column accepted BOOLEAN Whether it was accepted.
-- @column reason VARCHAR Why.
-- @column created_at TIMESTAMP When.
WITH all_s AS (
    SELECT session, max(created_at) AS last_at FROM whatif_trials WHERE run_id = $run AND purpose = 'tune' GROUP BY session
),
s AS (
    SELECT session, (SELECT count(*) FROM all_s) AS sessions FROM all_s
    WHERE $session = '' OR session = $session ORDER BY last_at DESC, session LIMIT 1
)
SELECT w.session, s.sessions, w.seq, w.label, w.overrides, w.derive_limits, w.trial_run_id, r.name AS trial_run,
       w.ref_run_id, w.step_time_ps, w.ref_step_time_ps, w.change, w.ci_low, w.ci_high, w.verdict, w.accepted,
       w.reason, w.created_at
FROM whatif_trials w JOIN s USING (session) LEFT JOIN runs r ON r.run_id = w.trial_run_id
WHERE w.run_id = $run AND w.purpose = 'tune'
ORDER BY w.seq;

-- @query attribution
-- The rows of the latest 'attribute' session started from $base whose candidate row
-- (whatif.attribute.CANDIDATE_LABEL) names $cand, in order (whatif.attribute.shares_from_rows reads them).
-- @param base INTEGER The base run.
-- @param cand INTEGER The candidate run.
-- @param candidate_label VARCHAR The label of the candidate's row.
-- @column session VARCHAR The session.
-- @column seq INTEGER The row's order.
-- @column label VARCHAR What it tried.
-- @column overrides JSON The config overrides tried.
-- @column derive_limits BOOLEAN Whether limits were derived.
-- @column trial_run_id INTEGER The trial's run.
-- @column step_time_ps DOUBLE The trial's step time.
-- @column ref_step_time_ps DOUBLE The reference's.
-- @column change DOUBLE Relative change.
-- @column ci_low DOUBLE Its confidence interval's low end.
-- @column ci_high DOUBLE High end.
-- @column verdict VARCHAR The verdict.
-- @column created_at TIMESTAMP When.
WITH s AS (
    SELECT session FROM whatif_trials
    WHERE run_id = $base AND purpose = 'attribute' AND label = $candidate_label AND trial_run_id = $cand
    ORDER BY created_at DESC, session LIMIT 1
)
SELECT w.session, w.seq, w.label, w.overrides, w.derive_limits, w.trial_run_id, w.step_time_ps, w.ref_step_time_ps,
       w.change, w.ci_low, w.ci_high, w.verdict, w.created_at
FROM whatif_trials w JOIN s USING (session) WHERE w.purpose = 'attribute'
ORDER BY w.seq;

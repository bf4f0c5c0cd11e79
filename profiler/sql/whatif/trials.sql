-- @module whatif.trials
-- The what-if sessions' trials (whatif/: verify, tune, attribute): the rows they write to whatif_trials,
-- a session's rows as attribute reads them back, and the dropped ids a trial is measured by.
-- @include stdlib.steps

-- @statement insert_trial
-- One measured trial of a session.
-- @param run INTEGER The run the session started from.
-- @param session VARCHAR The session (a uuid).
-- @param purpose VARCHAR verify, tune or attribute.
-- @param seq INTEGER Order of the trial in its session.
-- @param label VARCHAR What was tried.
-- @param overrides VARCHAR The trial's config changes as JSON text.
-- @param derive_limits BOOLEAN The trial derived a limits file first.
-- @param trial_run INTEGER The trial's run; NULL when refused before simulating.
-- @param ref_run INTEGER The run the trial was compared with.
-- @param step_time_ps DOUBLE Mean step time of the trial.
-- @param ref_step_time_ps DOUBLE Mean step time of the reference.
-- @param change DOUBLE Relative change of the mean step time.
-- @param ci_low DOUBLE 95% interval of the change, low end.
-- @param ci_high DOUBLE 95% interval of the change, high end.
-- @param verdict VARCHAR improved, regressed, no change, inconclusive, not enough steps, or failed.
-- @param accepted BOOLEAN Whether the step or fix was taken (NULL for attribute).
-- @param reason VARCHAR Why, in words.
-- @param created_at TIMESTAMP When it was measured.
INSERT INTO whatif_trials VALUES ($run, $session, $purpose, $seq, $label, $overrides, $derive_limits, $trial_run,
  $ref_run, $step_time_ps, $ref_step_time_ps, $change, $ci_low, $ci_high, $verdict, $accepted, $reason, $created_at);

-- @query session_rows
-- One session's rows, in order (whatif.attribute.shares_from_rows reads them).
-- @param session VARCHAR The session.
-- @column label VARCHAR What was tried.
-- @column overrides JSON The trial's config changes.
-- @column derive_limits BOOLEAN Whether a limits file was derived first.
-- @column trial_run_id INTEGER The trial's run.
-- @column step_time_ps DOUBLE Mean step time of the trial.
-- @column ref_step_time_ps DOUBLE Mean step time of the reference.
-- @column change DOUBLE Relative change.
-- @column ci_low DOUBLE 95% interval, low end.
-- @column ci_high DOUBLE 95% interval, high end.
-- @column verdict VARCHAR The verdict.
SELECT label, overrides, derive_limits, trial_run_id, step_time_ps, ref_step_time_ps, change, ci_low,
       ci_high, verdict FROM whatif_trials WHERE session = $session ORDER BY seq;

-- @query dropped_ids
-- IDs a run dropped: past the compiled limits (step_minibatches) and per the host's Dropped IDs counter.
-- @param run INTEGER The run.
-- @column limits BIGINT Dropped past the compiled limits.
-- @column counter BIGINT The Dropped IDs counter's sum (past the limits or the chip cap).
SELECT (SELECT coalesce(sum(dropped_ids), 0) FROM step_minibatches WHERE run_id = $run)::BIGINT AS limits,
       (SELECT coalesce(sum(c.value), 0) FROM counters c JOIN tracks t USING (run_id, track_id)
        WHERE c.run_id = $run AND t.kind = 'counter' AND t.line = 'Dropped IDs')::BIGINT AS counter;

-- @query trials_of_inputs
-- Stored trial runs by the digest of what was simulated (the trace header's tag whatif_input_sha1) or of
-- what its limits were derived from (whatif_derive_sha1): a trial is stored once per distinct simulation.
-- The newest run of a digest, should there be several.
-- @param input_sha1s VARCHAR[] Digests of simulation inputs (whatif/trial.py input_sha1).
-- @param derive_sha1s VARCHAR[] Digests of the inputs limits were derived from.
-- @column run_id INTEGER The trial's run.
-- @column name VARCHAR Its name.
-- @column input_sha1 VARCHAR Its whatif_input_sha1 tag.
-- @column derive_sha1 VARCHAR Its whatif_derive_sha1 tag (NULL: its limits were not derived by the engine).
WITH tagged AS (
  SELECT run_id, name,
    json_extract_string(tags, '$.whatif_input_sha1') AS input_sha1,
    json_extract_string(tags, '$.whatif_derive_sha1') AS derive_sha1
  FROM runs
)
SELECT run_id, name, input_sha1, derive_sha1 FROM tagged
WHERE input_sha1 IN (SELECT unnest($input_sha1s)) OR derive_sha1 IN (SELECT unnest($derive_sha1s))
QUALIFY row_number() OVER (PARTITION BY input_sha1, derive_sha1 ORDER BY run_id DESC) = 1
ORDER BY run_id;

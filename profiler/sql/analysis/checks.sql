-- @module analysis.checks
-- What the run recorded about its own health: the SparseCore debug checks and the quantization of embedding lookups
-- (analyzers/rules/debug_checks.py) and the failures recorded with a failed run (analyzers/rules/failures.py), with the
-- evidence their findings show.

-- @query checks_by_step
-- What the SparseCore debug checks and the quantization of embedding lookups reported, one row per step, table and
-- check. The emulator writes one zero-length event per step and table on the host (docs/emulator.md "Quantization
-- and debug checks"): id_bound_check (category debug_check; flags.xla_sparse_core_enable_id_bound_check): ids
-- checked, oov_ids outside [0, vocab), vocab; nan_check (category debug_check; flags.xla_sc_detect_nan): samples,
-- nan_samples whose values are NaN, nan_values; quantization (category quantization; int8 or range-quantized
-- tables): values looked up, clipped_values outside [low, high], rms_error. A check that was off wrote nothing, so
-- an absent check is not a clean one.
-- @param run INTEGER The run (runs.run_id).
-- @column check_name VARCHAR id_bound_check, nan_check or quantization.
-- @column table_name VARCHAR The embedding table.
-- @column step INTEGER Training step.
-- @column ids BIGINT IDs checked (events.ids).
-- @column oov_ids BIGINT IDs outside [0, vocab).
-- @column vocab BIGINT Vocabulary size.
-- @column samples BIGINT Samples checked for NaNs.
-- @column nan_samples BIGINT Samples whose values are NaN.
-- @column nan_values BIGINT NaN values.
-- @column values BIGINT Values looked up (quantized tables).
-- @column clipped_values BIGINT Values outside [low, high], clipped.
-- @column rms_error DOUBLE RMS quantization error.
-- @column quantization_config_low DOUBLE Quantization range low.
-- @column quantization_config_high DOUBLE Quantization range high.
-- @column quantization_config_num_buckets BIGINT Quantization buckets.
WITH ev AS (
    SELECT e.event_id, e.step, n.value AS check_name, tb.value AS table_name, e.ids
    FROM events e
    JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
    JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
    LEFT JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
    WHERE e.run_id = $run AND c.value IN ('debug_check', 'quantization')
),
args AS (
    SELECT a.event_id,
           max(a.int_value) FILTER (WHERE a.key = 'oov_ids') AS oov_ids,
           max(a.int_value) FILTER (WHERE a.key = 'vocab') AS vocab,
           max(a.int_value) FILTER (WHERE a.key = 'samples') AS samples,
           max(a.int_value) FILTER (WHERE a.key = 'nan_samples') AS nan_samples,
           max(a.int_value) FILTER (WHERE a.key = 'nan_values') AS nan_values,
           max(a.int_value) FILTER (WHERE a.key = 'values') AS "values",
           max(a.int_value) FILTER (WHERE a.key = 'clipped_values') AS clipped_values,
           max(a.double_value) FILTER (WHERE a.key = 'rms_error') AS rms_error,
           max(a.double_value) FILTER (WHERE a.key = 'quantization_config_low') AS quantization_config_low,
           max(a.double_value) FILTER (WHERE a.key = 'quantization_config_high') AS quantization_config_high,
           max(a.int_value) FILTER (WHERE a.key = 'quantization_config_num_buckets') AS quantization_config_num_buckets
    FROM event_args a
    WHERE a.run_id = $run AND a.event_id IN (SELECT event_id FROM ev)
    GROUP BY a.event_id
)
SELECT ev.check_name, ev.table_name, ev.step, ev.ids, args.* EXCLUDE (event_id)
FROM ev LEFT JOIN args USING (event_id)
ORDER BY ev.check_name, ev.table_name, ev.step;

-- @query check_totals
-- checks_by_step summed per check and table: steps checked and flagged (and which), IDs, NaNs and clipped values,
-- the RMS quantization error over all values and the quantization range.
-- @input checks(check_name VARCHAR, table_name VARCHAR, step INTEGER, ids BIGINT, oov_ids BIGINT, vocab BIGINT, samples BIGINT, nan_samples BIGINT, nan_values BIGINT, "values" BIGINT, clipped_values BIGINT, rms_error DOUBLE, quantization_config_low DOUBLE, quantization_config_high DOUBLE, quantization_config_num_buckets BIGINT) The rows of checks_by_step.
-- @column check_name VARCHAR The check.
-- @column table_name VARCHAR The embedding table.
-- @column steps_checked BIGINT Steps checked.
-- @column steps_flagged BIGINT Steps with OOV IDs, NaNs or clipped values.
-- @column flagged_steps INTEGER[] Those steps, in order.
-- @column ids BIGINT IDs checked.
-- @column oov_ids BIGINT IDs outside [0, vocab).
-- @column vocab BIGINT Vocabulary size.
-- @column samples BIGINT Samples checked for NaNs.
-- @column nan_samples BIGINT Samples whose values are NaN.
-- @column nan_values BIGINT NaN values.
-- @column values BIGINT Values looked up.
-- @column clipped_values BIGINT Values clipped.
-- @column rms_error DOUBLE RMS quantization error over all values.
-- @column quantization_config_low DOUBLE Quantization range low.
-- @column quantization_config_high DOUBLE Quantization range high.
-- @column quantization_config_num_buckets BIGINT Quantization buckets.
SELECT check_name, table_name, count(*) AS steps_checked,
       count(*) FILTER (WHERE coalesce(oov_ids, 0) + coalesce(nan_values, 0) + coalesce(clipped_values, 0) > 0)
           AS steps_flagged,
       list(step ORDER BY step) FILTER (WHERE coalesce(oov_ids, 0) + coalesce(nan_values, 0)
           + coalesce(clipped_values, 0) > 0) AS flagged_steps,
       sum(ids)::BIGINT AS ids, sum(oov_ids)::BIGINT AS oov_ids, max(vocab) AS vocab,
       sum(samples)::BIGINT AS samples, sum(nan_samples)::BIGINT AS nan_samples,
       sum(nan_values)::BIGINT AS nan_values, sum("values")::BIGINT AS "values",
       sum(clipped_values)::BIGINT AS clipped_values,
       sqrt(sum(rms_error * rms_error * "values") / nullif(sum("values"), 0)) AS rms_error,
       min(quantization_config_low) AS quantization_config_low,
       max(quantization_config_high) AS quantization_config_high,
       max(quantization_config_num_buckets) AS quantization_config_num_buckets
FROM checks GROUP BY ALL ORDER BY check_name, table_name;

-- @query oov_evidence
-- The evidence of the out-of-vocabulary finding (shown, not run): a table's id_bound_check events with their
-- arguments.
-- @param run INTEGER The run (runs.run_id).
-- @param table_name VARCHAR The embedding table.
SELECT e.step, e.ids, a.key, a.int_value, a.double_value FROM events e JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id JOIN strings t ON t.run_id = e.run_id AND t.string_id = e.table_id JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id WHERE e.run_id = $run AND n.value = 'id_bound_check' AND t.value = $table_name AND a.key IN ('oov_ids', 'vocab') ORDER BY e.step, a.key;

-- @query nan_evidence
-- The evidence of the NaN finding (shown, not run): a table's nan_check events with their arguments.
-- @param run INTEGER The run (runs.run_id).
-- @param table_name VARCHAR The embedding table.
SELECT e.step, e.ids, a.key, a.int_value, a.double_value FROM events e JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id JOIN strings t ON t.run_id = e.run_id AND t.string_id = e.table_id JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id WHERE e.run_id = $run AND n.value = 'nan_check' AND t.value = $table_name AND a.key IN ('nan_samples', 'nan_values', 'samples') ORDER BY e.step, a.key;

-- @query clipping_evidence
-- The evidence of the clipping finding (shown, not run): a table's quantization events with their arguments.
-- @param run INTEGER The run (runs.run_id).
-- @param table_name VARCHAR The embedding table.
SELECT e.step, e.ids, a.key, a.int_value, a.double_value FROM events e JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id JOIN strings t ON t.run_id = e.run_id AND t.string_id = e.table_id JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id WHERE e.run_id = $run AND n.value = 'quantization' AND t.value = $table_name AND a.key IN ('clipped_values', 'values', 'rms_error') ORDER BY e.step, a.key;

-- @query enabled_evidence
-- The evidence of the debug_checks_enabled finding (shown, not run): debug-check events per check.
-- @param run INTEGER The run (runs.run_id).

-- debug-check events per check
SELECT n.value AS check_name, count(*) AS events FROM events e JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id WHERE e.run_id = $run AND c.value = 'debug_check' GROUP BY ALL;

-- @query failures
-- Compile errors and out-of-memory failures recorded with the run, as events of category 'failure' (the emulator
-- writes one on the host's Failures line; its `message` argument holds the error as the compiler or runtime words
-- it, its bytes what was asked for and its `capacity_bytes` argument what there was room for).
-- @param run INTEGER The run (runs.run_id).
-- @column event_id BIGINT events.event_id.
-- @column kind VARCHAR The failure (the event's name: spmem_overflow, hbm_oom, ...).
-- @column start_ps BIGINT When it happened.
-- @column message VARCHAR The error's message.
-- @column requested_bytes BIGINT Bytes asked for; NULL if not recorded.
-- @column capacity_bytes BIGINT Bytes there was room for; NULL if not recorded.
SELECT e.event_id, n.value AS kind, e.start_ps, a.string_value AS message,
       nullif(e.bytes, 0) AS requested_bytes, nullif(cap.int_value, 0) AS capacity_bytes
FROM events e
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
LEFT JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id AND a.key = 'message'
LEFT JOIN event_args cap ON cap.run_id = e.run_id AND cap.event_id = e.event_id AND cap.key = 'capacity_bytes'
WHERE e.run_id = $run AND c.value = 'failure'
ORDER BY e.start_ps;

-- @query failure_evidence
-- The evidence of a failure finding (shown, not run): the failure event's arguments.
-- @param run INTEGER The run (runs.run_id).
-- @param event_id BIGINT The failure event.

-- the failure event and its message
SELECT * FROM event_args WHERE run_id = $run AND event_id = $event_id;

-- debug_checks: what the SparseCore debug checks and the quantization of embedding
-- lookups reported, one row per step, table and check. The emulator writes one
-- zero-length event per step and table on the host (docs/emulator.md "Quantization
-- and debug checks"):
--   id_bound_check  (category debug_check; flags.xla_sparse_core_enable_id_bound_check)
--                   ids checked, oov_ids outside [0, vocab), vocab
--   nan_check       (category debug_check; flags.xla_sc_detect_nan)
--                   samples, nan_samples whose values are NaN, nan_values
--   quantization    (category quantization; int8 or range-quantized tables)
--                   values looked up, clipped_values outside [low, high], rms_error
-- A check that was off wrote nothing, so an absent check is not a clean one.
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
ORDER BY ev.check_name, ev.table_name, ev.step

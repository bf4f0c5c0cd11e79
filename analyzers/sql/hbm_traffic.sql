-- hbm_traffic: per chip and step, the HBM bytes the device's compute ops record moving
-- (SparseCore lookups and updates, TensorCore passes, other devices' compute: op_events of
-- the compute categories with a `bytes` value). Collectives cross ICI and host transfers the
-- host link, so neither counts.
SELECT chip, step, sum(bytes)::BIGINT AS hbm_bytes
FROM {op_events}
WHERE chip >= 0 AND step IS NOT NULL AND bytes IS NOT NULL
  AND category IN ('sc_forward', 'sc_backward', 'sc_other', 'tc_forward', 'tc_backward', 'tc_other', 'device_compute')
GROUP BY chip, step
ORDER BY chip, step

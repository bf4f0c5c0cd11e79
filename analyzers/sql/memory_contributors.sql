-- memory_contributors: what HBM holds on chip $chip at time $ts (the combined peak):
-- every HBM counter in bytes ('HBM heap', its contributors 'HBM heap: <name>', 'HBM
-- stack'), with its value held at $ts, its first value (before any step: the static
-- part; 0 for a counter that starts later) and its growth since (value at $ts minus it).
WITH s AS (
    SELECT counter, ts_ps, value
    FROM counter_samples
    WHERE run_id = $run AND chip = $chip AND unit = 'bytes' AND counter LIKE 'HBM %'
)
SELECT counter,
       CASE WHEN counter LIKE 'HBM heap: %' THEN substr(counter, 11) END AS contributor,
       arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts) AS bytes_at_peak,
       first_bytes,
       coalesce(arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts), 0) - first_bytes AS growth_bytes
FROM (
    -- a counter whose first sample comes after the chip's first HBM sample held 0 before it
    SELECT *, CASE WHEN min(ts_ps) OVER (PARTITION BY counter) > min(ts_ps) OVER () THEN 0
                   ELSE first_value(value) OVER (PARTITION BY counter ORDER BY ts_ps) END AS first_bytes
    FROM s
)
GROUP BY counter, first_bytes
ORDER BY bytes_at_peak DESC NULLS LAST, counter

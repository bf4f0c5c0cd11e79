-- run_list: the runs listing (`scprof runs` and the UI's Runs page): one row per run with
-- its hardware (TPU generation, else the kind of device, x chips), steps (the steps step_times
-- times: what analyze, compare and the UI summarise), events, span, mean step time over its
-- counted steps (step_times), status and failure.
SELECT r.run_id, r.name, r.source, r.status,
       coalesce(r.generation, d.device, '?') || ' x' || coalesce(CAST(r.num_chips AS VARCHAR), '?') AS hardware,
       r.generation, r.num_chips, coalesce(m.steps, 0) AS steps, r.events, m.counted_steps, m.mean_step_ps,
       r.last_ps - r.first_ps AS span_ps,
       strftime(r.ingested_at, '%Y-%m-%d %H:%M') AS ingested, CAST(r.tags AS VARCHAR) AS tags,
       coalesce(json_extract_string(r.tags, '$.failure'), json_extract_string(r.tags, '$.error')) AS failure
FROM runs r
LEFT JOIN (  -- a real capture's devices where no TPU generation is known: GPU, CPU (running XLA ops), device
    SELECT run_id, CASE WHEN bool_or(kind = 'gpu') THEN 'GPU' WHEN bool_or(kind = 'cpu') THEN 'CPU'
                        WHEN bool_or(kind = 'device') THEN 'device' END AS device
    FROM tracks GROUP BY run_id
) d USING (run_id)
LEFT JOIN (
    SELECT run_id, count(*) AS steps, count(*) FILTER (WHERE counted) AS counted_steps,
           avg(dur_ps) FILTER (WHERE counted) AS mean_step_ps
    FROM step_times GROUP BY run_id
) m USING (run_id)

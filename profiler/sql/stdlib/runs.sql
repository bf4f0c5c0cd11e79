-- @module stdlib.runs
-- The runs listing: what `scprof runs` prints and the UI's Runs page shows.
-- @include stdlib.steps

-- @view run_list
-- The runs listing (`scprof runs`, the UI's Runs page): hardware, steps, events, span, mean step time over counted
-- steps, status and failure.
-- @column run_id INTEGER runs.run_id.
-- @column name VARCHAR runs.name.
-- @column source VARCHAR runs.source.
-- @column status VARCHAR runs.status.
-- @column hardware VARCHAR '<generation> x<chips>', '?' where unknown.
-- @column generation VARCHAR runs.generation.
-- @column num_chips INTEGER runs.num_chips.
-- @column steps BIGINT Steps with a step time (step_times rows); 0 for a run without steps.
-- @column events BIGINT runs.events.
-- @column counted_steps BIGINT Steps step_times counts; NULL for a run without steps.
-- @column mean_step_ps DOUBLE Mean step time over the counted steps; NULL without steps.
-- @column span_ps BIGINT last_ps - first_ps.
-- @column ingested VARCHAR When it was ingested (YYYY-MM-DD HH:MM).
-- @column tags VARCHAR runs.tags as JSON text.
-- @column failure VARCHAR The failure the producer recorded in the tags (failure or error); NULL if none.
-- @column whatif_origin VARCHAR For a what-if trial (verify, attribute, tune), the run it was simulated from; else NULL.
CREATE VIEW run_list AS
-- run_list: the runs listing (`scprof runs` and the UI's Runs page): one row per run with
-- its hardware (TPU generation, else the kind of device, x chips), steps (the steps step_times
-- times: what analyze, compare and the UI summarise), events, span, mean step time over its
-- counted steps (step_times), status and failure, and for a what-if trial the run it was simulated from.
SELECT r.run_id, r.name, r.source, r.status,
       coalesce(r.generation, d.device, '?') || ' x' || coalesce(CAST(r.num_chips AS VARCHAR), '?') AS hardware,
       r.generation, r.num_chips, coalesce(m.steps, 0) AS steps, r.events, m.counted_steps, m.mean_step_ps,
       r.last_ps - r.first_ps AS span_ps,
       strftime(r.ingested_at, '%Y-%m-%d %H:%M') AS ingested, CAST(r.tags AS VARCHAR) AS tags,
       coalesce(json_extract_string(r.tags, '$.failure'), json_extract_string(r.tags, '$.error')) AS failure,
       json_extract_string(r.tags, '$.whatif_origin') AS whatif_origin
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
) m USING (run_id);

-- @query runs_oldest_first
-- The runs listing, oldest first: what `scprof runs` prints and the UI's Runs page shows.
SELECT * FROM run_list ORDER BY run_id;

-- @query runs_listed
-- The runs listing as `scprof runs` and the UI's Runs page show it, oldest first: what-if trials only when asked.
-- @param trials BOOLEAN Whether to list the what-if trials too.
SELECT * FROM run_list WHERE $trials OR whatif_origin IS NULL ORDER BY run_id;

-- @query trials_count
-- How many what-if trials the store holds (what `scprof runs` and the Runs page leave out by default).
-- @column trials BIGINT The number of runs with a whatif_origin tag.
SELECT count(*) AS trials FROM run_list WHERE whatif_origin IS NOT NULL;

-- @module analysis.async
-- Async work as async (analyzers/rules/async_overlap.py): how much of each async op's window the core's compute hides
-- and how much is exposed, from the store's async_spans view. A window is hidden when compute covers at least 90%
-- of it, exposed at 10% or less, partial between (XProf's analyze_async_overlap thresholds).
-- @include stdlib.ops

-- @query has_async_ops
-- Whether the run has an `Async XLA Ops` line or an op named like an async start or done (else async_spans is
-- empty and its compute islands are not worth building).
-- @param run INTEGER The run (runs.run_id).
-- @column has BOOLEAN Whether it has.
SELECT EXISTS (SELECT 1 FROM tracks WHERE run_id = $run AND line = 'Async XLA Ops')
       OR EXISTS (SELECT 1 FROM strings WHERE run_id = $run
                  AND regexp_matches(value, '^.+-(start|done)(\.[0-9]+)?$')) AS has;

-- @query async_total
-- The run's async windows: how many, their time and exposed time, and how many are hidden, partial or exposed.
-- @param run INTEGER The run (runs.run_id).
-- @column count BIGINT Windows.
-- @column span_ps BIGINT Their time.
-- @column exposed_ps BIGINT Their time no compute covers.
-- @column hidden BIGINT Windows compute covers at least 90% of.
-- @column partial BIGINT Windows compute covers more than 10% and less than 90% of.
-- @column exposed BIGINT Windows compute covers 10% or less of.
SELECT count(*) AS count, sum(dur_ps)::BIGINT AS span_ps, sum(exposed_ps)::BIGINT AS exposed_ps,
       count(*) FILTER (WHERE hidden_ps >= 0.9 * dur_ps) AS hidden,
       count(*) FILTER (WHERE hidden_ps > 0.1 * dur_ps AND hidden_ps < 0.9 * dur_ps) AS partial,
       count(*) FILTER (WHERE hidden_ps <= 0.1 * dur_ps) AS exposed
FROM async_spans WHERE run_id = $run;

-- @query async_by_plane
-- async_total per plane and source, by plane.
-- @param run INTEGER The run (runs.run_id).
-- @column plane VARCHAR The plane.
-- @column source VARCHAR Where the window comes from (async_spans.source).
-- @column count BIGINT Windows.
-- @column span_ps BIGINT Their time.
-- @column exposed_ps BIGINT Their time no compute covers.
-- @column hidden BIGINT Windows compute covers at least 90% of.
-- @column partial BIGINT Windows compute covers more than 10% and less than 90% of.
-- @column exposed BIGINT Windows compute covers 10% or less of.
SELECT plane, source, count(*) AS count, sum(dur_ps)::BIGINT AS span_ps, sum(exposed_ps)::BIGINT AS exposed_ps,
       count(*) FILTER (WHERE hidden_ps >= 0.9 * dur_ps) AS hidden,
       count(*) FILTER (WHERE hidden_ps > 0.1 * dur_ps AND hidden_ps < 0.9 * dur_ps) AS partial,
       count(*) FILTER (WHERE hidden_ps <= 0.1 * dur_ps) AS exposed
FROM async_spans WHERE run_id = $run GROUP BY ALL ORDER BY plane;

-- @query async_by_op
-- async_total per op, the most exposed first.
-- @param run INTEGER The run (runs.run_id).
-- @column op VARCHAR The async op (async_spans.op).
-- @column count BIGINT Windows.
-- @column span_ps BIGINT Their time.
-- @column exposed_ps BIGINT Their time no compute covers.
-- @column hidden BIGINT Windows compute covers at least 90% of.
-- @column partial BIGINT Windows compute covers more than 10% and less than 90% of.
-- @column exposed BIGINT Windows compute covers 10% or less of.
SELECT op, count(*) AS count, sum(dur_ps)::BIGINT AS span_ps, sum(exposed_ps)::BIGINT AS exposed_ps,
       count(*) FILTER (WHERE hidden_ps >= 0.9 * dur_ps) AS hidden,
       count(*) FILTER (WHERE hidden_ps > 0.1 * dur_ps AND hidden_ps < 0.9 * dur_ps) AS partial,
       count(*) FILTER (WHERE hidden_ps <= 0.1 * dur_ps) AS exposed
FROM async_spans WHERE run_id = $run GROUP BY ALL ORDER BY exposed_ps DESC;

-- @query top_exposed
-- The most exposed async windows.
-- @param run INTEGER The run (runs.run_id).
-- @param top BIGINT How many.
-- @column plane VARCHAR The plane.
-- @column name VARCHAR The op's name.
-- @column op VARCHAR The async op.
-- @column source VARCHAR Where the window comes from.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
-- @column exposed_ps BIGINT Time no compute covers.
SELECT plane, name, op, source, start_ps, dur_ps, exposed_ps FROM async_spans WHERE run_id = $run
ORDER BY exposed_ps DESC, start_ps LIMIT $top;

-- @query exposed_evidence
-- The evidence of the exposed_async finding (shown, not run).
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM async_spans WHERE run_id = $run ORDER BY exposed_ps DESC;

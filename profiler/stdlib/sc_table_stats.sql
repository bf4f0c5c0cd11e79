-- sc_table_stats: per run and embedding table, the SparseCore work on it: ops (events on
-- SparseCore tracks naming the table), the distinct steps they ran in, their time and
-- the IDs they processed.
SELECT e.run_id, tb.value AS table_name, count(*) AS ops, count(DISTINCT e.step) AS steps,
       sum(e.dur_ps)::BIGINT AS total_ps, sum(e.ids)::BIGINT AS ids
FROM events e
JOIN tracks t USING (run_id, track_id)
JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
WHERE t.kind = 'sparsecore'
GROUP BY ALL

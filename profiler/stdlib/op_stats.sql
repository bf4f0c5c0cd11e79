-- op_stats: the top ops: per run, kind of core and op name, how often it ran and how long
-- (the events of op_tracks). Names whose events all take no time (table layout,
-- debug-check and other marker events) are not ops and are left out. steps counts the
-- distinct steps the op ran in (NULL-step events count as one more). The ops of a run
-- ranked: ORDER BY total_ps DESC. A nested op's total includes its children's time;
-- op_self_times gives each op event's own.
SELECT e.run_id, t.track_kind, n.value AS name, count(*) AS events, count(DISTINCT e.step) AS steps,
       sum(e.dur_ps)::BIGINT AS total_ps
FROM events e
JOIN op_tracks t USING (run_id, track_id)
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
GROUP BY ALL
HAVING sum(e.dur_ps) > 0

-- op_profile: per kind of track, op name and category: events, total and self time, the
-- share of the kind's self time (device work, host_to_device copies included, and host work apart:
-- a CPU device's threads run both), and the FLOPs and bytes the events record (NULL when none
-- does); host_work: the row is the host's work (a host_* category other than host_to_device),
-- which `scprof analyze` leaves out of its top device ops. {rows}: every op event (op_arrays) with its self time (analyzers/op_profile.py).
-- Device work first, then by self time.
WITH per_op AS (
    SELECT track_id, name_id, category_id, count(*) AS events, sum(dur_ps) AS total_ps, sum(self_ps) AS self_ps
    FROM {rows}
    GROUP BY ALL
),
work AS (  -- the FLOPs and bytes events record (typed columns)
    SELECT track_id, name_id, coalesce(category_id, -1) AS category_id, sum(flops) AS flops, sum(bytes) AS bytes
    FROM events
    WHERE run_id = $run AND (flops IS NOT NULL OR bytes IS NOT NULL)
    GROUP BY ALL
),
named AS (
    SELECT t.track_kind, n.value AS name, coalesce(c.value, t.default_category) AS category,
           sum(p.events)::BIGINT AS events, sum(p.total_ps)::BIGINT AS total_ps, sum(p.self_ps)::BIGINT AS self_ps,
           sum(w.flops)::BIGINT AS flops, sum(w.bytes)::BIGINT AS bytes
    FROM per_op p
    JOIN {op_tracks} t ON t.track_id = p.track_id
    JOIN strings n ON n.run_id = $run AND n.string_id = p.name_id
    LEFT JOIN strings c ON c.run_id = $run AND c.string_id = p.category_id
    LEFT JOIN work w ON w.track_id = p.track_id AND w.name_id = p.name_id AND w.category_id = p.category_id
    GROUP BY ALL
)
SELECT track_kind, name, category, host_work, events, total_ps, self_ps,
       coalesce(self_ps / nullif(sum(self_ps) OVER (PARTITION BY track_kind, host_work), 0), 0) AS share, flops, bytes
FROM (SELECT *, category LIKE 'host%' AND category <> 'host_to_device' AS host_work FROM named)
WHERE total_ps > 0
ORDER BY track_kind NOT IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device') OR host_work, self_ps DESC,
         track_kind, name, category

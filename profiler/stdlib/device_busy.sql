-- device_busy: when each device core is busy: the union of its ops' intervals, as disjoint
-- intervals (islands), in two sets.
--   ops      every op (op_tracks, dur_ps > 0) on a device chip (TensorCore, SparseCore, GPU,
--            a CPU running XLA ops, another device) but the host work on a CPU device's threads
--            (host_* categories): what keeps the core from idling. An async op's done
--            (`copy-done`, `all-reduce-done`) counts: the core waits in it (XProf's op time).
--   compute  the same less the async ops' ends (`<op>-start`, `<op>-done`, with a `.N`
--            suffix or none): what an async window can hide behind (async_spans); built
--            only for runs with such ops (elsewhere it would repeat 'ops').
-- A device core is (chip, core, track_kind): a TensorCore, each SparseCore, a GPU (all its
-- streams), a host's CPU device (all its XLA threads).
-- Islands as gaps-and-islands build them: ops by (start, end); a new island starts where an
-- op starts after every earlier op of the core ended.
WITH names AS (  -- per distinct name, not per event: whether it is an async op's start or done
    SELECT run_id, string_id, regexp_matches(value, '^.+-(start|done)(\.[0-9]+)?$') AS async_end FROM strings
),
host_work AS (SELECT run_id, string_id FROM strings WHERE starts_with(value, 'host_')),
ops AS (
    SELECT e.run_id, t.chip, t.core, t.track_kind, n.async_end, e.start_ps, e.start_ps + e.dur_ps AS end_ps
    FROM events e
    JOIN op_tracks t USING (run_id, track_id)
    JOIN names n ON n.run_id = e.run_id AND n.string_id = e.name_id
    WHERE t.chip >= 0 AND t.track_kind IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device') AND e.dur_ps > 0
      AND NOT starts_with(t.default_category, 'host_')
      AND NOT EXISTS (SELECT 1 FROM host_work h WHERE h.run_id = e.run_id AND h.string_id = e.category_id)
),
sets AS (
    SELECT run_id, chip, core, track_kind, 'ops' AS busy_set, start_ps, end_ps FROM ops
    UNION ALL
    SELECT run_id, chip, core, track_kind, 'compute' AS busy_set, start_ps, end_ps FROM ops
    WHERE NOT async_end AND run_id IN (SELECT run_id FROM ops WHERE async_end)  -- only where async ops ran
),
marked AS (
    SELECT *, max(end_ps) OVER (PARTITION BY run_id, chip, core, track_kind, busy_set ORDER BY start_ps, end_ps
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_ps
    FROM sets
),
numbered AS (
    SELECT *, sum(CASE WHEN before_ps IS NULL OR start_ps > before_ps THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, chip, core, track_kind, busy_set ORDER BY start_ps, end_ps
                        ROWS UNBOUNDED PRECEDING) AS island
    FROM marked
)
SELECT run_id, chip, core, track_kind, busy_set, min(start_ps) AS start_ps, max(end_ps) AS end_ps
FROM numbered
GROUP BY run_id, chip, core, track_kind, busy_set, island

-- idle_gaps: gaps between consecutive ops on each device track (TensorCore and
-- SparseCore op lines) inside the run's steps, longer than $min_gap_ps, each with
-- the event that ended last before the gap closed on the same chip or the host
-- (the likely blocker, as HTA attributes idle time) and the cause that implies:
--   host        input-bound: on a SparseCore, the input of the next step it would
--               start was not yet in HBM when the gap began (so it could not run
--               ahead); elsewhere, the blocker is host work (preprocessing, transfer)
--   other_core  the blocker ran on the other kind of core (TC waits for SC or back): not pipelined
--   collective  the blocker is a collective (all-to-all, all-reduce)
--   same_core   the blocker ran on another core of the same kind
--   other       nothing ended inside the gap
WITH dev AS (
    SELECT track_id, chip, core, track_kind, step, start_ps, end_ps,
           lag(end_ps) OVER (PARTITION BY track_id ORDER BY start_ps, end_ps) AS prev_end,
           lag(step) OVER (PARTITION BY track_id ORDER BY start_ps, end_ps) AS prev_step
    FROM {op_events}
    WHERE track_kind IN ('tensorcore', 'sparsecore') AND line IN ('XLA Ops', 'Sparse Core Ops')
),
gaps AS (
    SELECT track_id, chip, core, track_kind, coalesce(step, prev_step) AS step,
           prev_end AS gap_start_ps, start_ps AS gap_end_ps, start_ps - prev_end AS gap_ps
    FROM dev
    WHERE prev_end IS NOT NULL AND start_ps - prev_end >= $min_gap_ps
),
inputs AS (  -- when each chip's input of a step was in HBM: its last host->device transfer
    SELECT chip, step, max(end_ps) AS ready_ps FROM {op_events} WHERE category = 'host_to_device' GROUP BY ALL
),
sc_fwd AS (SELECT track_id, start_ps, step FROM {op_events} WHERE category = 'sc_forward'),
starved AS (  -- SparseCore gaps: was the input of the next forward step on this core missing?
    SELECT g.*, coalesce(i.ready_ps > g.gap_start_ps, false) AS input_missing
    FROM gaps g
    ASOF LEFT JOIN sc_fwd f ON f.track_id = g.track_id AND f.start_ps >= g.gap_start_ps
    LEFT JOIN inputs i ON i.chip = g.chip AND i.step = f.step
),
enders AS (
    SELECT chip, end_ps, category, track_kind AS blocker_kind, name FROM {op_events} WHERE dur_ps > 0
),
on_chip AS (
    SELECT g.*, b.end_ps AS b_end, b.category AS b_cat, b.blocker_kind AS b_kind, b.name AS b_name
    FROM starved g ASOF LEFT JOIN enders b ON b.chip = g.chip AND b.end_ps <= g.gap_end_ps
),
blocked AS (
    -- the later of the chip's and the host's last end, if it falls inside the gap
    SELECT c.*,
           CASE WHEN h.end_ps > coalesce(c.b_end, -1) THEN h.end_ps ELSE c.b_end END AS blocker_end_ps,
           CASE WHEN h.end_ps > coalesce(c.b_end, -1) THEN h.category ELSE c.b_cat END AS blocker_category,
           CASE WHEN h.end_ps > coalesce(c.b_end, -1) THEN h.name ELSE c.b_name END AS blocker_name,
           CASE WHEN h.end_ps > coalesce(c.b_end, -1) THEN 'host' ELSE c.b_kind END AS blocker_kind
    FROM on_chip c ASOF LEFT JOIN (SELECT * FROM enders WHERE chip < 0) h ON h.end_ps <= c.gap_end_ps
)
SELECT track_id, chip, core, track_kind, step, gap_start_ps, gap_end_ps, gap_ps,
       CASE WHEN blocker_end_ps > gap_start_ps THEN blocker_name END AS blocker_name,
       CASE WHEN blocker_end_ps > gap_start_ps THEN blocker_category END AS blocker_category,
       CASE WHEN track_kind = 'sparsecore' AND input_missing THEN 'host'
            WHEN blocker_end_ps IS NULL OR blocker_end_ps <= gap_start_ps THEN 'other'
            WHEN blocker_kind = 'host' OR blocker_category LIKE 'host%' THEN 'host'
            WHEN blocker_category LIKE '%collective' THEN 'collective'
            WHEN blocker_kind <> track_kind THEN 'other_core'
            ELSE 'same_core' END AS cause
FROM blocked
ORDER BY gap_start_ps, track_id

-- idle_gaps: gaps between consecutive ops on each device track (TensorCore and
-- SparseCore op lines) longer than $min_gap_ps, each with the event that ended
-- last before the gap closed on the same chip or the host (the likely blocker,
-- as HTA attributes idle time) and the cause that implies:
--   host        input-bound. On a SparseCore: the input of the next step it would
--               start was not yet in HBM when the gap began, so it could not run
--               ahead. On a TensorCore: the blocker is host work, or SparseCore work
--               of a step the input held back (see input_bound_steps).
--   other_core  the blocker ran on the other kind of core (TC waits for SC or back)
--   collective  the blocker is a collective (all-to-all, all-reduce)
--   same_core   the blocker ran on another core of the same kind
--   other       nothing ended inside the gap
WITH dev AS (  -- every device op with the end of the op before it on its track (ids only: a narrow sort)
    SELECT track_id, step, start_ps, end_ps,
           lag(end_ps) OVER w AS prev_end, lag(step) OVER w AS prev_step
    FROM {op_base}
    WHERE track_kind IN ('tensorcore', 'sparsecore') AND line IN ('XLA Ops', 'Sparse Core Ops')
    WINDOW w AS (PARTITION BY track_id ORDER BY start_ps, end_ps)
),
gaps AS (
    SELECT d.track_id, t.chip, t.core, t.kind AS track_kind, coalesce(d.step, d.prev_step) AS step,
           d.prev_end AS gap_start_ps, d.start_ps AS gap_end_ps, d.start_ps - d.prev_end AS gap_ps
    FROM dev d JOIN tracks t ON t.run_id = $run AND t.track_id = d.track_id
    WHERE d.prev_end IS NOT NULL AND d.start_ps - d.prev_end >= $min_gap_ps
),
inputs AS (  -- when a step's input was in HBM: its last host->device transfer on any chip
             -- (a step's SparseCore programs run on every chip together)
    SELECT step, max(end_ps) AS ready_ps FROM {op_base}
    WHERE category_id IN (SELECT string_id FROM strings WHERE run_id = $run AND value = 'host_to_device')
    GROUP BY step
),
sc_fwd AS (
    SELECT track_id, chip, start_ps, step FROM {op_base}
    WHERE category_id IN (SELECT string_id FROM strings WHERE run_id = $run AND value = 'sc_forward')
),
starved AS (  -- SparseCore gaps: was the input of the next forward step on this core still missing?
    SELECT g.*, f.step AS next_fwd_step, i.ready_ps AS next_ready_ps,
           coalesce(i.ready_ps > g.gap_start_ps, false) AS input_missing
    FROM gaps g
    ASOF LEFT JOIN sc_fwd f ON f.track_id = g.track_id AND f.start_ps >= g.gap_start_ps
    LEFT JOIN inputs i ON i.step = f.step
),
input_bound_steps AS (
    -- (chip, step) whose SparseCore work the input held back, and how long a SparseCore of
    -- the chip sat idle for want of it (wasted_ps): its first forward op started the moment
    -- the input landed (within $tol_ps), or a SparseCore idled through a whole gap that
    -- ended before the input landed (its chance to run ahead was lost)
    SELECT w.chip, w.step, w.wasted_ps
    FROM (SELECT chip, next_fwd_step AS step, max(least(gap_end_ps, next_ready_ps) - gap_start_ps) AS wasted_ps,
                 bool_or(gap_end_ps <= next_ready_ps) AS whole_gap
          FROM starved WHERE track_kind = 'sparsecore' AND input_missing GROUP BY ALL) w
    LEFT JOIN (SELECT chip, step, min(start_ps) AS first_ps FROM sc_fwd GROUP BY ALL) f USING (chip, step)
    LEFT JOIN inputs i USING (step)
    WHERE w.whole_gap OR f.first_ps - i.ready_ps BETWEEN 0 AND $tol_ps
),
enders AS (  -- work that can close a gap (host work counts on every chip); ck: chip and step as one key
    SELECT event_id, chip, end_ps, track_kind AS blocker_kind, step,
           chip::BIGINT * 4294967296 + coalesce(step, -1) AS ck
    FROM {op_base} WHERE dur_ps > 0 AND chip >= 0
    UNION ALL
    SELECT e.event_id, c.chip, e.end_ps, e.track_kind, e.step,
           c.chip::BIGINT * 4294967296 + coalesce(e.step, -1)
    FROM {op_base} e, (SELECT DISTINCT chip FROM {op_base} WHERE chip >= 0) c
    WHERE e.dur_ps > 0 AND e.chip < 0
),
ends AS (SELECT ck, end_ps, event_id FROM enders),  -- narrow rows keep the ASOF joins' sorts cheap
probes AS (
    -- each gap looks for blockers among work of its step (off 0) and of the step before (off 1):
    -- two probe rows per gap, so one ASOF join (one sort of `ends`) serves both
    SELECT g.track_id, g.gap_start_ps, g.gap_end_ps, o.off,
           g.chip::BIGINT * 4294967296 + CASE o.off WHEN 0 THEN coalesce(g.step, -1) ELSE coalesce(g.step, 0) - 1 END AS ck
    FROM starved g CROSS JOIN (VALUES (0), (1)) o(off)
),
hits AS (
    -- the last event on the chip or the host to end inside the gap, among work of the gap's
    -- step or the one before (later steps' work, e.g. preprocessing ahead, blocks nothing);
    -- on a tie the gap's own step wins
    SELECT p.track_id, p.gap_start_ps, max_by(a.event_id, a.end_ps * 2 + (1 - p.off)) AS blocker_event,
           max(a.end_ps) AS blocker_end_ps
    FROM probes p ASOF JOIN ends a ON a.ck = p.ck AND a.end_ps <= p.gap_end_ps
    WHERE a.end_ps > p.gap_start_ps
    GROUP BY ALL
),
candidates AS (
    SELECT g.*, h.blocker_event, h.blocker_end_ps
    FROM starved g LEFT JOIN hits h USING (track_id, gap_start_ps)
),
blocked AS (
    SELECT c.*, e.category AS blocker_category, e.name AS blocker_name, e.track_kind AS blocker_kind,
           e.step AS blocker_step
    FROM candidates c
    LEFT JOIN (SELECT event_id, category, name, track_kind, step FROM {op_events}
               WHERE event_id IN (SELECT blocker_event FROM candidates)) e ON e.event_id = c.blocker_event
),
labelled AS (
    SELECT b.*, (ib.step IS NOT NULL) AS blocker_input_bound, ib.wasted_ps,
           (b.blocker_end_ps IS NOT NULL) AS blocker_in_gap
    FROM blocked b LEFT JOIN input_bound_steps ib ON ib.chip = b.chip AND ib.step = b.blocker_step
),
classified AS (
    SELECT *,
           CASE WHEN track_kind = 'sparsecore' AND input_missing THEN 'host'
                WHEN NOT coalesce(blocker_in_gap, false) THEN 'other'
                WHEN blocker_kind = 'host' OR blocker_category LIKE 'host%' THEN 'host'
                WHEN track_kind = 'tensorcore' AND blocker_kind = 'sparsecore' AND blocker_input_bound THEN 'host'
                WHEN track_kind = 'tensorcore' AND blocker_category = 'sc_collective' AND blocker_input_bound THEN 'host'
                WHEN blocker_category LIKE '%collective' THEN 'collective'
                WHEN blocker_kind <> track_kind THEN 'other_core'
                ELSE 'same_core' END AS cause
    FROM labelled
),
traced AS (  -- TensorCore gaps traced to host input through SparseCore work
    SELECT * FROM classified WHERE cause = 'host' AND track_kind = 'tensorcore' AND blocker_kind <> 'host'
),
unrelated AS (  -- the last end, inside each traced gap, of the chip's work for other steps
    SELECT t.track_id, t.gap_start_ps, max(e.end_ps) AS last_ps
    FROM traced t JOIN enders e ON e.chip = t.chip AND e.end_ps > t.gap_start_ps AND e.end_ps <= t.gap_end_ps
    WHERE e.chip >= 0 AND e.blocker_kind <> 'host' AND coalesce(e.step, -1) <> coalesce(t.blocker_step, -1)
    GROUP BY ALL
)
-- cause_ps: the part of the gap the cause is responsible for. For a TensorCore gap
-- traced to host input through a SparseCore step: at most the time after the chip's
-- last unrelated work in the gap ended (the gap would have lasted that long anyway),
-- and at most the SparseCore time the missing input wasted (all an earlier input
-- could have saved).
SELECT c.track_id, c.chip, c.core, c.track_kind, c.step, c.gap_start_ps, c.gap_end_ps, c.gap_ps,
       CASE WHEN c.blocker_in_gap THEN c.blocker_name END AS blocker_name,
       CASE WHEN c.blocker_in_gap THEN c.blocker_category END AS blocker_category,
       c.cause,
       CASE WHEN c.cause = 'host' AND c.track_kind = 'tensorcore' AND c.blocker_kind <> 'host'
            THEN least(c.wasted_ps, c.gap_end_ps - greatest(c.gap_start_ps, coalesce(u.last_ps, c.gap_start_ps)))
            ELSE c.gap_ps END AS cause_ps
FROM classified c
LEFT JOIN unrelated u ON u.track_id = c.track_id AND u.gap_start_ps = c.gap_start_ps
ORDER BY c.gap_start_ps, c.track_id

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
-- The searches that need every op in time order come from analyzers/gap_search.py:
--   {gaps}      every gap (track_id, step, gap_start_ps, gap_end_ps) with the step of the next
--               SparseCore forward op on its track (next_fwd_step), the blocker: the last work
--               on the chip or the host to end inside the gap, among work of the gap's step or
--               the one before (its track, category id (-1: none recorded), name id, step and
--               end: blocker_track_id ... blocker_end_ps; NULL if none), and on TensorCore
--               gaps unrelated_ps: the last end inside the gap of the chip's own work for other
--               steps than the blocker's
--   {inputs}    per step, when its input was in HBM: its last host->device transfer on any
--               chip (a step's SparseCore programs run on every chip together)
--   {first_fwd} per chip and step, the start of its first SparseCore forward op
--   {updates}   per chip and step, the end of its last SparseCore backward op (the embedding
--               update); a step's forward also waits for the update of the step $lag back
--               (2: pipelined, 1: not), so before that update ends no input could start it
WITH gaps AS (
    SELECT g.track_id::INTEGER AS track_id, t.chip, t.core, t.kind AS track_kind, g.step::INTEGER AS step,
           g.gap_start_ps, g.gap_end_ps,
           g.gap_end_ps - g.gap_start_ps AS gap_ps, g.next_fwd_step, g.blocker_track_id, g.blocker_category_id,
           g.blocker_name_id, g.blocker_step, g.blocker_end_ps,
           g.unrelated_ps
    FROM {gaps} g JOIN tracks t ON t.run_id = $run AND t.track_id = g.track_id
),
starved AS (  -- SparseCore gaps: was the input of the next forward step on this core still missing?
    SELECT g.*, i.ready_ps AS next_ready_ps, coalesce(i.ready_ps > g.gap_start_ps, false) AS input_missing
    FROM gaps g LEFT JOIN {inputs} i ON i.step = g.next_fwd_step
),
ready_to_run AS (  -- each starved gap from when the forward's other dependency, the update
    -- of the step $lag back on the chip, was done: only from then could the input have started it
    SELECT s.*, greatest(s.gap_start_ps, coalesce(u.end_ps, s.gap_start_ps)) AS free_ps
    FROM starved s LEFT JOIN {updates} u ON u.chip = s.chip AND u.step = s.next_fwd_step - $lag
    WHERE s.track_kind = 'sparsecore' AND s.input_missing
),
input_bound_steps AS (
    -- (chip, step) whose SparseCore work the input held back, and how long a SparseCore of
    -- the chip sat idle for want of it (wasted_ps: idle, the forward's update dependency
    -- met, its input not yet landed): its first forward op started the moment the input
    -- landed (within $tol_ps), or a SparseCore idled, ready to run the forward but for the
    -- input, until a gap ended before the input landed (its chance to run ahead was lost)
    SELECT w.chip, w.step, w.wasted_ps
    FROM (SELECT chip, next_fwd_step AS step, greatest(max(least(gap_end_ps, next_ready_ps) - free_ps), 0) AS wasted_ps,
                 bool_or(gap_end_ps <= next_ready_ps AND free_ps < gap_end_ps) AS whole_gap
          FROM ready_to_run GROUP BY ALL) w
    LEFT JOIN {first_fwd} f USING (chip, step)
    LEFT JOIN {inputs} i USING (step)
    WHERE w.whole_gap OR f.first_ps - i.ready_ps BETWEEN 0 AND $tol_ps
),
blocked AS (  -- the blocker's names, as op_events resolves them
    SELECT c.*, coalesce(cat.value, bt.default_category) AS blocker_category, nm.value AS blocker_name,
           bt.track_kind AS blocker_kind
    FROM starved c
    LEFT JOIN {op_tracks} bt ON bt.track_id = c.blocker_track_id
    LEFT JOIN strings cat ON cat.run_id = $run AND cat.string_id = c.blocker_category_id
    LEFT JOIN strings nm ON nm.run_id = $run AND nm.string_id = c.blocker_name_id
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
)
-- cause_ps: the part of the gap the cause is responsible for. For a TensorCore gap
-- traced to host input through a SparseCore step: at most the time after the chip's
-- last work for other steps in the gap ended (unrelated_ps: the gap would have lasted
-- that long anyway), and at most the SparseCore time the missing input wasted (all an
-- earlier input could have saved).
SELECT c.track_id, c.chip, c.core, c.track_kind, c.step, c.gap_start_ps, c.gap_end_ps, c.gap_ps,
       CASE WHEN c.blocker_in_gap THEN c.blocker_name END AS blocker_name,
       CASE WHEN c.blocker_in_gap THEN c.blocker_category END AS blocker_category,
       c.cause,
       CASE WHEN c.cause = 'host' AND c.track_kind = 'tensorcore' AND c.blocker_kind <> 'host'
            THEN least(c.wasted_ps, c.gap_end_ps - greatest(c.gap_start_ps, coalesce(c.unrelated_ps, c.gap_start_ps)))
            ELSE c.gap_ps END AS cause_ps
FROM classified c
ORDER BY c.gap_start_ps, c.track_id

-- @module analysis.idle
-- Idle device time and what it waited for: the gaps between a device core's ops, each with its cause
-- (analyzers/rules/idle_gaps.py, from the searches of analyzers/gap_search.py), the host's input threads, and the
-- wait for host input on GPUs, CPUs and other devices (analyzers/rules/device_wait.py).
-- @include analysis.base, schema.views

-- @query idle_gaps
-- Gaps between consecutive ops on each device track (TensorCore and SparseCore op lines) longer than the caller's
-- threshold, each with the event that ended last before the gap closed on the same chip or the host (the likely
-- blocker, as HTA attributes idle time) and the cause that implies: host (input-bound: on a SparseCore, the input of
-- the next step it would start was not yet in HBM when the gap began, so it could not run ahead; on a TensorCore,
-- the blocker is host work, or SparseCore work of a step the input held back, see input_bound_steps), other_core
-- (the blocker ran on the other kind of core), collective (the blocker is a collective), same_core (the blocker ran
-- on another core of the same kind) or other (nothing ended inside the gap). The searches that need every op in time
-- order come from analyzers/gap_search.py as the inputs. A step's forward also waits for the update of the step $lag
-- back (2: pipelined, 1: not), so before that update ends no input could start it.
-- @param run INTEGER The run (runs.run_id).
-- @param tol_ps BIGINT A SparseCore forward starting this soon after its input landed waited for it.
-- @param lag INTEGER How many steps back lies the embedding update a forward waits for.
-- @input found_gaps(track_id BIGINT, step BIGINT, gap_start_ps BIGINT, gap_end_ps BIGINT, next_fwd_step BIGINT, blocker_track_id BIGINT, blocker_category_id BIGINT, blocker_name_id BIGINT, blocker_step BIGINT, blocker_end_ps BIGINT, unrelated_ps BIGINT) Every gap with the step of the next SparseCore forward op on its track, the blocker: the last work on the chip or the host to end inside the gap, among work of the gap's step or the one before, NULL if none; and on TensorCore gaps unrelated_ps: the last end inside the gap of the chip's own work for other steps than the blocker's.
-- @input input_ready(step BIGINT, ready_ps BIGINT) Per step, when its input was in HBM: its last host-to-device transfer on any chip.
-- @input first_forward(chip BIGINT, step BIGINT, first_ps BIGINT) Per chip and step, the start of its first SparseCore forward op.
-- @input embedding_updates(chip BIGINT, step BIGINT, end_ps BIGINT) Per chip and step, the end of its last SparseCore backward op, the embedding update.
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip.
-- @column track_kind VARCHAR tensorcore or sparsecore.
-- @column step INTEGER The gap's step.
-- @column gap_start_ps BIGINT Gap start.
-- @column gap_end_ps BIGINT Gap end.
-- @column gap_ps BIGINT Gap length.
-- @column blocker_name VARCHAR The blocker's name; NULL if nothing ended inside the gap.
-- @column blocker_category VARCHAR The blocker's category; NULL if nothing ended inside the gap.
-- @column cause VARCHAR host, other_core, collective, same_core or other.
-- @column cause_ps BIGINT The part of the gap the cause is responsible for.
WITH gaps AS (
    SELECT g.track_id::INTEGER AS track_id, t.chip, t.core, t.kind AS track_kind, g.step::INTEGER AS step,
           g.gap_start_ps, g.gap_end_ps,
           g.gap_end_ps - g.gap_start_ps AS gap_ps, g.next_fwd_step, g.blocker_track_id, g.blocker_category_id,
           g.blocker_name_id, g.blocker_step, g.blocker_end_ps,
           g.unrelated_ps
    FROM found_gaps g JOIN tracks t ON t.run_id = $run AND t.track_id = g.track_id
),
starved AS (  -- SparseCore gaps: was the input of the next forward step on this core still missing?
    SELECT g.*, i.ready_ps AS next_ready_ps, coalesce(i.ready_ps > g.gap_start_ps, false) AS input_missing
    FROM gaps g LEFT JOIN input_ready i ON i.step = g.next_fwd_step
),
ready_to_run AS (  -- each starved gap from when the forward's other dependency, the update
    -- of the step $lag back on the chip, was done: only from then could the input have started it
    SELECT s.*, greatest(s.gap_start_ps, coalesce(u.end_ps, s.gap_start_ps)) AS free_ps
    FROM starved s LEFT JOIN embedding_updates u ON u.chip = s.chip AND u.step = s.next_fwd_step - $lag
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
    LEFT JOIN first_forward f USING (chip, step)
    LEFT JOIN input_ready i USING (step)
    WHERE w.whole_gap OR f.first_ps - i.ready_ps BETWEEN 0 AND $tol_ps
),
blocked AS (  -- the blocker's names, as op_events resolves them
    SELECT c.*, coalesce(cat.value, bt.default_category) AS blocker_category, nm.value AS blocker_name,
           bt.track_kind AS blocker_kind
    FROM starved c
    LEFT JOIN run_op_tracks($run) bt ON bt.track_id = c.blocker_track_id
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
ORDER BY c.gap_start_ps, c.track_id;

-- @query observed_ps
-- The time the op tracks of one kind were observed: the counted steps' windows (step_times.counted, the steps
-- every summary covers) of the chips whose tracks have events, one row in busy_chips per such track.
-- @param run INTEGER The run (runs.run_id).
-- @input busy_chips(chip BIGINT) The chip of each op track of the kind that has events.
-- @column t BIGINT Step windows' time summed over the tracks.
SELECT sum(w.end_ps - w.start_ps)::BIGINT AS t FROM run_step_windows($run) w JOIN busy_chips USING (chip)
JOIN step_times s ON s.run_id = $run AND s.step = w.step WHERE s.counted;

-- @query gap_causes
-- Gap count and time per cause for one kind of core in the counted steps, the most time first.
-- @param run INTEGER The run (runs.run_id).
-- @param track_kind VARCHAR tensorcore or sparsecore.
-- @input gaps(step INTEGER, track_kind VARCHAR, cause VARCHAR, cause_ps BIGINT) The rows of idle_gaps.
-- @column cause VARCHAR The cause.
-- @column gaps BIGINT Gaps.
-- @column gap_ps BIGINT Their time the cause is responsible for.
SELECT cause, count(*) AS gaps, sum(cause_ps)::BIGINT AS gap_ps FROM gaps
WHERE track_kind = $track_kind AND step IN (SELECT step FROM step_times WHERE run_id = $run AND counted)
GROUP BY cause ORDER BY gap_ps DESC;

-- @query tpu_tracks
-- How many TensorCore and SparseCore tracks the run has.
-- @param run INTEGER The run (runs.run_id).
-- @column n BIGINT Tracks.
SELECT count(*) AS n FROM tracks WHERE run_id = $run AND kind IN ('tensorcore', 'sparsecore');

-- @query idle_by_step
-- Gap count and length per step, chip, kind of core and cause.
-- @input gaps(step INTEGER, chip INTEGER, track_kind VARCHAR, cause VARCHAR, gap_ps BIGINT) The rows of idle_gaps.
-- @column step INTEGER The gaps' step.
-- @column chip INTEGER Chip index.
-- @column track_kind VARCHAR tensorcore or sparsecore.
-- @column cause VARCHAR The cause.
-- @column gaps BIGINT Gaps.
-- @column gap_ps BIGINT Their length.
SELECT step, chip, track_kind, cause, count(*) AS gaps, sum(gap_ps)::BIGINT AS gap_ps FROM gaps GROUP BY ALL ORDER BY ALL;

-- @query host_wait_by_step
-- Per counted step: the TensorCores' time waiting for host input (the cause_ps of their host-caused gaps) and the time
-- their op tracks were observed (the step's windows of the chips whose tracks have events, one row in busy_chips per
-- such track): the per-step series of the host_bound finding's share.
-- @param run INTEGER The run (runs.run_id).
-- @input gaps(step INTEGER, track_kind VARCHAR, cause VARCHAR, cause_ps BIGINT) The rows of idle_gaps.
-- @input busy_chips(chip BIGINT) The chip of each TensorCore op track that has events.
-- @column step INTEGER Training step.
-- @column wait_ps BIGINT TensorCore time waiting for host input.
-- @column observed_ps BIGINT TensorCore op tracks' time in the step's windows.
WITH observed AS (
    SELECT w.step, sum(w.end_ps - w.start_ps)::BIGINT AS observed_ps
    FROM run_step_windows($run) w JOIN busy_chips USING (chip) GROUP BY w.step
),
waits AS (
    SELECT step, sum(cause_ps)::BIGINT AS wait_ps FROM gaps
    WHERE track_kind = 'tensorcore' AND cause = 'host' GROUP BY step
)
SELECT s.step, coalesce(g.wait_ps, 0)::BIGINT AS wait_ps, coalesce(o.observed_ps, 0)::BIGINT AS observed_ps
FROM step_times s LEFT JOIN observed o USING (step) LEFT JOIN waits g USING (step)
WHERE s.run_id = $run AND s.counted
ORDER BY s.step;

-- @query host_throughput
-- How busy the input threads are: the host tracks that ran preprocessing, their preprocessing time in the counted
-- steps, and the counted steps' time and count.
-- @param run INTEGER The run (runs.run_id).
-- @column threads BIGINT Host tracks that ran host_preprocess work.
-- @column host_ps DOUBLE Their host_preprocess time in the counted steps.
-- @column step_ps DOUBLE The counted steps' time.
-- @column steps BIGINT Counted steps.
WITH c AS (SELECT step, dur_ps FROM step_times WHERE run_id = $run AND counted),
     h AS (SELECT e.track_id, e.step, e.dur_ps FROM op_events($run) e
           WHERE e.category = 'host_preprocess')
SELECT (SELECT count(DISTINCT track_id) FROM h) AS threads,
       (SELECT sum(h.dur_ps) FROM h JOIN c USING (step))::DOUBLE AS host_ps,
       (SELECT sum(dur_ps) FROM c)::DOUBLE AS step_ps,
       (SELECT count(*) FROM c) AS steps;

-- @query host_bound_evidence
-- The evidence of the TensorCores' host_bound finding (shown, not run): the host's slices.
-- @param run INTEGER The run (runs.run_id).

-- device gaps closed by host work (what the device waited for)
SELECT * FROM slices WHERE run_id = $run AND track_kind = 'host' ORDER BY start_ps;

-- @query device_chips
-- The run's chips of the given kinds (GPUs, CPUs running XLA ops, other non-TPU devices).
-- @param run INTEGER The run (runs.run_id).
-- @param kinds VARCHAR[] Track kinds.
-- @column chip INTEGER Chip index.
SELECT DISTINCT chip FROM tracks WHERE run_id = $run AND list_contains($kinds, kind) ORDER BY chip;

-- @query counted_windows
-- The step windows of the counted steps, by chip and start.
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column step INTEGER Training step.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
SELECT w.chip, w.step, w.start_ps, w.end_ps FROM run_step_windows($run) w
JOIN step_times s ON s.run_id = $run AND s.step = w.step WHERE s.counted ORDER BY w.chip, w.start_ps;

-- @query device_ops
-- The device work of a GPU, CPU or other device (compute, collectives, copies, host-to-device transfers), by chip
-- and start.
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
SELECT chip, start_ps, end_ps FROM op_events($run)
WHERE chip >= 0 AND category IN ('device_compute', 'device_collective', 'device_memcpy', 'host_to_device')
ORDER BY chip, start_ps;

-- @query host_inputs
-- The host's input work (host_preprocess), by end.
-- @param run INTEGER The run (runs.run_id).
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
SELECT start_ps, end_ps FROM op_events($run) WHERE category = 'host_preprocess' ORDER BY end_ps;

-- @query host_input_events
-- The host input work of the counted steps, by name, longest first (what the device waited for).
-- @param run INTEGER The run (runs.run_id).
-- @param limit BIGINT How many names.
-- @column name VARCHAR The op's name.
-- @column events BIGINT Events.
-- @column total_ps BIGINT Their time.
SELECT e.name, count(*) AS events, sum(e.dur_ps)::BIGINT AS total_ps
FROM op_events($run) e JOIN step_times s ON s.run_id = $run AND s.step = e.step
WHERE e.category = 'host_preprocess' AND s.counted
GROUP BY e.name ORDER BY total_ps DESC, e.name LIMIT $limit;

-- @query host_input_evidence
-- The evidence of the devices' host_bound finding (shown, not run): host input work by name.
-- @param run INTEGER The run (runs.run_id).

-- host input work inside the counted steps (the device's idle time while it ran)
SELECT name, count(*) AS events, sum(dur_ps) AS total_ps FROM slices WHERE run_id = $run AND category = 'host_preprocess' GROUP BY name ORDER BY total_ps DESC;

-- @module analysis.split
-- The step breakdown and the overlap analysis: what the wall-time split of the step windows reads (the windows, the
-- classes of each track and category), why a run has no split, the HBM traffic per step (analyzers/rules/breakdown.py),
-- and the SparseCore / TensorCore overlap summed from the split's busy-core view (analyzers/rules/overlap.py).
-- @include analysis.base, schema.views

-- @query step_windows
-- The run's step windows: what the breakdown splits.
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column step INTEGER Training step.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
SELECT chip, step, start_ps, end_ps FROM run_step_windows($run);

-- @query timeline_kinds
-- How the wall-time split classes each op track and category id (timeline_kinds): breakdown.py applies the rows to
-- every event of the op scan.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER tracks.track_id.
-- @column category_id INTEGER events.category_id; -1 where the event records none.
-- @column priority TINYINT Index into time_split.CATEGORIES.
-- @column core_kind TINYINT 0 for TensorCore ops, 1 for SparseCore ops, -1 for the rest.
SELECT track_id, category_id, priority, core_kind FROM timeline_kinds($run);

-- @query run_shape
-- Why a run has no step windows: how many steps it marks and how many device tracks it has.
-- @param run INTEGER The run (runs.run_id).
-- @column steps BIGINT Distinct steps marked.
-- @column device BIGINT Device tracks (TensorCore, SparseCore, GPU, CPU, other devices).
SELECT (SELECT count(DISTINCT step) FROM steps WHERE run_id = $run) AS steps,
       (SELECT count(*) FROM tracks WHERE run_id = $run AND kind IN ('tensorcore', 'sparsecore', 'gpu', 'cpu', 'device')) AS device;

-- @query hbm_traffic
-- Per chip and step, the HBM bytes the device's compute ops record moving (SparseCore lookups and updates,
-- TensorCore passes, other devices' compute: op_events of the compute categories with a `bytes` value). Collectives
-- cross ICI and host transfers the host link, so neither counts.
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column step INTEGER Training step.
-- @column hbm_bytes BIGINT Bytes the compute ops record.
SELECT chip, step, sum(bytes)::BIGINT AS hbm_bytes
FROM op_events($run)
WHERE chip >= 0 AND step IS NOT NULL AND bytes IS NOT NULL
  AND category IN ('sc_forward', 'sc_backward', 'sc_other', 'tc_forward', 'tc_backward', 'tc_other', 'device_compute')
GROUP BY chip, step
ORDER BY chip, step;

-- @query overlap_by_step
-- Per chip and step: TensorCore and SparseCore busy time and their overlap, from the split's time by the set of
-- busy core kinds.
-- @input core_sets(chip INTEGER, step INTEGER, category VARCHAR, dur_ps BIGINT) The split's core_kind view: time per chip, step and set of busy core kinds, none, tc_only, sc_only or both.
-- @column chip INTEGER Chip index.
-- @column step INTEGER Training step.
-- @column tc_busy_ps BIGINT Time a TensorCore op runs.
-- @column sc_busy_ps BIGINT Time a SparseCore op runs.
-- @column overlap_ps BIGINT Time both run.
-- @column step_ps BIGINT The step window's time.
SELECT chip, step,
       coalesce(sum(dur_ps) FILTER (WHERE category IN ('tc_only', 'both')), 0)::BIGINT AS tc_busy_ps,
       coalesce(sum(dur_ps) FILTER (WHERE category IN ('sc_only', 'both')), 0)::BIGINT AS sc_busy_ps,
       coalesce(sum(dur_ps) FILTER (WHERE category = 'both'), 0)::BIGINT AS overlap_ps,
       sum(dur_ps)::BIGINT AS step_ps
FROM core_sets GROUP BY chip, step ORDER BY chip, step;

-- @query overlap_by_chip
-- overlap_by_step summed per chip.
-- @input overlap_steps(chip INTEGER, step INTEGER, tc_busy_ps BIGINT, sc_busy_ps BIGINT, overlap_ps BIGINT, step_ps BIGINT) The rows of overlap_by_step.
-- @column chip INTEGER Chip index.
-- @column tc DOUBLE TensorCore busy time.
-- @column sc DOUBLE SparseCore busy time.
-- @column ov DOUBLE Overlap.
-- @column total DOUBLE Step windows' time.
SELECT chip, sum(tc_busy_ps)::DOUBLE AS tc, sum(sc_busy_ps)::DOUBLE AS sc, sum(overlap_ps)::DOUBLE AS ov,
       sum(step_ps)::DOUBLE AS total
FROM overlap_steps GROUP BY chip ORDER BY chip;

-- @query tensorcore_waits
-- TensorCore idle time inside steps by what it waited for: SparseCore work (a SparseCore op or the embedding
-- all-to-all) or the TensorCore's own collectives.
-- @input gaps(track_kind VARCHAR, step INTEGER, cause VARCHAR, cause_ps BIGINT, blocker_category VARCHAR) The gaps of analysis.idle.idle_gaps.
-- @column sparsecore DOUBLE Time waiting for SparseCore work.
-- @column collective DOUBLE Time waiting for the TensorCore's collectives.
SELECT sum(cause_ps) FILTER (WHERE blocker_category IN ('sc_forward', 'sc_backward', 'sc_collective')
                             AND cause IN ('other_core', 'collective'))::DOUBLE AS sparsecore,
       sum(cause_ps) FILTER (WHERE cause = 'collective' AND blocker_category <> 'sc_collective')::DOUBLE
           AS collective
FROM gaps WHERE track_kind = 'tensorcore' AND step IS NOT NULL;

-- @query overlap_evidence
-- The evidence of the overlap findings (shown, not run): SparseCore and TensorCore ops of one step on chip 0.
-- @param run INTEGER The run (runs.run_id).

-- SparseCore vs TensorCore ops of one step on chip 0
SELECT plane, line, name, step, start_ps, dur_ps FROM slices WHERE run_id = $run AND chip = 0 AND line IN ('XLA Ops', 'Sparse Core Ops') AND step = 2 ORDER BY start_ps;

-- @module stdlib.steps
-- The step rules: every interval a step occupies on a chip (step_spans), what a step is on each chip (chip_steps),
-- the window of each chip's timeline a step owns (step_windows), THE step time and which steps summaries count
-- (step_times), and per step SparseCore minibatches and dropped IDs (step_minibatches). Over the tables only.

-- @view step_spans
-- Every interval a step occupies on a chip, one per source (step markers by line, else the extent of the step's
-- events), ranked: the raw material of the step rules.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index; -1 for the host.
-- @column step INTEGER Training step.
-- @column source VARCHAR Where the span is measured: tensorcore_steps, device_steps, device_events, host_steps or
--   host_events (step_spans).
-- @column rank INTEGER 1 tensorcore_steps, 2 device_steps, 3 device_events, 4 host_steps, 5 host_events: lower is
--   preferred.
-- @column start_ps BIGINT Earliest start of the source's markers (events) of the step on the chip.
-- @column end_ps BIGINT Latest end of them.
CREATE VIEW step_spans AS
-- step_spans: every interval a step occupies on a chip, by where it is measured.
--
-- The raw material of the step rules (chip_steps, step_windows, step_times): per run,
-- chip (-1: the host) and step, one span per source, ranked by how directly it
-- measures the chip's step (rank 1 first):
--   1 tensorcore_steps  markers on a device chip's TensorCore `Steps` line
--   2 device_steps      the chip's other step markers (`Sparse Core Steps`, ...)
--   3 host_steps        on a device chip: its host's step markers (e.g. a JAX training
--                       loop's StepTraceAnnotation), for a chip without markers of its
--                       own (a GPU's streams, a CPU's XLA threads): a step lasts as long
--                       as the host's step, however little of it the device works (a
--                       host-bound step is mostly device idle time)
--   4 device_events     the extent of the chip's events tagged with the step
--                       (step_event_extents, summed at ingest)
--   4 host_steps        on the host (chip -1): its step markers
--   5 host_events       the extent of the host's events tagged with the step
-- A source with several markers of a step on one chip (e.g. one per SparseCore, or one
-- per host) spans from the earliest start to the latest end. A chip's host is the prefix
-- of its plane's name (`host3 /device:GPU:0`; none in a single-host capture). Extend the
-- rules here (one more source and rank) and chip_steps, step_windows and step_times follow.
WITH marker_spans AS (
    SELECT s.run_id, t.chip, regexp_extract(t.plane, '^(.*?)/(host|device):', 1) AS host, s.step,
           CASE WHEN t.chip < 0 THEN 'host_steps' WHEN t.line = 'Steps' THEN 'tensorcore_steps'
                ELSE 'device_steps' END AS source,
           min(s.start_ps) AS start_ps, max(s.start_ps + s.dur_ps) AS end_ps
    FROM steps s
    JOIN tracks t USING (run_id, track_id)
    GROUP BY ALL
),
device_chips AS (
    SELECT DISTINCT run_id, chip, regexp_extract(plane, '^(.*?)/(host|device):', 1) AS host
    FROM tracks
    WHERE chip >= 0 AND kind <> 'counter'
)
SELECT run_id, chip, step, source,
       CASE source WHEN 'tensorcore_steps' THEN 1 WHEN 'device_steps' THEN 2 ELSE 4 END AS rank,
       min(start_ps) AS start_ps, max(end_ps) AS end_ps
FROM marker_spans
GROUP BY run_id, chip, step, source
UNION ALL
SELECT c.run_id, c.chip, h.step, 'host_steps' AS source, 3 AS rank, h.start_ps, h.end_ps
FROM device_chips c
JOIN marker_spans h ON h.run_id = c.run_id AND h.chip < 0 AND h.host = c.host
UNION ALL
SELECT run_id, chip, step, CASE WHEN chip < 0 THEN 'host_events' ELSE 'device_events' END AS source,
       CASE WHEN chip < 0 THEN 5 ELSE 4 END AS rank, start_ps, end_ps
FROM step_event_extents;

-- @view chip_steps
-- The rule for what a step is: each chip's step from the best-ranked source the chip has (its TensorCore `Steps`
-- markers first); the host only in runs without device chips.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index; -1 for the host.
-- @column step INTEGER Training step.
-- @column source VARCHAR Where the span is measured: tensorcore_steps, device_steps, device_events, host_steps or
--   host_events (step_spans).
-- @column start_ps BIGINT Step start on the chip.
-- @column end_ps BIGINT Step end on the chip.
-- @column dur_ps BIGINT end_ps - start_ps.
-- @materialized
CREATE VIEW chip_steps AS
-- chip_steps: THE rule for what a step is: each chip's step, as the chip measures it.
--
-- A chip's step is its span from the best-ranked source of step_spans the chip has:
-- its TensorCore `Steps` markers, else its other step markers, else the extent of its
-- events tagged with the step. The TensorCore's markers come first because they tile
-- the chip's timeline (a step ends where the next begins), so step times add up to
-- the run's wall time; a SparseCore's marker spans from the early start pipelining
-- gives it to its last op, and two consecutive ones overlap.
-- The host (chip -1) counts only in runs where no device chip has any span: a
-- host-only capture (e.g. JAX on the CPU) is measured by its host step markers, else
-- by the extent of its host events; in a run with device chips the host's work only
-- feeds them.
SELECT run_id, chip, step, source, start_ps, end_ps, end_ps - start_ps AS dur_ps
FROM (
    SELECT *, min(rank) OVER (PARTITION BY run_id, chip) AS best, max(chip) OVER (PARTITION BY run_id) AS top_chip
    FROM step_spans
)
WHERE rank = best AND (chip >= 0 OR top_chip < 0);

-- @view step_windows
-- The interval of each device chip's timeline that belongs to each step (chip_steps cut where the chip's next step
-- starts): what the step breakdown splits.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column chip INTEGER Chip index; -1 for the host.
-- @column step INTEGER Training step.
-- @column source VARCHAR Where the span is measured: tensorcore_steps, device_steps, device_events, host_steps or
--   host_events (step_spans).
-- @column start_ps BIGINT Window start.
-- @column end_ps BIGINT Window end (<= the next window's start on the chip).
CREATE VIEW step_windows AS
-- step_windows: the interval of each device chip's timeline that belongs to each step:
-- what the wall-time split (the step breakdown, analyzers/rules/breakdown.py) divides into
-- categories.
--
-- chip_steps on device chips (chip >= 0), each window cut where the chip's next one
-- starts, so a chip's windows never overlap (TensorCore `Steps` markers tile the
-- timeline already; other sources may overlap and are cut). Host-only runs have no
-- windows: the split is measured on device chips.
SELECT run_id, chip, step, source, start_ps,
       least(end_ps, coalesce(lead(start_ps) OVER (PARTITION BY run_id, chip ORDER BY start_ps, step), end_ps))
           AS end_ps
FROM chip_steps
WHERE chip >= 0;

-- @view step_times
-- The step time of every step (its slowest chip's chip_steps) and `counted`: the steps every summary covers (all
-- but the first and last of a run of 5 or more steps).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column step INTEGER Training step.
-- @column start_ps BIGINT The longest chip's step start (the step's window is that chip's step).
-- @column dur_ps BIGINT Step time: the longest chip's step.
-- @column counted BOOLEAN Whether summaries (mean/p50/p90 step time, breakdown shares, minibatches per step) count
--   the step: false for the first (warm-up) and last (drain) step of a run with at least 5 steps.
-- @column source VARCHAR The longest chip's source (step_spans).
-- @materialized
CREATE VIEW step_times AS
-- step_times: THE step time of every step, and which steps summaries count.
--
-- A step's time is its longest chip's step (chip_steps: the TensorCore `Steps` marker
-- where there is one): a synchronous step ends when its slowest chip does (XProf's step
-- time too: the longest step marker of any core). start_ps is that same chip's start, so
-- a step's window [start_ps, start_ps + dur_ps) is one interval of the trace, never one
-- chip's start with another's duration (chips of a multi-worker capture may run a step
-- hundreds of ms apart); of chips with equal steps, the earliest.
--
-- counted: the steps that summaries (mean, p50, p90 step time; breakdown shares;
-- minibatches per step) cover, one rule everywhere (scprof analyze, scprof compare,
-- the UI): every step but the run's first and last when the run has at least 5
-- steps, every step of a shorter run.
--   - The first step is warm-up: it pays start-up (the first transfer, compilation
--     in a real capture) and starts with the input pipeline empty.
--   - The last step is the drain: nothing overlaps it from a next step (with pipelining
--     its SparseCore work ran ahead and its TensorCore step is short), and a recording
--     cut short ends inside it.
--   - Below 5 steps, dropping two would leave too few to summarise.
-- Totals (dropped IDs, events) cover every step.
WITH per_step AS (
    SELECT run_id, step, arg_max(start_ps, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS start_ps, max(dur_ps) AS dur_ps,
           arg_max(source, struct_pack(d := dur_ps, s := -(start_ps::HUGEINT))) AS source
    FROM chip_steps
    GROUP BY run_id, step
)
SELECT run_id, step, start_ps, dur_ps,
       count(*) OVER r < 5 OR (step > min(step) OVER r AND step < max(step) OVER r) AS counted,
       source
FROM per_step
WINDOW r AS (PARTITION BY run_id);

-- @view step_minibatches
-- Per step, SparseCore minibatches (the most any partition was split into) and dropped IDs, from partition
-- statistics, else from the events; with the step's `counted`.
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column step INTEGER Training step.
-- @column minibatches INTEGER Most minibatches any partition of the step was split into; NULL if not recorded.
-- @column dropped_ids BIGINT IDs dropped past the limits in the step; NULL if not recorded.
-- @column counted BOOLEAN step_times.counted (false for a step without a step time).
-- @column source VARCHAR partition_stats or events.
CREATE VIEW step_minibatches AS
-- step_minibatches: per step, the SparseCore minibatches (the most any partition of the
-- step was split into) and the IDs dropped past the compiled limits, with the step's
-- `counted` (step_times; false for a step without a step time).
--
-- From the partition statistics (sc_partition_stats) when the run has them; else from
-- the events' minibatch index and dropped IDs (sc_step_totals, summed at ingest).
-- NULL where the source records none. Summaries: minibatches per step over counted
-- steps; dropped IDs as a total over every step (each lost ID counts).
WITH stats AS (
    SELECT run_id, step, max(minibatches) AS minibatches, sum(dropped_ids)::BIGINT AS dropped_ids,
           'partition_stats' AS source
    FROM sc_partition_stats
    GROUP BY run_id, step
),
from_events AS (
    SELECT run_id, step, minibatches, dropped_ids, 'events' AS source
    FROM sc_step_totals
    WHERE run_id NOT IN (SELECT run_id FROM sc_partition_stats)
),
both_sources AS (SELECT * FROM stats UNION ALL SELECT * FROM from_events)
SELECT b.run_id, b.step, b.minibatches, b.dropped_ids, coalesce(t.counted, false) AS counted, b.source
FROM both_sources b
LEFT JOIN step_times t USING (run_id, step);

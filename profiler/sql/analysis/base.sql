-- @module analysis.base
-- What every analysis of one run starts from, as table macros of the run: its step windows and op tracks, its
-- units of work (op_base with ids, op_events with names), the wall-time split's classes per track and category
-- (timeline_kinds) and the compiler's table layout (stacking_layout). analyzers/context.py installs them on the
-- connection of each RunContext.
-- @include stdlib.steps, stdlib.ops

-- @macro run_step_windows(run)
-- The run's rows of step_windows: each device chip's step windows, cut where its next one starts (what the step
-- breakdown splits; several analyses join it).
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index; -1 for the host (whose work counts on every chip).
-- @column step INTEGER Training step.
-- @column start_ps BIGINT Start.
-- @column end_ps BIGINT End.
CREATE MACRO run_step_windows(run) AS TABLE
SELECT chip, step, start_ps, end_ps FROM step_windows WHERE run_id = run;

-- @macro run_op_tracks(run)
-- The run's rows of op_tracks: tracks whose events are units of work, with the category of an op that records none.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index; -1 for the host (whose work counts on every chip).
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column default_category VARCHAR The category of an op that records none: tc_other, sc_other, host_other or device_compute.
CREATE MACRO run_op_tracks(run) AS TABLE
SELECT track_id, chip, core, track_kind, plane, line, default_category FROM op_tracks WHERE run_id = run;

-- @macro op_base(run)
-- The run's units of work with ids instead of strings (name_id, table_id, category_id), for scans of every event that
-- need no names: the events of run_op_tracks with the track's chip, core, kind and default category.
-- @param run INTEGER The run (runs.run_id).
-- @column run_id INTEGER Run this row belongs to (runs.run_id).
-- @column event_id BIGINT events.event_id.
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index; -1 for the host (whose work counts on every chip).
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column name_id INTEGER events.name_id (strings).
-- @column table_id INTEGER events.table_id (strings).
-- @column category_id INTEGER events.category_id (strings); -1 in timeline_kinds where the event records none.
-- @column default_category VARCHAR The category of an op that records none: tc_other, sc_other, host_other or device_compute.
-- @column step INTEGER Training step.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
-- @column end_ps BIGINT End.
-- @column sc INTEGER SparseCore index (events.sc).
-- @column minibatch INTEGER Minibatch (events.minibatch).
-- @column ids BIGINT IDs (events.ids).
-- @column unique_ids BIGINT Unique IDs (events.unique_ids).
-- @column dropped_ids BIGINT Dropped IDs (events.dropped_ids).
-- @column bytes BIGINT Bytes (events.bytes).
-- @column flops BIGINT FLOPs (events.flops).
CREATE MACRO op_base(run) AS TABLE
SELECT e.run_id, e.event_id, e.track_id, t.chip, t.core, t.track_kind, t.plane, t.line,
       e.name_id, e.table_id, e.category_id,
       t.default_category,
       e.step, e.start_ps, e.dur_ps, e.start_ps + e.dur_ps AS end_ps,
       e.sc, e.minibatch, e.ids, e.unique_ids, e.dropped_ids, e.bytes, e.flops
FROM events e
JOIN run_op_tracks(run) t ON t.track_id = e.track_id
WHERE e.run_id = run;

-- @macro op_events(run)
-- The run's units of work as every analyzer sees them: op_base with name, table and category resolved; an event
-- without a recorded category is classed by its track (default_category: tc_other, sc_other, host_other).
-- @param run INTEGER The run (runs.run_id).
-- @column event_id BIGINT events.event_id.
-- @column track_id INTEGER tracks.track_id.
-- @column chip INTEGER Chip index; -1 for the host (whose work counts on every chip).
-- @column core INTEGER Core index on the chip; -1 if none.
-- @column track_kind VARCHAR tracks.kind.
-- @column plane VARCHAR tracks.plane.
-- @column line VARCHAR tracks.line.
-- @column name VARCHAR The op's name.
-- @column table_name VARCHAR Its embedding table, if any.
-- @column category VARCHAR Its category (recorded, else the track's default).
-- @column step INTEGER Training step.
-- @column start_ps BIGINT Start.
-- @column dur_ps BIGINT Duration.
-- @column end_ps BIGINT End.
-- @column sc INTEGER SparseCore index (events.sc).
-- @column minibatch INTEGER Minibatch (events.minibatch).
-- @column ids BIGINT IDs (events.ids).
-- @column unique_ids BIGINT Unique IDs (events.unique_ids).
-- @column dropped_ids BIGINT Dropped IDs (events.dropped_ids).
-- @column bytes BIGINT Bytes (events.bytes).
-- @column flops BIGINT FLOPs (events.flops).
CREATE MACRO op_events(run) AS TABLE
SELECT b.event_id, b.track_id, b.chip, b.core, b.track_kind, b.plane, b.line,
       n.value AS name, tb.value AS table_name,
       coalesce(c.value, b.default_category) AS category,
       b.step, b.start_ps, b.dur_ps, b.end_ps,
       b.sc, b.minibatch, b.ids, b.unique_ids, b.dropped_ids, b.bytes, b.flops
FROM op_base(run) b
JOIN strings n ON n.run_id = run AND n.string_id = b.name_id
LEFT JOIN strings tb ON tb.run_id = run AND tb.string_id = b.table_id
LEFT JOIN strings c ON c.run_id = run AND c.string_id = b.category_id;

-- @macro timeline_kinds(run)
-- How the wall-time split (analyzers/time_split.py) classes the work of each op track and each category id the run
-- uses (-1: the event records none). A few rows (tracks x categories): breakdown.py applies them to every event.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER tracks.track_id.
-- @column category_id INTEGER events.category_id (strings); -1 in timeline_kinds where the event records none.
-- @column chip INTEGER Chip index; -1 for the host (whose work counts on every chip).
-- @column priority TINYINT Index into time_split.CATEGORIES of the recorded category, else of the track's default category.
-- @column core_kind TINYINT 0 for TensorCore ops, 1 for SparseCore ops (XLA Ops / Sparse Core Ops lines: what the overlap analysis counts as a busy core), -1 for the rest.
CREATE MACRO timeline_kinds(run) AS TABLE
WITH used AS (SELECT DISTINCT coalesce(category_id, -1) AS category_id FROM events WHERE run_id = run)
SELECT t.track_id, u.category_id, t.chip,
       CASE coalesce(c.value, t.default_category)
           WHEN 'tc_forward' THEN 0 WHEN 'tc_backward' THEN 1 WHEN 'tc_collective' THEN 2
           WHEN 'tc_other' THEN 3 WHEN 'sc_forward' THEN 4 WHEN 'sc_backward' THEN 5
           WHEN 'sc_collective' THEN 6 WHEN 'sc_other' THEN 7 WHEN 'device_compute' THEN 8
           WHEN 'device_collective' THEN 9 WHEN 'device_memcpy' THEN 10 WHEN 'host_to_device' THEN 11
           WHEN 'host_preprocess' THEN 12 WHEN 'host_launch' THEN 13 ELSE 14 END::TINYINT AS priority,
       CASE WHEN t.line NOT IN ('XLA Ops', 'Sparse Core Ops') THEN -1
            WHEN t.track_kind = 'tensorcore' THEN 0 WHEN t.track_kind = 'sparsecore' THEN 1 ELSE -1 END::TINYINT AS core_kind
FROM run_op_tracks(run) t CROSS JOIN used u
LEFT JOIN strings c ON c.run_id = run AND c.string_id = u.category_id;

-- @macro stacking_layout(run)
-- The table layout the compiler recorded before step 0, one row per embedding table: its stack (the `table` of the
-- layout event), how many tables that stack holds, and what padding costs it. Layout events have category 'compile'
-- and name 'table_layout'; their arguments are pivoted from event_args.
-- @param run INTEGER The run (runs.run_id).
-- @column stack_name VARCHAR The stack (the layout event's table).
-- @column table_name VARCHAR Its embedding table, if any.
-- @column stack_tables BIGINT How many tables the stack holds.
-- @column features BIGINT Features.
-- @column vocab BIGINT Vocabulary size.
-- @column padded_vocab BIGINT Vocabulary padded to a multiple of the SparseCore count.
-- @column width BIGINT Embedding width.
-- @column padded_width BIGINT Width padded.
-- @column dtype_bytes BIGINT Bytes per element.
-- @column row_bytes BIGINT Bytes per row.
-- @column padded_row_bytes BIGINT Bytes per row padded to 32 bytes.
-- @column optimizer_slots BIGINT Optimizer slots.
-- @column stored_bytes BIGINT vocab x width x dtype bytes: what the table needs.
-- @column padded_bytes BIGINT padded vocab x padded row bytes: what HBM holds (one copy, without optimizer slots).
-- @column row_padding_bytes BIGINT vocab x (padded row - row): rows padded to 32 bytes.
-- @column vocab_padding_bytes BIGINT (padded vocab - vocab) x padded row: vocabulary padded to a multiple of the SparseCore count.
-- @column waste_share DOUBLE 1 - stored / padded (width 1 f32: 7/8).
-- @column row_padding_share DOUBLE 1 - row bytes / padded row bytes.
CREATE MACRO stacking_layout(run) AS TABLE
WITH layout AS (
    SELECT e.event_id, tb.value AS stack_name, e.bytes
    FROM events e
    JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
    JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
    LEFT JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
    WHERE e.run_id = run AND c.value = 'compile' AND n.value = 'table_layout'
),
args AS (
    SELECT a.event_id,
           any_value(a.string_value) FILTER (WHERE a.key = 'table_name') AS table_name,
           any_value(a.int_value) FILTER (WHERE a.key = 'stack_tables') AS stack_tables,
           any_value(a.int_value) FILTER (WHERE a.key = 'features') AS features,
           any_value(a.int_value) FILTER (WHERE a.key = 'vocab') AS vocab,
           any_value(a.int_value) FILTER (WHERE a.key = 'padded_vocab') AS padded_vocab,
           any_value(a.int_value) FILTER (WHERE a.key = 'width') AS width,
           any_value(a.int_value) FILTER (WHERE a.key = 'padded_width') AS padded_width,
           any_value(a.int_value) FILTER (WHERE a.key = 'dtype_bytes') AS dtype_bytes,
           any_value(a.int_value) FILTER (WHERE a.key = 'row_bytes') AS row_bytes,
           any_value(a.int_value) FILTER (WHERE a.key = 'padded_row_bytes') AS padded_row_bytes,
           any_value(a.int_value) FILTER (WHERE a.key = 'optimizer_slots') AS optimizer_slots
    FROM event_args a
    WHERE a.run_id = run AND a.event_id IN (SELECT event_id FROM layout)
    GROUP BY a.event_id
)
SELECT l.stack_name, a.table_name, a.stack_tables, a.features, a.vocab, a.padded_vocab,
       a.width, a.padded_width, a.dtype_bytes, a.row_bytes, a.padded_row_bytes, a.optimizer_slots,
       a.vocab * a.row_bytes AS stored_bytes,
       a.padded_vocab * a.padded_row_bytes AS padded_bytes,
       a.vocab * (a.padded_row_bytes - a.row_bytes) AS row_padding_bytes,
       (a.padded_vocab - a.vocab) * a.padded_row_bytes AS vocab_padding_bytes,
       1 - (a.vocab * a.row_bytes)::DOUBLE / (a.padded_vocab * a.padded_row_bytes) AS waste_share,
       1 - a.row_bytes::DOUBLE / a.padded_row_bytes AS row_padding_share
FROM layout l JOIN args a USING (event_id);

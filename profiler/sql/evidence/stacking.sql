-- @module evidence.stacking
-- The evidence queries of the stacking analyzer's findings (analyzers/rules/stacking.py, analyzers/rules/padding.py): shown with
-- each finding (its evidence_sql), for a user to run with `scprof sql`. The layout queries read the table layout
-- recorded before step 0, one row per table argument, each narrowed to what its finding is about.
-- @include schema.views

-- @query layout_stack_keys
-- The layout arguments that decide which tables stack together (too_few_stacked_tables).
-- @param run INTEGER The run (runs.run_id).

-- the table layout recorded before step 0, one row per table
SELECT e.event_id, e.table_name AS stack, a.key, coalesce(a.int_value::VARCHAR, a.string_value) AS value FROM slices e JOIN event_args a USING (run_id, event_id) WHERE e.run_id = $run AND e.category = 'compile' AND e.name = 'table_layout' AND a.key IN ('stack_tables', 'width', 'dtype_bytes', 'optimizer_slots') ORDER BY e.event_id, a.key;

-- @query layout_stack_tables
-- The tables of one stack (too_many_stacked_tables).
-- @param run INTEGER The run (runs.run_id).
-- @param stack VARCHAR The stack.

-- the table layout recorded before step 0, one row per table
SELECT e.event_id, e.table_name AS stack, a.key, coalesce(a.int_value::VARCHAR, a.string_value) AS value FROM slices e JOIN event_args a USING (run_id, event_id) WHERE e.run_id = $run AND e.category = 'compile' AND e.name = 'table_layout' AND e.table_name = $stack AND a.key = 'table_name' ORDER BY e.event_id, a.key;

-- @query layout_stack
-- Every layout argument of one stack's tables (padding_waste).
-- @param run INTEGER The run (runs.run_id).
-- @param stack VARCHAR The stack.

-- the table layout recorded before step 0, one row per table
SELECT e.event_id, e.table_name AS stack, a.key, coalesce(a.int_value::VARCHAR, a.string_value) AS value FROM slices e JOIN event_args a USING (run_id, event_id) WHERE e.run_id = $run AND e.category = 'compile' AND e.name = 'table_layout' AND e.table_name = $stack ORDER BY e.event_id, a.key;

-- @query layout_vocab
-- Each table's vocabulary and padded vocabulary (vocab_padding_waste).
-- @param run INTEGER The run (runs.run_id).

-- the table layout recorded before step 0, one row per table
SELECT e.event_id, e.table_name AS stack, a.key, coalesce(a.int_value::VARCHAR, a.string_value) AS value FROM slices e JOIN event_args a USING (run_id, event_id) WHERE e.run_id = $run AND e.category = 'compile' AND e.name = 'table_layout' AND a.key IN ('table_name', 'vocab', 'padded_vocab') ORDER BY e.event_id, a.key;

-- @query sc_step_ops
-- The SparseCore all-to-all and the SparseCore ops of one step on chip 0 (exposed_sc_all_to_all).
-- @param run INTEGER The run (runs.run_id).

-- the SparseCore all-to-all and the SparseCore ops of one step on chip 0
SELECT line, name, table_name, start_ps, dur_ps FROM slices WHERE run_id = $run AND chip = 0 AND step = 2 AND category IN ('sc_collective', 'sc_forward', 'sc_backward') ORDER BY start_ps;

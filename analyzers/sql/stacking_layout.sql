-- stacking_layout: the table layout the compiler recorded before step 0, one row
-- per embedding table: its stack (the `table` of the layout event), how many tables
-- that stack holds, and what padding costs it. Layout events have category
-- 'compile' and name 'table_layout'; their arguments are pivoted from event_args.
--   stored_bytes        vocab x width x dtype bytes: what the table needs
--   padded_bytes        padded vocab x padded row bytes: what HBM holds (one copy,
--                       without optimizer slots)
--   row_padding_bytes   vocab x (padded row - row): rows padded to 32 bytes
--   vocab_padding_bytes (padded vocab - vocab) x padded row: vocabulary padded to a
--                       multiple of the SparseCore count
--   waste_share         1 - stored / padded (width 1 f32: 7/8)
CREATE OR REPLACE TEMP VIEW {table} AS
WITH layout AS (
    SELECT e.event_id, tb.value AS stack_name, e.bytes
    FROM events e
    JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
    JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
    LEFT JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id
    WHERE e.run_id = $run AND c.value = 'compile' AND n.value = 'table_layout'
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
    WHERE a.run_id = $run AND a.event_id IN (SELECT event_id FROM layout)
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

-- stacking_tables: the recorded table layout, one row per table (see
-- stacking_layout.sql for the columns), largest padding waste first.
SELECT * FROM {stacking_layout}
ORDER BY vocab_padding_bytes + row_padding_bytes DESC, stack_name, table_name

-- @module ingest.trace
-- The store's writes of an ingest (profiler/trace_to_store.py): a run's id, its rows from Arrow batches (each
-- registered as `b` while its INSERT runs; `table` is a SQL keyword, so its Arrow column is `tbl`), its runs
-- row, and the removal of a run a --replace supersedes. The imports (XSpace, Chrome JSON) insert through the
-- same statements where their rows are alike (profiler/sql/ingest/xspace.sql has theirs).

-- @query next_run_id
-- The id of the next run.
-- @column run_id INTEGER One more than the largest run_id (1 in an empty store).
SELECT coalesce(max(run_id), 0) + 1 AS run_id FROM runs;

-- @statement insert_strings
-- A run's strings.
-- @param run INTEGER The run.
-- @input b(string_id INTEGER, value VARCHAR) The strings by id.
INSERT INTO strings SELECT $run, string_id, value FROM b;

-- @statement insert_tracks
-- A run's tracks.
-- @param run INTEGER The run.
-- @input b(track_id INTEGER, plane VARCHAR, line VARCHAR, kind VARCHAR, chip INTEGER, core INTEGER, tile INTEGER, unit VARCHAR) The tracks.
INSERT INTO tracks SELECT $run, track_id, plane, line, kind, chip, core, tile, unit FROM b;

-- @statement insert_events
-- A group of a scprof trace's events: the typed fields' missing values (profiler/trace_fields.py: null)
-- become NULL.
-- @param run INTEGER The run.
-- @input b(event_id BIGINT, track INTEGER, name INTEGER, start_ps BIGINT, dur_ps BIGINT, step INTEGER, tbl INTEGER, sc INTEGER, minibatch INTEGER, ids BIGINT, unique_ids BIGINT, dropped_ids BIGINT, bytes BIGINT, flops BIGINT, category INTEGER) The events, a column per typed field.
-- @generated tools/gen_sql.py from profiler/trace_fields.py TYPED_FIELDS
INSERT INTO events (run_id, event_id, track_id, name_id, start_ps, dur_ps, step, table_id, sc, minibatch, ids, unique_ids, dropped_ids, bytes, flops, category_id)
SELECT $run, event_id, track, name, start_ps, dur_ps,
       NULLIF(step, -2147483648), NULLIF(tbl, 0), NULLIF(sc, -2147483648), NULLIF(minibatch, -2147483648), NULLIF(ids, -9223372036854775808), NULLIF(unique_ids, -9223372036854775808), NULLIF(dropped_ids, -9223372036854775808), NULLIF(bytes, -9223372036854775808), NULLIF(flops, -9223372036854775808), NULLIF(category, 0)
FROM b;

-- @statement insert_args
-- A scprof trace's event arguments, their keys and text values resolved to strings (kind 1: int, 2: double,
-- 3: string).
-- @param run INTEGER The run (its strings are in).
-- @input b(event_id BIGINT, key INTEGER, kind INTEGER, int_value BIGINT, double_value DOUBLE, string_id INTEGER) The arguments.
INSERT INTO event_args
SELECT $run, a.event_id, k.value,
       CASE WHEN a.kind = 1 THEN a.int_value END,
       CASE WHEN a.kind = 2 THEN a.double_value END,
       CASE WHEN a.kind = 3 THEN s.value END
FROM b a
JOIN strings k ON k.run_id = $run AND k.string_id = a.key
LEFT JOIN strings s ON s.run_id = $run AND s.string_id = a.string_id;

-- @statement insert_counters
-- Counter samples.
-- @param run INTEGER The run.
-- @input b(track INTEGER, ts_ps BIGINT, value DOUBLE) The samples.
INSERT INTO counters SELECT $run, track, ts_ps, value FROM b;

-- @statement insert_steps
-- Step markers.
-- @param run INTEGER The run.
-- @input b(track INTEGER, step INTEGER, start_ps BIGINT, dur_ps BIGINT) The markers.
INSERT INTO steps SELECT $run, track, step, start_ps, dur_ps FROM b;

-- @statement insert_partition_stats
-- SparseCore partition statistics, the table name resolved; the encoding's missing values (the smallest
-- int32 and int64, profiler/recorder.py) become NULL.
-- @param run INTEGER The run (its strings are in).
-- @input b(step INTEGER, chip INTEGER, sc INTEGER, tbl INTEGER, ids BIGINT, unique_ids BIGINT, max_ids_per_partition BIGINT, max_unique_ids_per_partition BIGINT, minibatches INTEGER, dropped_ids BIGINT) The statistics.
-- @generated tools/gen_sql.py from profiler/recorder.py NULL_I32, NULL_I64
INSERT INTO sc_partition_stats
SELECT $run, p.step, p.chip, p.sc, t.value, p.ids, p.unique_ids,
       NULLIF(p.max_ids_per_partition, -9223372036854775808), NULLIF(p.max_unique_ids_per_partition, -9223372036854775808),
       NULLIF(p.minibatches, -2147483648), NULLIF(p.dropped_ids, -9223372036854775808)
FROM b p JOIN strings t ON t.run_id = $run AND t.string_id = p.tbl;

-- @query run_figures
-- Summary figures of a run, once its rows are in.
-- @param run INTEGER The run.
-- @column events BIGINT Its events.
-- @column first_ps BIGINT Its first event's start.
-- @column last_ps BIGINT Its last event end.
-- @column steps BIGINT Distinct steps of its events.
SELECT count(*) AS events, min(start_ps) AS first_ps, max(start_ps + dur_ps) AS last_ps, count(DISTINCT step) AS steps
FROM events WHERE run_id = $run;

-- @statement insert_run
-- A run's row (ingested now; a NULL run_id inserts nothing).
-- @param run_id INTEGER The run.
-- @param uuid VARCHAR Its producer's id.
-- @param name VARCHAR Its name.
-- @param source VARCHAR What it was read from: scprof-trace, xplane, chrome-json.
-- @param source_path VARCHAR The path given.
-- @param producer VARCHAR What wrote it.
-- @param format_version INTEGER The scprof trace format (NULL: an import).
-- @param status VARCHAR ok, truncated or failed.
-- @param truncated_at_byte BIGINT Where the file is cut (NULL: whole).
-- @param start_time_unix_ns BIGINT Wall-clock start (0: unknown).
-- @param generation VARCHAR Hardware generation.
-- @param num_chips INTEGER Chips.
-- @param sparsecores_per_chip INTEGER SparseCores per chip.
-- @param tiles_per_sparsecore INTEGER Tiles per SparseCore.
-- @param simd_width INTEGER SIMD width.
-- @param hbm_bytes BIGINT HBM per chip.
-- @param hbm_bandwidth_bytes_per_s DOUBLE HBM bandwidth.
-- @param tc_peak_flops DOUBLE TensorCore peak FLOP/s.
-- @param ici_bandwidth_bytes_per_s DOUBLE ICI bandwidth.
-- @param spmem_bytes_per_tile BIGINT SPMEM per tile.
-- @param hardware_extra JSON Other hardware facts.
-- @param config JSON The run's config.
-- @param tags JSON Its tags.
-- @param events BIGINT Its events (query run_figures).
-- @param first_ps BIGINT First event start.
-- @param last_ps BIGINT Last event end.
-- @param steps INTEGER Distinct steps.
INSERT INTO runs SELECT $run_id, $uuid, $name, $source, $source_path, $producer, $format_version, $status,
    $truncated_at_byte, $start_time_unix_ns, now(), $generation, $num_chips, $sparsecores_per_chip,
    $tiles_per_sparsecore, $simd_width, $hbm_bytes, $hbm_bandwidth_bytes_per_s, $tc_peak_flops,
    $ici_bandwidth_bytes_per_s, $spmem_bytes_per_tile, $hardware_extra, $config, $tags, $events, $first_ps,
    $last_ps, $steps
WHERE $run_id IS NOT NULL;

-- @query clashes
-- The runs a new run would clash with: the same uuid or the same name.
-- @param uuid VARCHAR The new run's uuid.
-- @param name VARCHAR Its name.
-- @column run_id INTEGER A run.
-- @column name VARCHAR Its name.
-- @column uuid VARCHAR Its uuid.
SELECT run_id, name, uuid FROM runs WHERE uuid = $uuid OR name = $name;

-- @statement delete_runs
-- A run's rows of runs (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM runs WHERE run_id = $run;

-- @statement delete_strings
-- A run's rows of strings (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM strings WHERE run_id = $run;

-- @statement delete_tracks
-- A run's rows of tracks (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM tracks WHERE run_id = $run;

-- @statement delete_events
-- A run's rows of events (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM events WHERE run_id = $run;

-- @statement delete_event_args
-- A run's rows of event_args (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM event_args WHERE run_id = $run;

-- @statement delete_counters
-- A run's rows of counters (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM counters WHERE run_id = $run;

-- @statement delete_steps
-- A run's rows of steps (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM steps WHERE run_id = $run;

-- @statement delete_sc_partition_stats
-- A run's rows of sc_partition_stats (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM sc_partition_stats WHERE run_id = $run;

-- @statement delete_whatif_trials
-- A run's rows of whatif_trials (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM whatif_trials WHERE run_id = $run;

-- @statement delete_run_analysis
-- A run's rows of run_analysis (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_analysis WHERE run_id = $run;

-- @statement delete_run_figures
-- A run's rows of run_figures (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_figures WHERE run_id = $run;

-- @statement delete_run_findings
-- A run's rows of run_findings (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_findings WHERE run_id = $run;

-- @statement delete_run_notes
-- A run's rows of run_notes (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_notes WHERE run_id = $run;

-- @statement delete_run_step_split
-- A run's rows of run_step_split (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_step_split WHERE run_id = $run;

-- @statement delete_xspace_files
-- A run's rows of xspace_files (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM xspace_files WHERE run_id = $run;

-- @statement delete_xspace_events
-- A run's rows of xspace_events (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM xspace_events WHERE run_id = $run;

-- @statement delete_run_summaries
-- A run's rows of run_summaries (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM run_summaries WHERE run_id = $run;

-- @statement delete_sc_step_cells
-- A run's rows of sc_step_cells (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM sc_step_cells WHERE run_id = $run;

-- @statement delete_step_event_extents
-- A run's rows of step_event_extents (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM step_event_extents WHERE run_id = $run;

-- @statement delete_tile_sums
-- A run's rows of tile_sums (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM tile_sums WHERE run_id = $run;

-- @statement delete_sc_step_totals
-- A run's rows of sc_step_totals (delete_run runs one such statement per table holding run_id).
-- @param run INTEGER The run.
DELETE FROM sc_step_totals WHERE run_id = $run;

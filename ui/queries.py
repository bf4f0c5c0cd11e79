"""The UI's SQL: every query a page runs, by name, each with a comment saying what it returns.

Parameters are bound by name (`$run`, `$t0`, ...), never formatted into the text.
Times are int64 picoseconds as in the store; pages format them at the edge.
"""

from __future__ import annotations

# run: every column of one run (hardware header, config, tags, extent).
RUN = "SELECT * FROM runs WHERE run_id = $run"

# run_key: what identifies a run's content, for caching analyses (an id can be reused after a delete).
RUN_KEY = "SELECT run_id, uuid, CAST(ingested_at AS VARCHAR) AS ingested_at, events FROM runs WHERE run_id = $run"

# step_times: per step of a run in [$step_lo, $step_hi]: its time and start, and whether summaries
# count it (the store's step_times view, profiler/sql/stdlib/steps.sql).
STEP_TIMES = """
SELECT step, dur_ps AS step_ps, start_ps, counted FROM step_times
WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi ORDER BY step
"""

# steps_span: the stretch of time the steps in [$step_lo, $step_hi] cover on the timeline: every
# step marker of a device chip (step_spans), else the steps' step times (e.g. host-only runs).
STEPS_SPAN = """
WITH m AS (
    SELECT min(start_ps) AS t0, max(end_ps) AS t1 FROM step_spans
    WHERE run_id = $run AND chip >= 0 AND source IN ('tensorcore_steps', 'device_steps')
      AND step BETWEEN $step_lo AND $step_hi
),
t AS (
    SELECT min(start_ps) AS t0, max(start_ps + dur_ps) AS t1 FROM step_times
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
)
SELECT coalesce(m.t0, t.t0) AS t0, CASE WHEN m.t0 IS NULL THEN t.t1 ELSE m.t1 END AS t1 FROM m, t
"""

# step_range: first and last step of a run (its step times).
STEP_RANGE = "SELECT min(step) AS lo, max(step) AS hi FROM step_times WHERE run_id = $run"

# chip_step_times: per chip, mean and max of its step (chip_steps: the chip's TensorCore `Steps`
# marker where it has one) over the counted steps in range (the per-chip view of the Overview).
CHIP_STEP_TIMES = """
SELECT c.chip, avg(c.dur_ps) AS mean_step_ps, max(c.dur_ps) AS max_step_ps, count(*) AS steps
FROM chip_steps c JOIN step_times t USING (run_id, step)
WHERE c.run_id = $run AND c.chip >= 0 AND t.counted AND c.step BETWEEN $step_lo AND $step_hi
GROUP BY c.chip ORDER BY c.chip
"""

# minibatches: SparseCore minibatches per step (mean and max over the counted steps in range) and
# dropped IDs (total over every step in range), from the store's step_minibatches view (partition
# statistics, else events); `rows`: steps with any record.
STEP_MINIBATCHES = """
SELECT count(*) AS rows, avg(minibatches) FILTER (WHERE counted)::DOUBLE AS minibatches_per_step,
       max(minibatches) FILTER (WHERE counted) AS max_minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids
FROM step_minibatches WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
"""

# timeline_tracks: the tracks of a run that hold events or step markers, with how many (from the
# tile pyramid's base, tile_sums, which counts each event and marker once), in display order:
# device chips first (per chip its TensorCore lines, SparseCores and tiles, or a GPU's streams,
# a CPU's XLA threads), then the host.
TIMELINE_TRACKS = """
WITH n AS (
    SELECT track_id, sum(events)::BIGINT AS n FROM tile_sums WHERE run_id = $run GROUP BY track_id
)
SELECT t.track_id, t.plane, t.line, t.kind, t.chip, t.core, t.tile, n.n
FROM tracks t JOIN n USING (track_id)
WHERE t.run_id = $run AND t.kind <> 'counter'
ORDER BY t.chip < 0, t.chip, CASE t.kind WHEN 'tensorcore' THEN 1 WHEN 'sparsecore' THEN 2 WHEN 'host' THEN 4 ELSE 3 END,
         t.plane, t.core, t.tile,
         CASE WHEN t.line LIKE '%Steps' THEN 0 WHEN t.line LIKE '%Modules' THEN 1 WHEN t.line LIKE '%Ops' THEN 2 ELSE 3 END,
         t.line
"""

# sc_tables: embedding tables with partition statistics in a run.
SC_TABLES = "SELECT DISTINCT table_name FROM sc_partition_stats WHERE run_id = $run ORDER BY table_name"

# sc_tables_from_events: tables named on events (from the run's summary), for runs without
# partition statistics.
SC_TABLES_FROM_EVENTS = """
SELECT unnest(event_tables) AS table_name FROM run_summaries WHERE run_id = $run ORDER BY 1
"""

# sc_cells: the SparseCore heatmaps: per step bucket (steps // $sb) and partition (chip, sc),
# IDs, unique IDs, minibatches and dropped IDs over the chosen tables, and the highest
# ratio of IDs (unique IDs) to the compiled limit of any chosen table.
SC_CELLS = """
WITH per_step AS (
    SELECT step, chip, sc, sum(ids) AS ids, sum(unique_ids) AS unique_ids, max(minibatches) AS minibatches,
           sum(dropped_ids) AS dropped_ids,
           max(ids::DOUBLE / nullif(max_ids_per_partition, 0)) AS ids_ratio,
           max(unique_ids::DOUBLE / nullif(max_unique_ids_per_partition, 0)) AS unique_ratio
    FROM sc_partition_stats
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi AND (len($tables) = 0 OR list_contains($tables, table_name))
    GROUP BY ALL
)
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       max(ids_ratio) AS ids_ratio, max(unique_ratio) AS unique_ratio
FROM per_step GROUP BY ALL ORDER BY 1, 2, 3
"""

# sc_cells_from_events: the same from SparseCore op events (category sc_forward, or uncategorised),
# for runs without partition statistics: no limits, so no ratios. Tables and the category are
# given by string id.
SC_CELLS_FROM_EVENTS = """
WITH sc_tracks AS (SELECT track_id, chip FROM tracks WHERE run_id = $run AND chip >= 0 AND kind IN ('sparsecore', 'sc_tile')),
per_step AS (
    SELECT e.step, t.chip, e.sc, sum(e.ids) AS ids, sum(e.unique_ids) AS unique_ids,
           least(max(e.minibatch)::BIGINT + 1, 2147483647) AS minibatches, sum(e.dropped_ids) AS dropped_ids
    FROM events e JOIN sc_tracks t USING (track_id)
    WHERE e.run_id = $run AND e.ids IS NOT NULL AND e.sc IS NOT NULL AND e.step BETWEEN $step_lo AND $step_hi
      AND (e.category_id IS NULL OR e.category_id = $forward_id)
      AND (len($table_ids) = 0 OR list_contains($table_ids, e.table_id))
    GROUP BY ALL
)
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       NULL::DOUBLE AS ids_ratio, NULL::DOUBLE AS unique_ratio
FROM per_step GROUP BY ALL ORDER BY 1, 2, 3
"""

# sc_cells_from_summary: SC_CELLS_FROM_EVENTS with no table chosen, from the run's per-step
# SparseCore summary (the same events, summed per step, chip and SparseCore at ingest).
SC_CELLS_FROM_SUMMARY = """
SELECT (step // $sb)::INTEGER * $sb AS step, chip, sc, max(ids)::DOUBLE AS ids, max(unique_ids)::DOUBLE AS unique_ids,
       max(minibatches)::DOUBLE AS minibatches, sum(dropped_ids)::DOUBLE AS dropped_ids,
       NULL::DOUBLE AS ids_ratio, NULL::DOUBLE AS unique_ratio
FROM sc_step_cells WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
GROUP BY ALL ORDER BY 1, 2, 3
"""

# string_ids: ids of some strings of a run (to filter events by integer id instead of joining names).
STRING_IDS = "SELECT string_id, value FROM strings WHERE run_id = $run AND list_contains($values, value)"

# sc_table_summary: per table: largest partition against its compiled limits, minibatches,
# dropped IDs and skew (largest partition over the mean partition, averaged over steps).
SC_TABLE_SUMMARY = """
WITH per_step AS (
    SELECT table_name, step, max(ids) AS max_ids, avg(ids) AS mean_ids, max(unique_ids) AS max_unique,
           max(max_ids_per_partition) AS ids_limit, max(max_unique_ids_per_partition) AS unique_limit,
           max(minibatches) AS minibatches, sum(dropped_ids) AS dropped_ids
    FROM sc_partition_stats
    WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi AND (len($tables) = 0 OR list_contains($tables, table_name))
    GROUP BY ALL
)
SELECT table_name, max(max_ids) AS max_ids, max(ids_limit) AS max_ids_per_partition,
       max(max_unique) AS max_unique_ids, max(unique_limit) AS max_unique_ids_per_partition,
       avg(minibatches) AS minibatches_per_step, sum(dropped_ids)::DOUBLE AS dropped_ids,
       avg(max_ids / nullif(mean_ids, 0)) AS skew
FROM per_step GROUP BY table_name ORDER BY table_name
"""

# counter_series: the counters of a run (one row per chip and counter) with sample counts and peaks.
COUNTER_SERIES = """
SELECT track_id, chip, plane, counter, unit, count(*) AS samples, max(value) AS peak,
       min(ts_ps) AS first_ps, max(ts_ps) AS last_ps
FROM counter_samples WHERE run_id = $run GROUP BY ALL ORDER BY chip, counter, plane
"""

# hbm_peaks_all: every chip's HBM peak (the store's hbm_peaks view), highest first.
HBM_PEAKS_ALL = """
SELECT chip, hbm_peak_bytes, hbm_peak_ts_ps FROM hbm_peaks WHERE run_id = $run ORDER BY hbm_peak_bytes DESC, chip
"""

# hbm_peak: the highest chip's HBM peak (the store's hbm_peaks view) among $chips (all when
# $all_chips), the lowest chip on a tie.
HBM_PEAK = """
SELECT chip, hbm_peak_bytes, hbm_peak_ts_ps FROM hbm_peaks
WHERE run_id = $run AND ($all_chips OR list_contains($chips, chip))
ORDER BY hbm_peak_bytes DESC, chip LIMIT 1
"""

# hbm_at: each HBM counter of a chip (totals and contributors, in bytes) with its value held at $ts
# (its last sample at or before it; counters that start later are left out).
HBM_AT = """
SELECT counter, arg_max(value, ts_ps) AS value FROM counter_samples
WHERE run_id = $run AND chip = $chip AND unit = 'bytes' AND counter LIKE 'HBM %' AND ts_ps <= $ts
GROUP BY counter ORDER BY counter
"""

# counter_samples_window: the samples of chosen counter tracks in [$t0, $t1), plus the value
# holding at $t0 (the last sample before it), so step functions start right.
COUNTER_SAMPLES_WINDOW = """
SELECT track_id, ts_ps, value FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1
UNION ALL
SELECT track_id, $t0 AS ts_ps, arg_max(value, ts_ps) AS value FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps < $t0 GROUP BY track_id
ORDER BY track_id, ts_ps
"""

# counter_buckets: the same when there are too many samples to send: per track and column of
# width $b, the lowest, highest and last value (peaks survive downsampling).
COUNTER_BUCKETS = """
SELECT track_id, (($b * ((ts_ps - $t0) // $b)) + $t0)::BIGINT AS ts_ps, min(value) AS lo, max(value) AS hi,
       arg_max(value, ts_ps) AS value
FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1
GROUP BY ALL ORDER BY track_id, ts_ps
"""

# counter_window_count: how many samples the chosen counter tracks have in the window.
COUNTER_WINDOW_COUNT = """
SELECT count(*) AS n FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1
"""

# sql_examples: shown on the SQL console (each one SELECT; $-free so they run as typed).
SQL_EXAMPLES = {
    "Runs": "SELECT run_id, name, source, status, steps, events FROM runs ORDER BY run_id",
    "Longest ops": (
        "SELECT run_id, plane, name, dur_ps / 1e6 AS dur_us, step\nFROM slices\nORDER BY dur_ps DESC\nLIMIT 20"
    ),
    "Time per op name": (
        "SELECT run_id, line, name, count(*) AS n, sum(dur_ps) / 1e9 AS total_ms\nFROM slices\n"
        "GROUP BY ALL ORDER BY total_ms DESC\nLIMIT 20"
    ),
    "Partitions over the limit": (
        "SELECT run_id, step, chip, sc, table_name, ids, max_ids_per_partition, minibatches\n"
        "FROM sc_partition_stats\nWHERE ids > max_ids_per_partition\nORDER BY ids DESC\nLIMIT 50"
    ),
    "HBM peak per chip": (
        "SELECT run_id, chip, counter, max(value) / 2^30 AS peak_gib\nFROM counter_samples\n"
        "WHERE unit = 'bytes'\nGROUP BY ALL ORDER BY run_id, chip"
    ),
}

# ---- what-if trials (whatif_trials: analyze --verify, tune, compare --attribute) ---------------

# verified_fixes: per fix verified for a run (label = the finding's rule, overrides, derive_limits),
# the row of the latest 'verify' session that tried it, with the trial's run name.
VERIFIED_FIXES = """
SELECT w.label, w.overrides, w.derive_limits, w.trial_run_id, r.name AS trial_run, w.step_time_ps,
       w.ref_step_time_ps, w.change, w.ci_low, w.ci_high, w.verdict, w.accepted, w.reason, w.created_at
FROM whatif_trials w LEFT JOIN runs r ON r.run_id = w.trial_run_id
WHERE w.run_id = $run AND w.purpose = 'verify'
QUALIFY row_number() OVER (PARTITION BY w.label, CAST(w.overrides AS VARCHAR), w.derive_limits
                           ORDER BY w.created_at DESC, w.seq DESC) = 1
ORDER BY w.label
"""

# tune_trials: the trials of the run's latest 'tune' session (or of session $session when not '') in
# order, with their runs' names, and how many tune sessions the run has.
TUNE_TRIALS = """
WITH all_s AS (
    SELECT session, max(created_at) AS last_at FROM whatif_trials WHERE run_id = $run AND purpose = 'tune' GROUP BY session
),
s AS (
    SELECT session, (SELECT count(*) FROM all_s) AS sessions FROM all_s
    WHERE $session = '' OR session = $session ORDER BY last_at DESC, session LIMIT 1
)
SELECT w.session, s.sessions, w.seq, w.label, w.overrides, w.derive_limits, w.trial_run_id, r.name AS trial_run,
       w.ref_run_id, w.step_time_ps, w.ref_step_time_ps, w.change, w.ci_low, w.ci_high, w.verdict, w.accepted,
       w.reason, w.created_at
FROM whatif_trials w JOIN s USING (session) LEFT JOIN runs r ON r.run_id = w.trial_run_id
WHERE w.run_id = $run AND w.purpose = 'tune'
ORDER BY w.seq
"""

# attribution: the rows of the latest 'attribute' session started from $base whose candidate row
# (whatif.attribute.CANDIDATE_LABEL) names $cand, in order (whatif.attribute.shares_from_rows reads them).
ATTRIBUTION = """
WITH s AS (
    SELECT session FROM whatif_trials
    WHERE run_id = $base AND purpose = 'attribute' AND label = $candidate_label AND trial_run_id = $cand
    ORDER BY created_at DESC, session LIMIT 1
)
SELECT w.session, w.seq, w.label, w.overrides, w.derive_limits, w.trial_run_id, w.step_time_ps, w.ref_step_time_ps,
       w.change, w.ci_low, w.ci_high, w.verdict, w.created_at
FROM whatif_trials w JOIN s USING (session) WHERE w.purpose = 'attribute'
ORDER BY w.seq
"""

# op_cores: per kind of op track (tensorcore, sparsecore, host, ...) of a run, how many cores
# (chip, core) carry ops: what the Compare page's per-op time per step is summed over.
OP_CORES = """
SELECT track_kind, count(DISTINCT (chip, core)) AS cores FROM op_tracks WHERE run_id = $run GROUP BY track_kind
"""

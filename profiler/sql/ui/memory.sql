-- @module ui.memory
-- The Memory page's reads (ui/data.py): a run's counters, its chips' HBM peaks and the HBM counters held then, and
-- counter samples in a window [$t0, $t1) (exact, or bucketed when too many). Times are picoseconds.
-- @include schema.views, stdlib.memory

-- @query counter_series
-- The counters of a run (one row per chip and counter) with sample counts and peaks.
-- @param run INTEGER The run (runs.run_id).
-- @column track_id INTEGER The counter's track.
-- @column chip INTEGER Chip index.
-- @column plane VARCHAR tracks.plane.
-- @column counter VARCHAR The counter's name.
-- @column unit VARCHAR Its unit.
-- @column samples BIGINT Samples.
-- @column peak DOUBLE Highest value.
-- @column first_ps BIGINT First sample.
-- @column last_ps BIGINT Last sample.
SELECT track_id, chip, plane, counter, unit, count(*) AS samples, max(value) AS peak,
       min(ts_ps) AS first_ps, max(ts_ps) AS last_ps
FROM counter_samples WHERE run_id = $run GROUP BY ALL ORDER BY chip, counter, plane;

-- @query hbm_peaks_all
-- Every chip's HBM peak (the store's hbm_peaks view), highest first.
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column hbm_peak_bytes DOUBLE The chip's HBM peak.
-- @column hbm_peak_ts_ps BIGINT When it was first reached.
SELECT chip, hbm_peak_bytes, hbm_peak_ts_ps FROM hbm_peaks WHERE run_id = $run ORDER BY hbm_peak_bytes DESC, chip;

-- @query hbm_peak
-- The highest chip's HBM peak (the store's hbm_peaks view) among $chips (all when $all_chips), the lowest chip on a tie.
-- @param run INTEGER The run (runs.run_id).
-- @param all_chips BOOLEAN Every chip.
-- @param chips INTEGER[] The chips (when not $all_chips).
-- @column chip INTEGER Chip index.
-- @column hbm_peak_bytes DOUBLE The chip's HBM peak.
-- @column hbm_peak_ts_ps BIGINT When it was first reached.
SELECT chip, hbm_peak_bytes, hbm_peak_ts_ps FROM hbm_peaks
WHERE run_id = $run AND ($all_chips OR list_contains($chips, chip))
ORDER BY hbm_peak_bytes DESC, chip LIMIT 1;

-- @query hbm_at
-- Each HBM counter of a chip (totals and contributors, in bytes) with its value held at $ts (its last sample at or
-- before it; counters that start later are left out).
-- @param run INTEGER The run (runs.run_id).
-- @param chip INTEGER Chip index.
-- @param ts BIGINT The time.
-- @column counter VARCHAR The counter's name.
-- @column value DOUBLE Its value at $ts, in bytes.
SELECT counter, arg_max(value, ts_ps) AS value FROM counter_samples
WHERE run_id = $run AND chip = $chip AND unit = 'bytes' AND counter LIKE 'HBM %' AND ts_ps <= $ts
GROUP BY counter ORDER BY counter;

-- @query counter_samples_window
-- The samples of chosen counter tracks in [$t0, $t1), plus the value holding at $t0 (the last sample before it), so
-- step functions start right.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The counter tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @column track_id INTEGER The counter's track.
-- @column ts_ps BIGINT Sample time.
-- @column value DOUBLE Value.
SELECT track_id, ts_ps, value FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1
UNION ALL
SELECT track_id, $t0 AS ts_ps, arg_max(value, ts_ps) AS value FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps < $t0 GROUP BY track_id
ORDER BY track_id, ts_ps;

-- @query counter_buckets
-- counter_samples_window when there are too many samples to send: per track and column of width $b, the lowest,
-- highest and last value (peaks survive downsampling).
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The counter tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @param b BIGINT Column width in picoseconds.
-- @column track_id INTEGER The counter's track.
-- @column ts_ps BIGINT Column start.
-- @column lo DOUBLE Lowest value in the column.
-- @column hi DOUBLE Highest value.
-- @column value DOUBLE Last value.
SELECT track_id, (($b * ((ts_ps - $t0) // $b)) + $t0)::BIGINT AS ts_ps, min(value) AS lo, max(value) AS hi,
       arg_max(value, ts_ps) AS value
FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1
GROUP BY ALL ORDER BY track_id, ts_ps;

-- @query counter_window_count
-- How many samples the chosen counter tracks have in the window.
-- @param run INTEGER The run (runs.run_id).
-- @param tracks INTEGER[] The counter tracks.
-- @param t0 BIGINT Window start.
-- @param t1 BIGINT Window end (excluded).
-- @column n BIGINT Samples.
SELECT count(*) AS n FROM counters
WHERE run_id = $run AND list_contains($tracks, track_id) AND ts_ps >= $t0 AND ts_ps < $t1;

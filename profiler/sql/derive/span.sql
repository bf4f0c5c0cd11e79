-- @module derive.span
-- What ingest derives from a run's rows for the trace viewer, once, so the UI's first views are cheap
-- (profiler/summaries.py runs these inside ingest's transaction): the run's span (run_summaries) and the tile
-- pyramid's base (tile_sums). Plain GROUP BYs over the run's rows. Over the tables only.

-- @statement fill_run_summary
-- The run's run_summaries row: its span over events and step markers (origin, and a width of 1/$bins of it,
-- rounded up), the longest event, and the tables named on events.
-- @param run INTEGER The run.
-- @param bins INTEGER How many widths the span holds (TIMELINE_BINS of profiler/summaries.py).
INSERT INTO run_summaries
WITH ext AS (
    SELECT min(start_ps) AS lo, max(start_ps::HUGEINT + dur_ps) AS hi FROM (
        SELECT track_id, start_ps, dur_ps FROM events WHERE run_id = $run
        UNION ALL
        SELECT track_id, start_ps, dur_ps FROM steps WHERE run_id = $run
    )
)
SELECT $run, lo, CASE WHEN lo IS NOT NULL THEN greatest(1, (hi::HUGEINT - lo + $bins - 1) // $bins) END::BIGINT,
       (SELECT coalesce(max(dur_ps), 0) FROM events WHERE run_id = $run),
       (SELECT coalesce(list(s.value ORDER BY s.value), [])
        FROM (SELECT DISTINCT table_id FROM events WHERE run_id = $run AND table_id IS NOT NULL) e
        JOIN strings s ON s.run_id = $run AND s.string_id = e.table_id)
FROM ext;

-- @statement fill_tile_sums
-- The run's tile_sums rows (all_tile_sums for one run; the run's run_summaries row is in).
-- @param run INTEGER The run.
INSERT INTO tile_sums
-- The tile pyramid's base level of the run: its span [0, end) in at most 2^16 buckets of 2^level ps, end being
-- the end of run_summaries' grid (origin + 16384 widths, TIMELINE_BINS): level = bit_length(end) - 16 (at least
-- 0). bit_length(x) is exact from c = floor(log2(x)) + 1, which a DOUBLE may round off by one near a power of two
-- (2^k - 1 rounds up to 2^k for k > 53): c - (x < 2^(c-1)) + (x >= 2^c).
WITH lv AS (
    SELECT run_id, CASE WHEN e <= 0 THEN 0 ELSE greatest(0, (c - (e < (1::HUGEINT << (c - 1)))::INTEGER + (e >= (1::HUGEINT << c))::INTEGER) - 16) END AS level
    FROM (SELECT run_id, e, CASE WHEN e > 0 THEN floor(log2(e))::INTEGER + 1 END AS c
          FROM (SELECT run_id, timeline_origin_ps::HUGEINT + timeline_bin_ps::HUGEINT * 16384 AS e
                FROM run_summaries WHERE timeline_origin_ps IS NOT NULL AND run_id = $run))
),
src AS (
    SELECT run_id, track_id, name_id, NULL::INTEGER AS step, start_ps, dur_ps FROM events WHERE run_id = $run
    UNION ALL
    SELECT run_id, track_id, NULL::INTEGER, step, start_ps, dur_ps FROM steps WHERE run_id = $run
),
-- the duration class: the smallest c >= level with dur_ps < 2^c (exact as above)
classed AS (
    SELECT src.*, lv.level,
           CASE WHEN dur_ps >= (1::BIGINT << lv.level) THEN floor(log2(dur_ps))::INTEGER + 1 END AS c
    FROM src JOIN lv USING (run_id)
)
SELECT run_id, level, track_id, start_ps >> level AS bucket, name_id, step,
       CASE WHEN c IS NULL THEN level ELSE (c - (dur_ps < (1::HUGEINT << (c - 1)))::INTEGER + (dur_ps >= (1::HUGEINT << c))::INTEGER) END AS dur_class,
       count(*)::INTEGER AS events, sum(dur_ps)::BIGINT AS busy_ps
FROM classed
GROUP BY ALL;

-- @macro all_tile_sums()
-- Every run's tile_sums rows from its events and step markers (fill_tile_sums over all runs at once): per run,
-- track, base bucket, name (step markers: NULL, and their step) and duration class, the events and markers
-- starting there. The migration to schema version 5 stores them; a read-only connection to a version 4 store
-- reads them as a TEMP view (profiler/store.py).
-- @column run_id INTEGER Run.
-- @column level INTEGER The run's base level: buckets of 2^level ps.
-- @column track_id INTEGER Track.
-- @column bucket BIGINT start_ps >> level.
-- @column name_id INTEGER Event name (strings.string_id); NULL for a step marker.
-- @column step INTEGER A step marker's step; NULL for an event.
-- @column dur_class INTEGER The smallest c >= level with dur_ps < 2^c.
-- @column events INTEGER Events (markers) starting in the bucket.
-- @column busy_ps BIGINT Their summed duration.
CREATE MACRO all_tile_sums() AS TABLE
WITH lv AS (
    SELECT run_id, CASE WHEN e <= 0 THEN 0 ELSE greatest(0, (c - (e < (1::HUGEINT << (c - 1)))::INTEGER + (e >= (1::HUGEINT << c))::INTEGER) - 16) END AS level
    FROM (SELECT run_id, e, CASE WHEN e > 0 THEN floor(log2(e))::INTEGER + 1 END AS c
          FROM (SELECT run_id, timeline_origin_ps::HUGEINT + timeline_bin_ps::HUGEINT * 16384 AS e
                FROM run_summaries WHERE timeline_origin_ps IS NOT NULL))
),
src AS (
    SELECT run_id, track_id, name_id, NULL::INTEGER AS step, start_ps, dur_ps FROM events
    UNION ALL
    SELECT run_id, track_id, NULL::INTEGER, step, start_ps, dur_ps FROM steps
),
classed AS (
    SELECT src.*, lv.level,
           CASE WHEN dur_ps >= (1::BIGINT << lv.level) THEN floor(log2(dur_ps))::INTEGER + 1 END AS c
    FROM src JOIN lv USING (run_id)
)
SELECT run_id, level, track_id, start_ps >> level AS bucket, name_id, step,
       CASE WHEN c IS NULL THEN level ELSE (c - (dur_ps < (1::HUGEINT << (c - 1)))::INTEGER + (dur_ps >= (1::HUGEINT << c))::INTEGER) END AS dur_class,
       count(*)::INTEGER AS events, sum(dur_ps)::BIGINT AS busy_ps
FROM classed
GROUP BY ALL;

-- @statement fill_all_tile_sums
-- Every run's tile_sums rows (the migration to schema version 5; all_tile_sums installed).
INSERT INTO tile_sums SELECT * FROM all_tile_sums();

-- @statement temp_tile_sums
-- tile_sums as a TEMP view computed from the events on each query (a read-only connection to a version 4 store;
-- all_tile_sums installed as a TEMP macro).
CREATE OR REPLACE TEMP VIEW tile_sums AS SELECT * FROM all_tile_sums();

-- @query run_ids
-- Every run of the store, oldest first (the migration of stores made before version 2 summarises each).
-- @column run_id INTEGER Run.
SELECT run_id FROM runs ORDER BY run_id;

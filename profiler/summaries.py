"""Per-run summaries, computed once at ingest from a run's events, so the UI's first views are cheap.

Ingest (trace_to_store.py, for native traces and XProf imports alike) calls
`build_summaries` inside its transaction once the run's rows are in; the schema
migration to version 2 calls it for runs ingested before. Every summary is a plain
SQL GROUP BY over the run's rows (no Python per event), documented in docs/schema.md:

- `run_summaries`: the run's span (origin, and a width of 1/16384 of it), the longest event
  and the tables named on events;
- `sc_step_cells` / `sc_step_totals`: per step SparseCore figures from the events (the
  SparseCore page's and Overview's figures for runs without partition statistics);
- `step_event_extents`: per chip and step, the extent of the step's events (where the step
  rules of profiler/sql/stdlib/steps.sql fall back to when a chip has no step markers);
- `tile_sums`: the trace viewer's tile pyramid base: per track, power-of-two bucket, name and
  duration class, the events and step markers starting there, from which ui/trace_api.py builds
  the coarse tiles (a whole run's view) without reading every event, and counts each track's
  events and markers (version 5 replaced version 2's `timeline_bins` and `timeline_long` by it).
"""

from __future__ import annotations

import duckdb

# run_summaries' width of a run's span: 1/TIMELINE_BINS of it (rounded up), which sets tile_sums' level.
TIMELINE_BINS = 16384

# The run's events and step markers: what the timeline draws.
_TIMELINE_SOURCE = """
SELECT track_id, start_ps, dur_ps FROM events WHERE run_id = $run
UNION ALL
SELECT track_id, start_ps, dur_ps FROM steps WHERE run_id = $run
"""

RUN_SUMMARY = f"""
INSERT INTO run_summaries
WITH ext AS (
    SELECT min(start_ps) AS lo, max(start_ps::HUGEINT + dur_ps) AS hi FROM ({_TIMELINE_SOURCE})
)
SELECT $run, lo, CASE WHEN lo IS NOT NULL THEN greatest(1, (hi::HUGEINT - lo + $bins - 1) // $bins) END::BIGINT,
       (SELECT coalesce(max(dur_ps), 0) FROM events WHERE run_id = $run),
       (SELECT coalesce(list(s.value ORDER BY s.value), [])
        FROM (SELECT DISTINCT table_id FROM events WHERE run_id = $run AND table_id IS NOT NULL) e
        JOIN strings s ON s.run_id = $run AND s.string_id = e.table_id)
FROM ext
"""

# _BIT_LENGTH: the exact bit length of {x} > 0 from {c} = floor(log2({x})) + 1, which a DOUBLE may
# round off by one near a power of two (2^k - 1 rounds up to 2^k for k > 53).
_BIT_LENGTH = "({c} - ({x} < (1::HUGEINT << ({c} - 1)))::INTEGER + ({x} >= (1::HUGEINT << {c}))::INTEGER)"

# The tile pyramid's base level of each run: its span [0, end) in at most 2^16 buckets of
# 2^level ps, end being the end of run_summaries' grid (origin + TIMELINE_BINS widths): level =
# bit_length(end) - 16 (at least 0), bit_length from log2's DOUBLE result corrected to be exact.
_TILE_LEVELS = f"""
SELECT run_id, CASE WHEN e <= 0 THEN 0 ELSE greatest(0, {_BIT_LENGTH.format(c="c", x="e")} - 16) END AS level
FROM (SELECT run_id, e, CASE WHEN e > 0 THEN floor(log2(e))::INTEGER + 1 END AS c
      FROM (SELECT run_id, timeline_origin_ps::HUGEINT + timeline_bin_ps::HUGEINT * {{bins}} AS e
            FROM run_summaries WHERE timeline_origin_ps IS NOT NULL {{runs}}))
"""

# tile_sums' rows: per run, track, base bucket, name (step markers: NULL, and their step) and
# duration class (the smallest c >= level with dur_ps < 2^c, exact as above). {runs}: the runs.
_TILE_SUMS_SELECT = f"""
WITH lv AS ({{levels}}),
src AS (
    SELECT run_id, track_id, name_id, NULL::INTEGER AS step, start_ps, dur_ps FROM events WHERE true {{runs}}
    UNION ALL
    SELECT run_id, track_id, NULL::INTEGER, step, start_ps, dur_ps FROM steps WHERE true {{runs}}
),
classed AS (
    SELECT src.*, lv.level,
           CASE WHEN dur_ps >= (1::BIGINT << lv.level) THEN floor(log2(dur_ps))::INTEGER + 1 END AS c
    FROM src JOIN lv USING (run_id)
)
SELECT run_id, level, track_id, start_ps >> level AS bucket, name_id, step,
       CASE WHEN c IS NULL THEN level ELSE {_BIT_LENGTH.format(c="c", x="dur_ps")} END AS dur_class,
       count(*)::INTEGER AS events, sum(dur_ps)::BIGINT AS busy_ps
FROM classed
GROUP BY ALL
"""


def _tile_sums_select(runs: str) -> str:
    return _TILE_SUMS_SELECT.format(levels=_TILE_LEVELS.format(runs=runs, bins=TIMELINE_BINS), runs=runs)


# One run's (ingest), and every run's: the migration to version 5, and a read-only connection to
# an older store, which reads it as a TEMP view (profiler/store.py).
TILE_SUMS_SQL = "INSERT INTO tile_sums " + _tile_sums_select("AND run_id = $run")
ALL_TILE_SUMS_SELECT = _tile_sums_select("")


# One scan of the run's events for the per-step summaries: per step, track and sc, the
# figures of SparseCore op events (`ok`: ids set, category sc_forward or none) and of all
# events, and the events' extent.
SC_STEP_TRACKS_SQL = """
CREATE TEMP TABLE sc_step_tracks AS
SELECT step, track_id, sc, sum(ids) FILTER (ok) AS ids, sum(unique_ids) FILTER (ok) AS unique_ids,
       max(minibatch) FILTER (ok) AS op_minibatch, sum(dropped_ids) FILTER (ok) AS op_dropped,
       max(minibatch) AS minibatch, sum(dropped_ids) AS dropped,
       min(start_ps) AS start_ps, max(start_ps + dur_ps) AS end_ps
FROM (SELECT step, track_id, sc, ids, unique_ids, minibatch, dropped_ids, start_ps, dur_ps,
             ids IS NOT NULL AND (category_id IS NULL OR category_id = $forward) AS ok
      FROM events WHERE run_id = $run AND step IS NOT NULL)
GROUP BY ALL
"""

# Per step, chip and SparseCore, over all tables: the SparseCore op events on SparseCore tracks
# (ui/queries.py's SC_CELLS_FROM_EVENTS with no table chosen reads the events the same way).
SC_STEP_CELLS_SQL = """
INSERT INTO sc_step_cells
SELECT $run, x.step, t.chip, x.sc, sum(x.ids)::BIGINT, sum(x.unique_ids)::BIGINT,
       least(max(x.op_minibatch)::BIGINT + 1, 2147483647)::INTEGER, sum(x.op_dropped)::BIGINT
FROM sc_step_tracks x
JOIN tracks t ON t.run_id = $run AND t.track_id = x.track_id AND t.chip >= 0 AND t.kind IN ('sparsecore', 'sc_tile')
WHERE x.sc IS NOT NULL AND x.ids IS NOT NULL
GROUP BY ALL
"""

# Per step, over every event: minibatches (highest minibatch index + 1, at most 2**31 - 1: the
# column is INTEGER) and dropped IDs; steps where no event has either are left out.
SC_STEP_TOTALS_SQL = """
INSERT INTO sc_step_totals
SELECT $run, step, least(max(minibatch)::BIGINT + 1, 2147483647)::INTEGER, sum(dropped)::BIGINT
FROM sc_step_tracks
GROUP BY step
HAVING max(minibatch) IS NOT NULL OR sum(dropped) IS NOT NULL
"""

# Per chip (-1: the host) and step: the extent of the events tagged with the step.
STEP_EVENT_EXTENTS_SQL = """
INSERT INTO step_event_extents
SELECT $run, t.chip, x.step, min(x.start_ps), max(x.end_ps)
FROM sc_step_tracks x
JOIN tracks t ON t.run_id = $run AND t.track_id = x.track_id
GROUP BY ALL
"""

# The same for every run at once, from the events (the migration to schema version 3; a
# read-only connection to a version 2 store reads it as a TEMP view, profiler/store.py).
ALL_STEP_EVENT_EXTENTS_SELECT = """
SELECT e.run_id, t.chip, e.step, min(e.start_ps) AS start_ps, max(e.start_ps + e.dur_ps) AS end_ps
FROM events e
JOIN tracks t USING (run_id, track_id)
WHERE e.step IS NOT NULL
GROUP BY ALL
"""
ALL_STEP_EVENT_EXTENTS_SQL = "INSERT INTO step_event_extents" + ALL_STEP_EVENT_EXTENTS_SELECT

SUMMARY_TABLES = (
    "run_summaries",
    "sc_step_cells",
    "sc_step_totals",
    "step_event_extents",
    "tile_sums",
    "chip_steps",
    "step_times",
    "hbm_peaks",
)


def fill_materialized(con: duckdb.DuckDBPyConnection, run_id: int | None = None) -> None:
    """The materialized views of the analysis standard library (profiler/sql/stdlib: chip_steps, step_times, hbm_peaks)
    for one run, else for every run afresh, from their SQL (the views they read exist)."""
    from profiler.stdlib import STDLIB

    for v in (v for v in STDLIB if v.materialized):
        if run_id is None:
            con.execute(f"DELETE FROM {v.name}")
            con.execute(f"INSERT INTO {v.name} BY NAME SELECT * FROM ({v.sql})")
        else:
            con.execute(f"INSERT INTO {v.name} BY NAME SELECT * FROM ({v.sql}) WHERE run_id = ?", [run_id])


def build_summaries(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """(Re)compute every summary of run `run_id` from its rows (inside the caller's transaction)."""
    for table in SUMMARY_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
    con.execute(RUN_SUMMARY, {"run": run_id, "bins": TIMELINE_BINS})
    con.execute(TILE_SUMS_SQL, {"run": run_id})
    forward = con.execute(
        "SELECT coalesce(min(string_id), -1) FROM strings WHERE run_id = ? AND value = 'sc_forward'", [run_id]
    ).fetchall()[0][0]
    con.execute(SC_STEP_TRACKS_SQL, {"run": run_id, "forward": forward})
    try:
        for sql in (SC_STEP_CELLS_SQL, SC_STEP_TOTALS_SQL, STEP_EVENT_EXTENTS_SQL):
            con.execute(sql, {"run": run_id})
    finally:
        con.execute("DROP TABLE sc_step_tracks")
    fill_materialized(con, run_id)


def build_step_event_extents(con: duckdb.DuckDBPyConnection) -> None:
    """step_event_extents and the standard library's materialized views for every run of the
    store, afresh (the migration to version 3)."""
    con.execute("DELETE FROM step_event_extents")
    con.execute(ALL_STEP_EVENT_EXTENTS_SQL)
    fill_materialized(con)


def build_all(con: duckdb.DuckDBPyConnection) -> None:
    """Summaries for every run of the store (the migration of stores made before version 2)."""
    for (run_id,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall():
        build_summaries(con, run_id)

"""The analysis standard library (profiler/stdlib.py, its SQL in profiler/sql/stdlib/): in every store, readable by users' SQL.

`scprof sql` reads each view on a new empty store, a store with a recorded run, one with an
imported XSpace capture, and a store of schema version 2 (made before the library existed):
read-only it gets the views as TEMP views on its connection and the file is left as it was;
opened for writing it is migrated, with the same rows.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from profiler import sqltree
from profiler.schema import SCHEMA_VERSION, SUMMARY_TABLES
from profiler.stdlib import HBM_COUNTERS, STDLIB, steps_covered
from profiler.store import Store
from tests.tracekit import REPO, cli

CAPTURE = REPO / "tests/data/jax_cpu_train"


def make_version_2(db) -> None:
    """Turn a current store into what schema version 2 was: no analysis standard library."""
    with duckdb.connect(str(db)) as con:
        for v in reversed(STDLIB):
            con.execute(f"DROP {'TABLE' if v.materialized else 'VIEW'} {v.name}")
        con.execute("DROP TABLE step_event_extents")
        con.execute("UPDATE scprof_meta SET value = '2' WHERE key = 'schema_version'")


def sql_rows(capsys, db, query: str) -> list[dict]:
    r = cli(capsys, "sql", query, "--format", "json", "--db", str(db))
    assert r.code == 0, r.err
    return json.loads(r.out)


def every_view(capsys, db) -> dict[str, list[dict]]:
    return {v.name: sql_rows(capsys, db, f"SELECT * FROM {v.name} ORDER BY ALL") for v in STDLIB}


def test_scprof_sql_reads_every_view_on_a_new_empty_store(capsys, tmp_path):
    db = tmp_path / "empty.duckdb"
    Store.open(str(db)).close()
    for name, rows in every_view(capsys, db).items():
        assert rows == [], name


def test_scprof_sql_reads_step_times_of_a_run_and_of_a_capture(capsys, store_path):
    assert cli(capsys, "ingest", str(CAPTURE), "--name", "jax", "--db", str(store_path)).code == 0
    views = every_view(capsys, store_path)
    runs = {r["name"]: r["run_id"] for r in sql_rows(capsys, store_path, "SELECT run_id, name FROM runs")}
    for name, run in runs.items():
        steps = [r for r in views["step_times"] if r["run_id"] == run]
        assert steps and all(r["dur_ps"] > 0 for r in steps), name
        listed = [r for r in views["run_list"] if r["run_id"] == run][0]
        counted = [r["dur_ps"] for r in steps if r["counted"]]
        assert listed["counted_steps"] == len(counted)
        assert listed["mean_step_ps"] == pytest.approx(sum(counted) / len(counted))
    jax = [r for r in views["step_times"] if r["run_id"] == runs["jax"]]
    # a host-only capture: 5 steps on the host, the first and last not counted
    assert [r["source"] for r in jax] == ["host_steps"] * 5
    assert [r["counted"] for r in jax] == [False, True, True, True, False]


def test_materialized_views_hold_what_their_sql_gives(store_path, capsys):
    # chip_steps is stored by ingest (and by the migration): the same rows as its SQL run now
    assert cli(capsys, "ingest", str(CAPTURE), "--name", "jax", "--db", str(store_path)).code == 0
    with Store.open(str(store_path), read_only=True) as store:
        for v in (v for v in STDLIB if v.materialized):
            stored = store.rows(f"SELECT * FROM {v.name} ORDER BY ALL")
            assert stored and stored == store.rows(f"SELECT * FROM ({v.sql}) ORDER BY ALL"), v.name


def test_version_2_store_is_read_through_temp_views_and_migrated_on_write(capsys, store_path):
    assert cli(capsys, "ingest", str(CAPTURE), "--name", "jax", "--db", str(store_path)).code == 0
    current = every_view(capsys, store_path)
    make_version_2(store_path)
    before = store_path.read_bytes()
    assert every_view(capsys, store_path) == current  # read-only, through TEMP views
    with Store.open(str(store_path), read_only=True) as store:
        assert store.schema_version() == 2
        assert store.rows("SELECT count(*) AS n FROM step_times")[0]["n"] == len(current["step_times"])
    assert store_path.read_bytes() == before  # nothing written
    with Store.open(str(store_path)) as store:  # a writer migrates it
        assert store.schema_version() == SCHEMA_VERSION
        tables = {r["table_name"] for r in store.rows("SELECT table_name FROM duckdb_tables()")}
        views = {r["view_name"] for r in store.rows("SELECT view_name FROM duckdb_views()")}
        assert {t.name for t in SUMMARY_TABLES} <= tables
        assert all(v.name in (tables if v.materialized else views) for v in STDLIB)
    assert every_view(capsys, store_path) == current


def test_steps_covered_names_the_counted_steps():
    assert steps_covered(list(range(20)), [0 < s < 19 for s in range(20)]) == (
        "over 18 counted steps, 1–18 of 0–19 (warm-up and drain excluded)"
    )
    assert steps_covered([0, 1, 2], [True] * 3) == "over 3 counted steps, 0–2 of 0–2 (every step shown)"
    assert steps_covered([0], [False]).startswith("no counted step")
    assert steps_covered([0], [True]) == "over 1 counted step, step 0 (every step shown)"  # tf2: one step


def test_hbm_counters_are_the_ones_hbm_usage_adds():
    # ui/data.py picks the HBM series to show by HBM_COUNTERS; the view adds exactly these
    text = sqltree.get("stdlib.memory.hbm_usage").sql
    assert "line IN (" + ", ".join(f"'{c}'" for c in HBM_COUNTERS) + ")" in text

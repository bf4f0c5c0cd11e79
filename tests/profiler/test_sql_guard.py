"""The read-only guard in front of users' SQL, as a library."""

from __future__ import annotations

import concurrent.futures
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler import sql_guard
from profiler.sql_guard import QueryError, check_read_only, run_query
from profiler.store import Store
from tests.tracekit import PROPERTY


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "  select 1 ;",
        "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
        "FROM runs SELECT run_id",
        "EXPLAIN SELECT 1",
        "SELECT ';' AS semicolon_in_a_string",
    ],
)
def test_read_only_statements_pass(sql):
    assert check_read_only(sql) == sql


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t VALUES (1)",
        "WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a",
        "CHECKPOINT",
        "DETACH x",
        "USE memory",
        "SELECT 1; SELECT 2",
        "",
        "-- only a comment",
    ],
)
def test_other_statements_are_refused(sql):
    with pytest.raises(QueryError, match="query"):
        check_read_only(sql)


def test_run_query_needs_a_read_only_store(store_path):
    with Store.open(str(store_path)) as store, pytest.raises(ValueError):
        run_query(store, "SELECT 1")


def test_run_query_caps_rows(store_path):
    with Store.open(str(store_path), read_only=True) as store:
        capped = run_query(store, "SELECT * FROM range(10)", max_rows=4)
        exact = run_query(store, "SELECT * FROM range(4)", max_rows=4)
    assert (capped.table.num_rows, capped.truncated) == (4, True)
    assert capped.table.column(0).to_pylist() == [0, 1, 2, 3]
    assert (exact.table.num_rows, exact.truncated) == (4, False)


# ---- the allow-list: one read-only query, EXPLAIN [ANALYZE] only of one --------------------------

READ_ONLY = [
    "VALUES (1), (2)",
    "SELECT 1 UNION ALL SELECT 2",
    "TABLE runs",
    "SUMMARIZE runs",
    "DESCRIBE runs",
    "SHOW TABLES",
    "SHOW ALL TABLES",
    "UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v",
    "PIVOT (SELECT 1 AS a, 2 AS b) ON a IN (1) USING sum(b)",
    "EXPLAIN ANALYZE SELECT 1",
    "explain analyse (select 1)",
    "EXPLAIN (FORMAT json) SELECT 1",
    "EXPLAIN (ANALYZE) (SELECT ')')",
    "/* c */ -- d\n EXPLAIN /* e */ ANALYZE SELECT count(*) FROM runs",
    "EXPLAIN DESCRIBE runs",
]


@pytest.mark.parametrize("sql", READ_ONLY)
def test_read_only_queries_and_their_explains_pass(sql):
    assert check_read_only(sql) == sql


WRITES = [
    "CREATE TEMP TABLE t AS SELECT 1",
    "INSERT INTO t VALUES (1)",
    "UPDATE EXTENSIONS",
    "PRAGMA version",
    "CALL pragma_version()",
    "UPDATE runs SET name = 'x'",
    "ATTACH 'x.duckdb'",
    "SET threads = 1",
    "CREATE MACRO m(a) AS a",
    "PRAGMA database_list",
]


@pytest.mark.parametrize(
    "prefix",
    ["EXPLAIN ", "EXPLAIN ANALYZE ", "explain analyse ", "EXPLAIN (ANALYZE) ", "EXPLAIN (FORMAT json, ANALYZE) "],
)
@pytest.mark.parametrize("inner", WRITES)
def test_explain_of_anything_but_a_query_is_refused(prefix, inner):
    # EXPLAIN ANALYZE runs what it explains: CREATE TEMP TABLE used to get through (exit 0)
    with pytest.raises(QueryError, match="^query: "):
        check_read_only(prefix + inner)


@PROPERTY
@given(
    case=st.sampled_from([str.upper, str.lower, str.title]),
    pad=st.sampled_from([" ", "\n", "\t", " /* x */ ", " -- y\n"]),
    analyze=st.sampled_from(["", "ANALYZE", "ANALYSE", "(ANALYZE)", "(ANALYZE, FORMAT json)"]),
    inner=st.sampled_from(WRITES),
)
def test_explain_prefix_spelled_any_way_is_seen_through(case, pad, analyze, inner):
    sql = pad + case("explain") + pad + case(analyze) + pad + inner
    with pytest.raises(QueryError, match="^query: "):
        check_read_only(sql)


def test_unknown_statement_types_are_refused_not_internal_errors():
    # DuckDB's Python enum lacks the type of UPDATE EXTENSIONS: it used to raise ValueError (exit 1)
    with pytest.raises(QueryError, match="not a statement of a type this scprof does not know"):
        check_read_only("UPDATE EXTENSIONS")
    with pytest.raises(QueryError, match="PIVOT needs an IN list"):
        check_read_only("PIVOT (SELECT 1 AS a, 2 AS b) ON a USING sum(b)")


@PROPERTY
@given(st.text(max_size=200))
def test_any_text_is_a_query_or_a_query_error(text):
    try:
        check_read_only(text)
    except QueryError as e:
        assert "\n" not in str(e) and str(e).startswith("query: ")


def test_overlong_and_non_text_queries_are_refused():
    with pytest.raises(QueryError, match="more than the 100,000 allowed"):
        check_read_only("SELECT 1" + " " * 100_000)
    with pytest.raises(QueryError, match="expected SQL text"):
        check_read_only(["SELECT 1"])  # type: ignore[arg-type]


# ---- limits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan, 3601, "x", None, True])
def test_bad_time_limits_are_refused(timeout):
    with pytest.raises(QueryError, match="^--timeout: "):
        sql_guard.check_limits(10, timeout)


@pytest.mark.parametrize("rows", [0, -5, 1_000_001, 10**30, 2.5, None, True])
def test_bad_row_caps_are_refused(rows):
    with pytest.raises(QueryError, match="^--max-rows: "):
        sql_guard.check_limits(rows, 30)


def test_sane_limits_pass():
    sql_guard.check_limits(1, 0.001)
    sql_guard.check_limits(sql_guard.MAX_ROWS, 3600)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1GB", 10**9), ("1gb", 10**9), ("512MiB", 512 * 2**20), ("1.5 GB", 1_500_000_000), ("2g", 2 * 10**9)],
)
def test_memory_cap_in_duckdbs_units(text, expected):
    assert sql_guard.memory_cap_bytes(text) == expected


@pytest.mark.parametrize("text", ["lots", "1000", "1 parsec", "1KB", ""])
def test_memory_cap_that_is_not_a_size_is_refused(text):
    with pytest.raises(QueryError, match="SCPROF_MEMORY_LIMIT"):
        sql_guard.memory_cap_bytes(text)


def test_results_are_capped_in_bytes(store_path):
    # each row of 1,000 one-byte characters costs 1,000 bytes plus a 4-byte offset in Arrow: 9 fit in 10,000
    with Store.open(str(store_path), read_only=True) as store:
        r = run_query(store, "SELECT repeat('x', 1000) AS s FROM range(50)", max_bytes=10_000)
    assert (r.table.num_rows, r.truncated, r.capped_by) == (9, True, "bytes")
    assert r.table.column("s").to_pylist() == ["x" * 1000] * 9


def test_a_row_wider_than_the_byte_cap_is_refused(store_path):
    with Store.open(str(store_path), read_only=True) as store, pytest.raises(QueryError, match="first row alone"):
        run_query(store, "SELECT repeat('x', 1000) AS s", max_bytes=500)


def test_memory_outside_duckdbs_buffer_pool_is_capped(store_path, monkeypatch):
    # repeat() allocates outside DuckDB's memory_limit: 500 MB used to be allocated under a 256 MB cap
    monkeypatch.setenv("SCPROF_MEMORY_LIMIT", "256MB")
    with Store.open(str(store_path), read_only=True) as store:
        with pytest.raises(QueryError, match="ran out of memory.*256MB") as e:
            run_query(store, "SELECT length(repeat('x', 500000000)) AS n")
        assert "\n" not in str(e.value)
        assert run_query(store, "SELECT length(repeat('x', 1000000)) AS n").table.to_pylist() == [{"n": 1_000_000}]


def test_time_limit_holds_inside_one_long_function_call(store_path):
    # repeat() of 300 MB is one call of seconds that never looks at DuckDB's interrupt
    with Store.open(str(store_path), read_only=True) as store, pytest.raises(QueryError, match="0.05 s time limit"):
        run_query(store, "SELECT length(repeat('x', 300000000)) AS n", timeout_s=0.05)


def test_results_keep_their_types_across_the_worker(store_path):
    sql = "SELECT 1::TINYINT AS a, 2.5::DOUBLE AS b, 'x' AS c, NULL::VARCHAR AS d, [1, 2] AS e, DATE '2024-01-02' AS f"
    with Store.open(str(store_path), read_only=True) as store:
        r = run_query(store, sql)
    import datetime

    assert r.table.to_pylist() == [{"a": 1, "b": 2.5, "c": "x", "d": None, "e": [1, 2], "f": datetime.date(2024, 1, 2)}]
    assert str(r.table.schema.field("a").type) == "int8" and not r.truncated


# ---- a worker started ahead (keep_spare_worker: the UI server) --------------------------------------


@pytest.fixture
def spare_workers():
    sql_guard.keep_spare_worker()
    yield
    sql_guard.keep_spare_worker(False)


def test_each_query_runs_in_a_spare_started_ahead_and_a_new_one_follows(store_path, spare_workers):
    """The oldest spare worker answers the next query and exits with it; a new spare is started,
    so that SPARE_WORKERS are waiting again."""
    first = list(sql_guard._spares)
    assert len(first) == sql_guard.SPARE_WORKERS == 2 and all(w.alive() for w in first)
    with Store.open(str(store_path), read_only=True) as store:
        assert run_query(store, "SELECT 41 + 1 AS n").table.to_pylist() == [{"n": 42}]
        assert first[0].proc.returncode == 0 and first[1].alive()
        second = list(sql_guard._spares)
        assert second[0] is first[1] and len(second) == 2 and second[1].proc.pid not in {w.proc.pid for w in first}
        assert run_query(store, "SELECT count(*) AS n FROM runs").table.to_pylist()[0]["n"] >= 1
        assert first[1].proc.returncode == 0 and sql_guard._spares[0] is second[1] and len(sql_guard._spares) == 2


def test_queries_sent_at_once_each_take_a_spare(store_path, spare_workers):
    started = {w.proc.pid for w in sql_guard._spares}
    with Store.open(str(store_path), read_only=True) as store, concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda n: run_query(store, f"SELECT {n} AS n").table.to_pylist(), (1, 2)))
    assert answers == [[{"n": 1}], [{"n": 2}]]
    assert not started & {w.proc.pid for w in sql_guard._spares} and len(sql_guard._spares) == 2


def test_a_spare_worker_keeps_the_memory_cap_and_time_limit_of_the_query(store_path, spare_workers, monkeypatch):
    """A spare started before SCPROF_MEMORY_LIMIT changed still applies the cap the query is given."""
    with Store.open(str(store_path), read_only=True) as store:
        with pytest.raises(QueryError, match="0.05 s time limit"):
            run_query(store, "SELECT length(repeat('x', 300000000)) AS n", timeout_s=0.05)
        monkeypatch.setenv("SCPROF_MEMORY_LIMIT", "256MB")
        with pytest.raises(QueryError, match="ran out of memory.*256MB"):
            run_query(store, "SELECT length(repeat('x', 500000000)) AS n")
        assert run_query(store, "SELECT 1 AS n").table.to_pylist() == [{"n": 1}]


def test_dead_spares_are_replaced_and_turning_spares_off_ends_the_ones_waiting(store_path, spare_workers):
    for w in sql_guard._spares:
        w.proc.kill()
        w.proc.wait()
    with Store.open(str(store_path), read_only=True) as store:
        assert run_query(store, "SELECT 7 AS n").table.to_pylist() == [{"n": 7}]
    waiting = list(sql_guard._spares)
    assert len(waiting) == 2 and all(w.alive() for w in waiting)
    sql_guard.keep_spare_worker(False)
    assert sql_guard._spares == [] and all(w.proc.returncode is not None for w in waiting)

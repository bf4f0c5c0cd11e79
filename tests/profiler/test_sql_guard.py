"""The read-only guard in front of users' SQL, as a library."""

from __future__ import annotations

import pytest

from profiler.sql_guard import QueryError, check_read_only, run_query
from profiler.store import Store


@pytest.mark.parametrize("sql", [
    "SELECT 1", "  select 1 ;", "WITH a AS (SELECT 1 AS x) SELECT x FROM a", "FROM runs SELECT run_id",
    "EXPLAIN SELECT 1", "SELECT ';' AS semicolon_in_a_string",
])  # fmt: skip
def test_read_only_statements_pass(sql):
    assert check_read_only(sql) == sql


@pytest.mark.parametrize("sql", [
    "INSERT INTO t VALUES (1)", "WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", "CHECKPOINT",
    "DETACH x", "USE memory", "SELECT 1; SELECT 2", "", "-- only a comment",
])  # fmt: skip
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

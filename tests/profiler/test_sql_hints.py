"""A query that names a column or table the store lacks fails with a hint naming the views to use,
built from the store's catalog (profiler/sql_hints.py), on every surface that runs users' SQL."""

from __future__ import annotations

import duckdb
import pytest

from profiler import sql_hints
from profiler.sql_guard import QueryError, run_query
from profiler.store import Store
from tests.tracekit import assert_one_error, cli


def _error(con, sql: str) -> str:
    with pytest.raises(duckdb.Error) as e:
        con.sql(sql).fetchall()
    return str(e.value)


@pytest.fixture
def handmade():
    """Tables t (a_id) and names, and views: v1 over t (a), v3 over v1 (a), v2 over nothing (a), w (b)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (run_id INTEGER, a_id INTEGER)")
    con.execute("CREATE TABLE names (id INTEGER, v VARCHAR)")
    con.execute("CREATE VIEW v1 AS SELECT t.run_id, n.v AS a FROM t JOIN names n ON n.id = t.a_id")
    con.execute("CREATE VIEW v3 AS SELECT a, count(*) AS n FROM v1 GROUP BY a")
    con.execute("CREATE VIEW v2 AS SELECT 'x' AS a")
    con.execute("CREATE VIEW steps_view AS SELECT 1 AS b")
    yield con
    con.close()


def test_a_missing_column_names_the_views_over_its_table_nearest_first(handmade):
    sql = "SELECT a FROM t"
    assert sql_hints.hint(handmade, sql, _error(handmade, sql)) == "t stores a_id; the views v1, v3, v2 have a"
    aliased = "SELECT x.a FROM t AS x WHERE x.run_id = 1"
    assert sql_hints.hint(handmade, aliased, _error(handmade, aliased)) == "t stores a_id; the views v1, v3, v2 have a"
    # names: v1 reads it (a join), v3 through v1; no `_id` column there
    other = "SELECT a FROM names"
    assert sql_hints.hint(handmade, other, _error(handmade, other)) == "the views v1, v3, v2 have a"
    # over a table no view reads: every view exposing the column, those reading fewest tables first
    handmade.execute("CREATE TABLE lonely (a_id INTEGER)")
    alone = "SELECT a FROM lonely"
    assert sql_hints.hint(handmade, alone, _error(handmade, alone)) == "lonely stores a_id; the views v2, v1, v3 have a"


def test_a_missing_table_names_the_views_with_close_names(handmade):
    sql = "SELECT * FROM steps_veiw"
    assert sql_hints.hint(handmade, sql, _error(handmade, sql)) == "views with close names: steps_view"


@pytest.mark.parametrize("sql", ["SELECT zzz FROM t", "SELECT * FROM nothing_like_it", "SELEC 1", "SELECT 1/0::INT"])
def test_no_hint_where_no_view_helps(handmade, sql):
    try:
        handmade.sql(sql).fetchall()
        error = "no error"
    except duckdb.Error as e:
        error = str(e)
    assert sql_hints.hint(handmade, sql, error) is None


def test_the_store_names_slices_for_events_name(store_path, capsys):
    with Store.open(str(store_path), read_only=True) as store:
        views_with_name = {
            r["table_name"]
            for r in store.rows(
                "SELECT table_name FROM information_schema.columns JOIN information_schema.tables USING "
                "(table_catalog, table_schema, table_name) WHERE column_name = 'name' AND table_type = 'VIEW'"
            )
        }
        assert "slices" in views_with_name
        with pytest.raises(QueryError) as e:
            run_query(store, "SELECT name FROM events")
    line, detail = str(e.value), e.value.detail
    assert "\n" not in line and line.endswith("hint: events stores name_id; " + line.split("; ")[-1])
    named = line.split("the views ")[1].removesuffix(" have name").split(", ")
    assert named[0] == "slices" and set(named) <= views_with_name
    assert detail.splitlines()[-1] == "hint: " + line.split("; hint: ")[1]  # the UI's text ends with it too
    # the CLI: exit 2, one line naming the view
    result = cli(capsys, "sql", "SELECT name FROM events", "--db", store_path)
    assert_one_error(result, "events stores name_id", "slices")
    assert_one_error(cli(capsys, "sql", "SELECT * FROM slice", "--db", store_path), "views with close names: slices")


def test_the_sql_page_shows_the_hint(store_path):
    from tests.ui.dashkit import find_id
    from ui.pages.sql import render_sql

    with Store.open(str(store_path), read_only=True) as store:
        body = render_sql(store, {"q": "SELECT name FROM events", "rows": 10})
    text = find_id(body, "sql-error").children
    assert text.splitlines()[-1].startswith("hint: events stores name_id; the views slices")

"""The SQL console (ui/pages/sql.py): DuckDB's error text with its caret in place, numbers
right-aligned with separators, the schema browser against information_schema."""

from __future__ import annotations

import json

import pytest

from profiler.store import Store
from tests.ui.dashkit import find_id, walk


@pytest.fixture
def store(pages_db):
    with Store.open(pages_db, read_only=True) as s:
        yield s


def test_sql_error_keeps_duckdb_line_breaks_so_the_caret_points_at_the_word(store):
    from ui.pages.sql import render_sql

    body = render_sql(store, {"q": "SELECT run_id,\n  name\nFORM runs", "rows": 10})
    pre = find_id(body, "sql-error")
    assert pre.__class__.__name__ == "Pre" and "\n" in pre.children
    lines = pre.children.split("\n")
    (i,) = [n for n, line in enumerate(lines) if line.startswith("LINE 3:")]
    caret = lines[i + 1]
    assert lines[i][caret.index("^") : caret.rindex("^") + 1] == "runs"  # under the word it names


def test_sql_numbers_right_aligned_with_separators_text_left(store):
    from ui.pages.sql import number_text, render_sql

    ref = {r["name"]: r["events"] for r in store.rows("SELECT name, events FROM runs")}
    table = find_id(
        render_sql(store, {"q": "SELECT name, events, events / 3.0 AS third FROM runs", "rows": 10}), "sql-result"
    )
    spec = json.loads(getattr(table, "data-table"))  # its cells, built in the browser (data_views.js)
    assert spec["columns"] == ["name", "events", "third"] and spec["num"] == [False, True, True]
    assert len(spec["rows"]) == len(ref)
    for name, events, third in spec["rows"]:
        assert events == f"{ref[name]:,}" and third == number_text(ref[name] / 3)
    assert number_text(2_657_613_573.0) == "2,657,613,573" and number_text(0.000123456) == "0.000123456"
    assert number_text(1234.56789) == "1,234.57" and number_text(12345678) == "12,345,678"


def test_sql_schema_browser_lists_every_table_and_view_with_columns(store):
    from ui.pages.sql import layout_sql

    browser = find_id(layout_sql(store, {}), "sql-schema")
    items = [c for c in walk(browser) if c.__class__.__name__ == "Details"]
    tables = {getattr(c, "data-insert", None) for c in walk(browser)} - {None}
    expected = {r["table_name"] for r in store.rows("SELECT table_name FROM information_schema.tables")}
    assert expected <= tables and {"runs", "step_times", "slices", "sc_partition_stats"} <= tables
    # a table's columns are data, listed in the browser when it is unfolded (sql_console.js): a
    # component per column cost the page's first view 200 ms
    assert sum(1 for _ in walk(browser)) == 3 * len(items) + 2
    (runs,) = [i for i in items if getattr(i.children.children, "data-insert", None) == "runs"]
    columns = json.loads(getattr(runs, "data-columns"))
    expected_columns = store.rows(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'runs' ORDER BY ordinal_position"
    )
    assert [c[:2] for c in columns] == [[r["column_name"], r["data_type"]] for r in expected_columns]
    assert ["events", "BIGINT"] in [c[:2] for c in columns]
    assert getattr(runs.children, "data-about") == f" table · {len(expected_columns)} columns"

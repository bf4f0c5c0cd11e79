"""The UI's downloads (docs/security.md "Names are data, never paths"): run names are data, never
paths; nothing is left in the temporary folder whatever happens to the response; the SQL download
refuses what the guard refuses with 400."""

from __future__ import annotations

import json
import tempfile

import pytest

from tests.ui.conftest import renamed_copy
from tests.ui.test_data import find
from ui.app import create_app
from ui.pages.sql import SQL_SHOWN_CHARS, render_sql

HOSTILE = "../../outside/x"  # relative to a download's folder inside the temporary directory


@pytest.fixture
def hostile_store(ui_db, tmp_path):
    """A copy of the UI store whose run 1 is named with a path and one with control characters."""
    return renamed_copy(ui_db, tmp_path / "hostile.duckdb", HOSTILE, "a\x1b[31mb\nc\x00d")


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The temporary directory downloads use, empty, with a folder beside it a name could reach."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "outside").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.mark.parametrize("close", [True, False], ids=["response-closed", "client-gone"])
def test_a_hostile_run_name_writes_nothing_outside_and_leaves_nothing_behind(hostile_store, private_tmp, close):
    db, ids = hostile_store
    app = create_app(db)
    client = app.server.test_client()
    r = client.get("/download/perfetto", query_string={"run": str(ids[0]), "steps": "0:2"})
    assert r.status_code == 200
    assert r.headers["Content-Disposition"] == "attachment; filename=outside_x.perfetto-trace"
    assert len(r.data) > 100
    if close:
        r.close()
    assert not (private_tmp.parent / "outside" / "x.perfetto-trace").exists()
    assert list((private_tmp.parent / "outside").iterdir()) == []
    assert list(private_tmp.iterdir()) == []  # no folder left, even before the response is closed
    app.scprof_access.close()


def test_control_characters_in_a_name_do_not_reach_the_file_name(hostile_store, private_tmp):
    db, ids = hostile_store
    app = create_app(db)
    r = app.server.test_client().get("/download/perfetto", query_string={"run": str(ids[1])})
    assert r.headers["Content-Disposition"] == "attachment; filename=a_31mb_c_d.perfetto-trace"
    r.close()
    assert list(private_tmp.iterdir()) == []
    app.scprof_access.close()


def test_a_failed_download_leaves_nothing_behind(ui_db, private_tmp):
    app = create_app(ui_db)
    r = app.server.test_client().get("/download/perfetto", query_string={"run": "no-such-run"})
    assert r.status_code == 400 and b"no-such-run" in r.data
    assert list(private_tmp.iterdir()) == []
    app.scprof_access.close()


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("baseline", "baseline"),
        ("../../etc/passwd", "etc_passwd"),
        ("..", "run-1"),
        (".hidden", "hidden"),
        ("a b/c\\d", "a_b_c_d"),
        ("x" * 200, "x" * 80),
        ("", "run-1"),
        ("名前", "run-1"),
        (None, "run-1"),
    ],
)
def test_safe_file_stems(name, stem):
    from ui.downloads import safe_file_stem

    assert safe_file_stem(name, "run-1") == stem


@pytest.mark.parametrize(
    "q",
    ["UPDATE EXTENSIONS", "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1", "SELECT 1; SELECT 2", "x" * 100_001],
)
def test_the_sql_download_refuses_with_400(ui_db, q):
    app = create_app(ui_db)
    r = app.server.test_client().get("/download/sql.csv", query_string={"q": q, "rows": "many"})
    assert r.status_code == 400 and r.data.startswith(b"query: ") and r.data.count(b"\n") == 1
    app.scprof_access.close()


def test_the_sql_console_shows_long_cells_shortened(ro_store):
    page = render_sql(ro_store, {"q": "SELECT repeat('é', 5000) AS s, 7 AS n", "rows": "1"})
    cells = _cells(page)
    assert cells == ["é" * SQL_SHOWN_CHARS + " …", "7"]


def test_the_sql_console_caps_results_in_bytes(ro_store):
    page = render_sql(ro_store, {"q": "SELECT repeat('x', 1000000) AS s FROM range(20)", "rows": 100})
    info = find(page, "sql-info").children
    assert info.startswith("8 row(s)") and "capped at 8 MiB" in info  # 8 of 1,000,004 bytes fit in 8 MiB


def _cells(page) -> list[str]:
    """The result's cells, row by row, as the browser shows them (ui/assets/data_views.js)."""
    spec = json.loads(getattr(find(page, "sql-result"), "data-table"))
    return [spec["null"] if v is None else v for row in spec["rows"] for v in row]

"""Dash's page loads @babel/polyfill (core-js 2 and regenerator-runtime, for browsers without ES2015)
before its renderer; in chromium it is 0.1 s of script on every first view (the target: a first view
within 1 s) and it replaces native functions (String.prototype.trim). The UI serves the one part
Dash's code uses, the global regeneratorRuntime, from the vendored regenerator-runtime instead
(ui/app.py ScprofDash); the pages work without the rest (the browser sweep, and here)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from tests.ui.browserkit import requests_of, settle
from ui.app import create_app

VENDOR = Path(__file__).parents[2] / "ui" / "assets" / "vendor"
RUNTIME = VENDOR / "regenerator-runtime.js"


def scripts(client, path: str = "/runs") -> list[str]:
    index = client.get(path).get_data(as_text=True)
    return [s.split("?")[0] for s in re.findall(r'<script src="([^"]+)"', index)]


def test_the_index_loads_regenerator_runtime_where_dash_had_its_polyfill(tmp_path):
    client = create_app(str(tmp_path / "none.duckdb")).server.test_client()
    srcs = scripts(client)
    assert not [s for s in srcs if "polyfill" in s]
    assert srcs[0] == "/assets/vendor/regenerator-runtime.js"  # before React and Dash's renderer
    assert any("dash_renderer" in s for s in srcs[1:]) and any("react-dom" in s for s in srcs[1:])
    served = client.get(srcs[0])
    assert served.status_code == 200 and served.get_data() == RUNTIME.read_bytes()


def test_the_index_leaves_out_dash_tables_script_which_no_page_uses(tmp_path):
    """Dash adds dash_table's loader to every page (`import dash` defines DataTable); the UI draws
    no DataTable, so the page does without it (the browser sweep: no page misses a component)."""
    client = create_app(str(tmp_path / "none.duckdb")).server.test_client()
    srcs = scripts(client)
    assert any("dash_core_components" in s for s in srcs) and any("dash_html_components" in s for s in srcs)
    assert not [s for s in srcs if "dash_table" in s]
    ui = Path(__file__).parents[2] / "ui"
    assert not [
        p
        for p in ui.rglob("*.py")
        if re.search(r"dash_table\.|import.*\bdash_table\b|DataTable\(", p.read_text(encoding="utf-8"))
    ]


def test_the_vendored_runtime_is_the_npm_package_with_its_license():
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    assert hashlib.sha256(RUNTIME.read_bytes()).hexdigest() in readme  # regenerator-runtime 0.13.11's runtime.js
    assert (VENDOR / "regenerator-runtime.LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    # what Dash's renderer calls on it
    renderer = Path(os.path.dirname(__import__("dash").__file__)) / "dash-renderer" / "build" / "dash_renderer.min.js"
    used = set(re.findall(r"regeneratorRuntime\.(\w+)", renderer.read_text(encoding="utf-8")))
    defined = set(re.findall(r"exports\.(\w+) =", RUNTIME.read_text(encoding="utf-8")))
    assert used and used <= defined


@pytest.mark.parametrize("path", ["/runs", "/overview", "/sql"])
def test_pages_run_without_the_polyfill(served_ui, page, path):
    """No console error (the `page` fixture fails on one), data and graphs in, native trim."""
    url, ids = served_ui
    fetched = requests_of(page)
    page.goto(f"{url}{path}?run={ids['baseline']}")
    page.wait_for_selector("#page .page-body")
    settle(page)
    if path == "/overview":
        page.wait_for_selector("#page .js-plotly-plot .main-svg")
    assert page.evaluate("() => typeof regeneratorRuntime.mark === 'function'")
    assert page.evaluate("() => String.prototype.trim.toString().includes('[native code]')")
    assert not [u for u in fetched if "polyfill" in u]
    assert page.locator("#page .page-body").first.inner_text().strip()

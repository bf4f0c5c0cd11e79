"""The UI's graphs are drawn by plotly.js's cartesian bundle (ui/assets/vendor/, 1.5 MB) instead
of the full bundle (4.8 MB) that dcc.Graph loads by default (issue 19: first view within 1 s):
it is the Python plotly package's plotly.js version, it is not loaded on every page, and in the
browser the graphs are drawn with it and the full bundle is never fetched."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from tests.ui.browserkit import settle
from ui.app import create_app

VENDOR = os.path.join(os.path.dirname(__file__), "..", "..", "ui", "assets", "vendor")
BUNDLE = os.path.join(VENDOR, "plotly-cartesian.min.js")


def version(text: str) -> str:
    return re.search(r"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)", text).group(1)


def test_the_bundle_is_the_plotly_packages_version_with_its_license():
    from plotly.offline import get_plotlyjs_version

    with open(BUNDLE, encoding="utf-8") as f:
        head = f.read(300)
    assert "cartesian" in head and version(head) == get_plotlyjs_version()
    with open(os.path.join(VENDOR, "plotly-cartesian.LICENSE"), encoding="utf-8") as f:
        assert f.read().startswith("MIT License")
    with open(os.path.join(VENDOR, "README.md"), encoding="utf-8") as f:  # the file as published
        assert hashlib.sha256(Path(BUNDLE).read_bytes()).hexdigest() in f.read()


def test_the_bundle_is_served_but_not_on_every_page(tmp_path):
    client = create_app(str(tmp_path / "none.duckdb")).server.test_client()
    index = client.get("/runs").get_data(as_text=True)
    assert "plotly_loader.js" in index and "vendor/" not in index and "plotly-cartesian" not in index
    served = client.get("/assets/vendor/plotly-cartesian.min.js")
    assert served.status_code == 200 and served.get_data()[:300].decode().find("cartesian") > 0


@pytest.mark.parametrize("path", ["/overview", "/memory"])
def test_graphs_are_drawn_by_the_cartesian_bundle(served_ui, page, path):
    """A first view and a click to another graph page: graphs drawn, only the cartesian bundle fetched."""
    url, ids = served_ui
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto(f"{url}{path}?run={ids['baseline']}")
    page.wait_for_selector("#page .js-plotly-plot .main-svg")
    settle(page)
    assert page.evaluate("() => typeof window.Plotly.react === 'function' && window.Plotly.version") == "4.1.1"
    page.click("#nav-sparsecore")
    page.wait_for_selector("#sparsecore-body .js-plotly-plot .main-svg")
    settle(page)
    bundles = [u.split("?")[0].rsplit("/", 1)[-1] for u in fetched if re.search(r"plotly[^/?]*\.min\.js", u)]
    assert bundles == ["plotly-cartesian.min.js"]


@pytest.fixture(scope="module")
def served_ui(ui_db):
    from tests.ui.browserkit import run_ids, serve

    with serve(ui_db) as (url, app):
        yield url, run_ids(app)


def test_timeline_loads_no_plotly(served_ui, page):
    url, ids = served_ui
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto(f"{url}/timeline?run={ids['baseline']}")
    page.wait_for_function("() => window.scprofTrace && window.scprofTrace.ready")
    settle(page)
    assert not [u for u in fetched if re.search(r"plotly(-cartesian)?\.min\.js", u)]

"""The UI's graphs are drawn by plotly.js built with the trace types the UI draws
(ui/assets/vendor/plotly-scprof.min.js, 1.2 MB, built by tools/plotly_bundle/) instead of the full
bundle (4.8 MB) that dcc.Graph loads by default: it is the Python plotly package's plotly.js
version, served the way Dash serves an app's own plotly.js (a script in the assets folder, which
defines window.Plotly before dcc.Graph asks for it), and has every trace type the pages draw."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from tests.ui.browserkit import requests_of, settle
from ui.app import create_app

VENDOR = os.path.join(os.path.dirname(__file__), "..", "..", "ui", "assets", "vendor")
BUNDLE = os.path.join(VENDOR, "plotly-scprof.min.js")
BUNDLE_RE = r"plotly[^/?]*\.min\.js"
# The page's graphs: [top in px, drawn] for each (an expression).
GRAPHS = """[...document.querySelectorAll('#page .dash-graph')].map(g =>
  [Math.round(g.getBoundingClientRect().top), !!g.querySelector('.main-svg')])"""
GRAPHS_JS = f"() => {GRAPHS}"


def version(text: str) -> str:
    return re.search(r"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)", text).group(1)


def test_the_bundle_is_the_plotly_packages_version_with_its_license():
    from plotly.offline import get_plotlyjs_version

    with open(BUNDLE, encoding="utf-8") as f:
        head = f.read(300)
    assert "scprof" in head and version(head) == get_plotlyjs_version()
    with open(os.path.join(VENDOR, "plotly.LICENSE"), encoding="utf-8") as f:
        assert f.read().startswith("MIT License")
    with open(os.path.join(VENDOR, "README.md"), encoding="utf-8") as f:  # the file as built
        assert hashlib.sha256(Path(BUNDLE).read_bytes()).hexdigest() in f.read()
    build = Path(__file__).parents[2] / "tools" / "plotly_bundle" / "package.json"
    assert f'"plotly.js": "{get_plotlyjs_version()}"' in build.read_text()  # what it is built from


def test_the_bundle_asks_chromium_to_compile_it_off_the_main_thread():
    """V8's explicit compile hint is the bundle's first line, as tools/plotly_bundle/build.mjs
    writes it: without it chromium compiles each function on the page's main thread when a graph
    first calls it (230-260 ms of a graph page's first view here, against about 40 ms)."""
    with open(BUNDLE, encoding="utf-8") as f:
        assert f.readline() == "//# allFunctionsCalledOnLoad\n"
    build = Path(__file__).parents[2] / "tools" / "plotly_bundle" / "build.mjs"
    assert "const banner = `//# allFunctionsCalledOnLoad\n" in build.read_text()


def test_every_page_loads_the_bundle_as_an_asset(tmp_path):
    client = create_app(str(tmp_path / "none.duckdb")).server.test_client()
    index = client.get("/runs").get_data(as_text=True)
    assert re.findall(r"/assets/(vendor/[^\"?]+)", index) == ["vendor/plotly-scprof.min.js"]
    served = client.get("/assets/vendor/plotly-scprof.min.js")
    assert served.status_code == 200 and served.get_data()[:300].decode().find("scprof") > 0


@pytest.mark.parametrize("path", ["/overview", "/memory"])
def test_graphs_are_drawn_by_the_scprof_bundle(served_ui, page, path):
    """A first view and a click to another graph page: graphs drawn, only the scprof bundle fetched."""
    url, ids = served_ui
    fetched = requests_of(page)
    page.goto(f"{url}{path}?run={ids['baseline']}")
    page.wait_for_selector("#page .js-plotly-plot .main-svg")
    settle(page)
    assert page.evaluate("() => typeof window.Plotly.react === 'function' && window.Plotly.version") == "4.1.1"
    page.click("#nav-sparsecore")
    page.wait_for_selector("#sparsecore-body .js-plotly-plot .main-svg")
    settle(page)
    bundles = [u.split("?")[0].rsplit("/", 1)[-1] for u in fetched if re.search(BUNDLE_RE, u)]
    assert bundles == ["plotly-scprof.min.js"]


def test_every_trace_type_the_pages_draw_is_in_the_bundle(served_ui, page):
    """Each graph of the graph pages (and Compare's) has only trace types the bundle registers: a
    type left out would be drawn as an empty plot."""
    url, ids = served_ui
    views = [f"/{p}?run={ids['baseline']}" for p in ("overview", "memory", "sparsecore")]
    views.append(f"/compare?base={ids['baseline']}&cand={ids['tuned']}")
    seen: set[str] = set()
    for view in views:
        page.goto(url + view)
        page.wait_for_function(f"() => ({GRAPHS}).length && ({GRAPHS}).every(g => g[1])")
        types = page.evaluate("""() => [...document.querySelectorAll('#page .js-plotly-plot')]
            .flatMap(g => g.data.map(t => t.type || 'scatter'))""")
        known = set(page.evaluate("() => Object.keys(window.Plotly.PlotSchema.get().traces)"))
        assert set(types) <= known, (view, set(types) - known)
        seen |= set(types)
    assert {"bar", "scatter"} <= seen  # the check saw the pages' figures

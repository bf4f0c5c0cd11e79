"""The UI's graphs are drawn by plotly.js built with the trace types the UI draws
(ui/assets/vendor/plotly-scprof.min.js, 1.2 MB, built by tools/plotly_bundle/) instead of the full
bundle (4.8 MB) that dcc.Graph loads by default (the target: a first view within 1 s): it is the
Python plotly package's plotly.js version, it is not loaded with every page, it is run ahead on the
pages without graphs (not the trace viewer's), and graphs out of view are drawn after the first
view."""

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
# True once the bundle has run (window.Plotly is then a value, no longer the loader's getter).
PLOTLY_RAN_JS = "() => { const p = Object.getOwnPropertyDescriptor(window, 'Plotly'); return !!(p && p.value) }"
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


def test_the_bundle_is_served_but_not_on_every_page(tmp_path):
    client = create_app(str(tmp_path / "none.duckdb")).server.test_client()
    index = client.get("/runs").get_data(as_text=True)
    assert "plotly_loader.js" in index and "plotly-scprof" not in index
    assert re.findall(r"vendor/[^\"?]+", index) == ["vendor/regenerator-runtime.js"]  # test_no_polyfill.py
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


def test_graphs_out_of_view_are_drawn_when_scrolled_to(served_ui, page):
    """On the Overview in a 600 px high window, with the browser never idle (requestIdleCallback
    never calls back), the graphs above the fold are drawn and those below are not, until scrolled
    to; each then shows every trace of its figure."""
    url, ids = served_ui
    page.add_init_script("window.requestIdleCallback = () => 0;")
    page.set_viewport_size({"width": 1400, "height": 600})
    page.goto(f"{url}/overview?run={ids['baseline']}")
    page.wait_for_function(f"() => ({GRAPHS}).filter(g => g[0] < 600).every(g => g[1])")
    settle(page)
    graphs = page.evaluate(GRAPHS_JS)
    below = [drawn for top, drawn in graphs if top >= 600]
    assert below and not any(below), graphs
    for i in range(len(graphs)):
        page.evaluate(f"() => document.querySelectorAll('#page .dash-graph')[{i}].scrollIntoView()")
        page.wait_for_function(f"() => ({GRAPHS})[{i}][1]")
    counts = page.evaluate("""() => [...document.querySelectorAll('#page .js-plotly-plot')].map(g =>
        [g.data.length, g.querySelectorAll('.trace').length])""")
    assert len(counts) == len(graphs) and all(n == drawn for n, drawn in counts), counts


def test_graphs_out_of_view_are_drawn_when_the_page_is_idle(served_ui, page):
    """Not scrolled to, the graphs below the fold are drawn once the browser is idle."""
    url, ids = served_ui
    page.set_viewport_size({"width": 1400, "height": 600})
    page.goto(f"{url}/overview?run={ids['baseline']}")
    page.wait_for_function(f"() => ({GRAPHS}).length > 2 && ({GRAPHS}).every(g => g[1])")
    assert page.evaluate("() => window.scrollY") == 0


def test_runs_page_runs_the_bundle_when_idle_and_the_timeline_never(served_ui, page):
    """The Runs page runs the bundle once its data is in (a click to a graph page then finds it
    ready); the trace viewer's page neither fetches nor runs it."""
    url, ids = served_ui
    fetched = requests_of(page)
    page.goto(f"{url}/runs")
    page.wait_for_function(PLOTLY_RAN_JS)
    assert [u for u in fetched if re.search(BUNDLE_RE, u)]
    page.click("#nav-overview")
    page.wait_for_selector("#page .js-plotly-plot .main-svg")
    assert len([u for u in fetched if re.search(BUNDLE_RE, u)]) == 1  # not fetched again


def test_timeline_loads_no_plotly(served_ui, page):
    url, ids = served_ui
    fetched = requests_of(page)
    page.goto(f"{url}/timeline?run={ids['baseline']}")
    page.wait_for_function("() => window.scprofTrace && window.scprofTrace.ready")
    settle(page)
    page.wait_for_timeout(1000)  # idle time, in which the Runs page would have run the bundle
    assert not [u for u in fetched if re.search(BUNDLE_RE, u)]
    assert not page.evaluate(PLOTLY_RAN_JS)


# A stand-in for the bundle that records what is drawn: [graph id, figure] per Plotly.react.
RECORDING_PLOTLY = """window.__drawn = [];
window.Plotly = {
  react: function (gd, figure) { window.__drawn.push(gd.id + ':' + figure); gd._fullLayout = {}; return Promise.resolve(gd); },
  newPlot: function () { return Promise.resolve(); },
  purge: function () {},
};"""
HARNESS = """<!doctype html><html><head><link rel="icon" href="data:,"></head><body style="margin:0">
<div id="top" style="height:100px"></div><div style="height:3000px"></div>
<div id="low" style="height:100px"></div><div id="lower" style="height:100px"></div>
<script src="plotly_loader.js"></script></body></html>"""


@pytest.fixture
def loader_harness(tmp_path):
    """ui/assets/plotly_loader.js served beside RECORDING_PLOTLY as its bundle; the harness's URL."""
    import functools
    import http.server
    import shutil
    import threading

    shutil.copy(Path(VENDOR).parent / "plotly_loader.js", tmp_path / "plotly_loader.js")
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "plotly-scprof.min.js").write_text(RECORDING_PLOTLY)
    (tmp_path / "harness.html").write_text(HARNESS)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/harness.html"
    server.shutdown()


def test_a_waiting_graph_draws_only_its_newest_figure(loader_harness, page):
    """Out of view, a graph's figures wait and only the newest is drawn when it comes into view; a
    figure given once the graph is in view is drawn at once and replaces the one waiting, which is
    never drawn after it. The browser is never idle here (requestIdleCallback never calls back)."""
    page.add_init_script("window.requestIdleCallback = () => 0;")
    page.goto(loader_harness)
    drawn = page.evaluate("""async () => {
      const P = await window.Plotly;
      const [top, low, lower] = ['top', 'low', 'lower'].map(id => document.getElementById(id));
      const pending = [P.react(top, 'T'), P.react(low, 'A'), P.react(lower, 'C1'), P.react(lower, 'C2')];
      const before = window.__drawn.slice();
      low.scrollIntoView();  // in view; the IntersectionObserver has not called back yet
      pending.push(P.react(low, 'B'));
      await Promise.all(pending);
      await new Promise(r => setTimeout(r, 500));  // any callback the observer still had
      return [before, window.__drawn];
    }""")
    assert drawn == [["top:T"], ["top:T", "low:B", "lower:C2"]]


def test_graphs_waiting_on_a_page_being_left_are_not_drawn(loader_harness, page):
    """Graphs waiting out of view are drawn when the browser is idle, but not once the user has
    clicked through to another page (the URL's path changed): drawing them would hold it up."""
    page.goto(loader_harness)
    drawn = page.evaluate("""async () => {
      const P = await window.Plotly;
      const [low, lower] = ['low', 'lower'].map(id => document.getElementById(id));
      await P.react(low, 'A');  // drawn when idle
      P.react(lower, 'B');
      history.pushState({}, '', '/another-page');
      await new Promise(r => setTimeout(r, 2000));  // idle moments, the longest wait 1.5 s
      return window.__drawn;
    }""")
    assert drawn == ["low:A"]

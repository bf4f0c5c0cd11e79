"""The floor under the UI's first views: how long Dash and Plotly alone take to show a page in
Debian chromium on this machine, measured as benchmarks/ui_browser.py measures the UI's pages
(a fresh server and a new browser context per visit, the tab opened TAB_READY_S before, the time
in the page's clock from navigation start until Dash has nothing pending and the page is shown).

Three minimal Dash apps, none reading a store:
- text: a heading and 20 paragraphs (Dash's own start: React, the renderer, the component suites);
- graph: the same and one dcc.Graph of 50 bars, Plotly loaded as dcc.Graph does by default (the
  full plotly.js bundle);
- graph_scprof: the same graph with the UI's own Plotly bundle as an asset script, as the UI serves
  it (ui/assets/vendor: plotly.js built with the four trace types the UI draws).
graph_scprof is about the soonest a UI page can show a graph.

Usage: python benchmarks/ui_floor.py [--repeat 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import ui_browser  # noqa: E402

MODES = ("text", "graph", "graph_scprof")
SHOWN_JS = """() => {
  const s = window.store && window.store.getState();
  if (!s || s.isLoading || (s.pendingCallbacks || []).length) return false;
  if (!document.querySelector('#page .page-body')) return false;
  const g = document.querySelector('#page .dash-graph');
  if (g && !g.querySelector('.main-svg')) return false;
  if (window.__shown_ms === undefined) window.__shown_ms = performance.now();
  return true;
}"""


def serve(mode: str, port: int, assets: str) -> None:
    """Serve the minimal app of `mode` on 127.0.0.1:`port` (in its own process)."""
    import logging

    import plotly.graph_objects as go
    from dash import Dash, dcc, html

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = Dash(__name__, assets_folder=assets)
    children = [html.H2("Floor"), html.Div([html.P(f"row {i}") for i in range(20)], className="page-body")]
    if mode != "text":
        figure = go.Figure(go.Bar(x=list(range(50)), y=[i * i for i in range(50)]))
        children.append(dcc.Graph(figure=figure, className="dash-graph"))
    app.layout = html.Div(html.Div(children, id="page"))
    app.run(host="127.0.0.1", port=port, debug=False)


def assets_for(mode: str, workdir: str) -> str:
    """The app's assets folder: the UI's Plotly bundle for graph_scprof, else none."""
    folder = os.path.join(workdir, mode)
    os.makedirs(os.path.join(folder, "vendor"), exist_ok=True)
    if mode == "graph_scprof":
        shutil.copy(REPO / "ui" / "assets" / "vendor" / "plotly-scprof.min.js", os.path.join(folder, "vendor"))
    return folder


def first_view(browser, mode: str, assets: str) -> float:
    """One first visit of the `mode` app on a fresh server: ms from navigation start."""
    port = ui_browser.free_port()
    cmd = [sys.executable, __file__, "--serve", mode, "--port", str(port), "--assets", assets]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the {mode} app did not start") from None
                time.sleep(0.2)
        context = browser.new_context(viewport={"width": 1600, "height": 1000})
        try:
            page = context.new_page()
            page.wait_for_timeout(ui_browser.TAB_READY_S * 1000)
            page.goto(f"http://127.0.0.1:{port}/", wait_until="commit")
            page.wait_for_function(SHOWN_JS, timeout=60_000, polling=10)
            return float(page.evaluate("() => window.__shown_ms"))
        finally:
            context.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--assets", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.assets)
        return
    from playwright.sync_api import sync_playwright

    workdir = tempfile.mkdtemp(prefix="scprof-ui-floor-")
    times: dict[str, list[float]] = {m: [] for m in MODES}
    loads = [ui_browser.load()]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ui_browser.CHROMIUM, args=ui_browser.CHROMIUM_ARGS)
        for _ in range(args.repeat):  # the modes alternate: the machine's load falls on each alike
            for mode in MODES:
                times[mode].append(round(first_view(browser, mode, assets_for(mode, workdir)), 1))
            loads.append(ui_browser.load())
        browser.close()
    shutil.rmtree(workdir, ignore_errors=True)
    for mode, ms in times.items():
        print(
            f"{mode:13s} first view {statistics.median(ms):6.0f} ms (median; {min(ms):.0f}-{max(ms):.0f})",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                "benchmark": "ui_floor",
                "first_view_ms": {
                    m: {"median": round(statistics.median(v), 1), "min": min(v), "max": max(v), "all": v}
                    for m, v in times.items()
                },
                "target_ms": ui_browser.TARGET_MS,
                "cpus": os.cpu_count(),
                "load": round(statistics.mean(loads), 2),
            }
        )
    )


if __name__ == "__main__":
    main()

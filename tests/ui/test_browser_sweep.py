"""Every page of the UI on every kind of run, in headless Chromium (as tests/ui/test_browser.py):
an emulated ok run, a failed compile, a limits-too-low run, a GPU-like and a CPU XProf capture
and a capture without steps. Each view must settle without a console or page error and without
the UI's error wording ("internal error", an error box, a traceback); an unknown run in the URL
must be named as unknown, never replaced by another run. One test per sweep reports every
problem at once; a screenshot per view lands in test-artifacts/screenshots/sweep/ (not committed)
for people to look at.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.tracekit import REPO
from tests.ui.browserkit import TIMEOUT_MS, serve
from tests.ui.sweep_store import sweep_db  # noqa: F401 - the fixture

SWEEP_SHOTS = REPO / "test-artifacts" / "screenshots" / "sweep"
# The pages showing one run (the top bar's links carry `run` to them); /runs and /sql show the store.
RUN_PAGES = ("overview", "timeline", "sparsecore", "memory", "ops", "input", "findings", "tuning")
# The UI's own error wording (ui/render.py's error box, ui/app.py's internal error) and Python's.
ERROR_TEXT = re.compile(r"internal error|Traceback \(most recent call last\)")
UNKNOWN_REFS = ("999", "no_such_run")
GRAPH_PAGES = ("overview", "sparsecore", "memory")  # with Compare: the pages that draw graphs
# Every graph of the page drawn (read once they all are).
ALL_DRAWN_JS = """() => [...document.querySelectorAll('#page .dash-graph')].every(g => g.querySelector('.main-svg'))
                       && !document.querySelector('#page .dash-graph--pending')"""
# Every axis's tick labels are drawn where they fall (ui/render.TEMPLATE: ticklabeloverflow "allow",
# Plotly hides none), so each must lie inside its graph.
LABELS_OUTSIDE_JS = """() => [...document.querySelectorAll('#page .js-plotly-plot')].filter(g => g._fullLayout).flatMap(gd => {
  const fl = gd._fullLayout, name = (gd.closest('[id]') || {}).id, box = gd.getBoundingClientRect(), out = [];
  for (const ax of Object.keys(fl).filter(k => /^[xy]axis\\d*$/.test(k)).map(k => fl[k]))
    if (ax.ticklabeloverflow && ax.ticklabeloverflow !== 'allow') out.push(`${name}: ${ax._id} ticklabeloverflow ${ax.ticklabeloverflow}`);
  for (const t of gd.querySelectorAll('.xtick text, .ytick text, .x2tick text, .y2tick text')) {
    const r = t.getBoundingClientRect();
    if (!r.width || getComputedStyle(t).display === 'none') continue;
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
      out.push(`${name}: tick label '${t.textContent}' outside its graph`);
  }
  return out;
})"""
# A bar under 1 px wide along its category axis is not seen: a graph drawing them shows nothing
# (a long run's bar per step, ui/render.step_series).
THIN_BARS_JS = """() => [...document.querySelectorAll('#page .js-plotly-plot')].filter(g => g._fullLayout).flatMap(gd => {
  const name = (gd.closest('[id]') || {}).id, out = [];
  for (const tr of gd.querySelectorAll('.barlayer .trace')) {
    const t = tr.__data__ && tr.__data__[0] && tr.__data__[0].trace;
    const across = b => (t && t.orientation === 'h' ? b.height : b.width);
    const bars = [...tr.querySelectorAll('.point path')].map(p => p.getBBox());
    const thin = bars.filter(b => across(b) < 1).length;
    if (thin) out.push(`${name}: ${thin} of ${bars.length} bars of '${t && t.name}' under 1 px wide`);
  }
  return out;
})"""
# Text a user must be able to read or click (the run header, the toolbars' buttons and notes):
# each is probed every 8 px along its middle for something drawn over it (a slider's tooltip).
COVERED_JS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('#page h2, .run-header > *, .toolbar a, .toolbar span')) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || r.bottom > window.innerHeight) continue;
    for (let x = r.left + 2; x < r.right - 1; x += 8) {
      const hit = document.elementFromPoint(x, r.top + r.height / 2);
      if (hit && !el.contains(hit) && !hit.contains(el)) {
        out.push(`covered: '${el.innerText.slice(0, 40)}' under ${hit.tagName}.${hit.className}`);
        break;
      }
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def sweep_server(sweep_db):  # noqa: F811 - the fixture
    """The Dash app on the sweep's store, and its runs {name: run_id}."""
    with serve(sweep_db) as (url, app):
        with app.scprof_access.open() as store:
            ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs ORDER BY run_id")}
        yield url, ids


class Visitor:
    """One browser page reused for every view; records what each view reported."""

    def __init__(self, browser, base: str):  # noqa: F811 - the fixture's value
        self.base = base
        self.context = browser.new_context(viewport={"width": 1600, "height": 1000})
        self.pg = self.context.new_page()
        self.pg.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.pg.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.pg.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def open(self, url: str, shot: str) -> tuple[str, list[str]]:
        """Open `url`, let Dash settle, save a screenshot; (the page's text, the problems seen)."""
        self.errors.clear()
        problems: list[str] = []
        try:
            self.pg.goto(self.base + url)
            settle(self.pg)
        except Exception as e:  # noqa: BLE001 - a view that never settles is one of the problems
            problems.append(f"did not settle: {type(e).__name__}: {str(e).splitlines()[0]}")
        text = self.pg.inner_text("body")
        problems += self.errors
        problems += [f"error box: {t}" for t in self.pg.locator(".error-box").all_inner_texts()]
        problems += [f"error text: {m.group(0)!r}" for m in ERROR_TEXT.finditer(text)]
        problems += self.pg.evaluate(COVERED_JS)
        if "No runs in this store" in text:
            problems.append("says the store has no runs")
        SWEEP_SHOTS.mkdir(parents=True, exist_ok=True)
        self.pg.screenshot(path=str(SWEEP_SHOTS / f"{shot}.png"), full_page=True)
        return text, problems


def settle(pg) -> None:
    """Until Dash has no callback pending and no loading spinner shows."""
    pg.wait_for_load_state("networkidle")
    pg.wait_for_function(
        """() => window.store && !window.store.getState().isLoading
               && !document.querySelector('[data-dash-is-loading="true"]')
               && !document.querySelector('.dash-spinner')
               && document.querySelector('#page h2')""",
        timeout=TIMEOUT_MS,
    )


@pytest.fixture(scope="module")
def visitor(browser, sweep_server):  # noqa: F811 - the fixture
    v = Visitor(browser, sweep_server[0])
    yield v
    v.context.close()


def _report(failures: dict[str, list[str]], views: int, started: float) -> str:
    lines = [f"{len(failures)} of {views} views failed ({time.monotonic() - started:.0f} s):"]
    for view, problems in failures.items():
        lines.append(f"  {view}:")
        lines += [f"    - {p[:300]}" for p in dict.fromkeys(problems)]
    return "\n".join(lines)


def test_every_page_on_every_run(sweep_server, visitor):
    """Every page × every kind of run: no console/page error, no error text, the run it was asked for."""
    _, ids = sweep_server
    started = time.monotonic()
    views: list[tuple[str, str, str | None]] = [("/runs", "runs", None), ("/sql", "sql", None)]
    for name, run in ids.items():
        views += [(f"/{p}?run={run}", f"{p}-{name}", name) for p in RUN_PAGES]
        views.append((f"/compare?run={run}", f"compare-{name}", None))  # the top bar's Compare link
        if name != "emulated_ok":
            views.append((f"/compare?base={ids['emulated_ok']}&cand={run}", f"compare-ok-vs-{name}", None))
    failures: dict[str, list[str]] = {}
    for url, shot, name in views:
        text, problems = visitor.open(url, shot)
        if name is not None and f"{name} (#{ids[name]})" not in text:
            problems.append(f"does not show run {name} (#{ids[name]})")
        if problems:
            failures[f"{url} ({shot})"] = problems
    assert not failures, _report(failures, len(views), started)


def test_unknown_runs_are_named_as_unknown(sweep_server, visitor):
    """`?run=999` and `?run=no_such_run` (and unknown compare sides) say the run is not in this store."""
    _, ids = sweep_server
    started = time.monotonic()
    views = [(f"/{p}?run={ref}", f"unknown-{p}-{ref}", ref) for p in RUN_PAGES for ref in UNKNOWN_REFS]
    views += [
        (f"/compare?base={ref}&cand={ids['emulated_ok']}", f"unknown-compare-base-{ref}", ref) for ref in UNKNOWN_REFS
    ]
    views += [
        (f"/compare?base={ids['emulated_ok']}&cand={ref}", f"unknown-compare-cand-{ref}", ref) for ref in UNKNOWN_REFS
    ]
    failures: dict[str, list[str]] = {}
    for url, shot, ref in views:
        text, problems = visitor.open(url, shot)
        if not re.search(rf"run '?{re.escape(ref)}'? is not in this store", text, re.IGNORECASE):
            problems.append(f"does not name run {ref!r} as unknown")
        if problems:
            failures[f"{url} ({shot})"] = problems
    assert not failures, _report(failures, len(views), started)


def test_every_graph_holds_its_labels_and_shows_its_bars(sweep_server, visitor):
    """Every graph of the graph pages, on every kind of run: its tick labels, which Plotly draws
    where they fall (no measuring of each to hide those past the graph's edge), all lie inside the
    graph; and no bar is too thin to be seen (a long run's steps are drawn as filled lines)."""
    _, ids = sweep_server
    started = time.monotonic()
    views = [(f"/{p}?run={run}", f"{p}-{name}") for name, run in ids.items() for p in GRAPH_PAGES]
    views += [
        (f"/compare?base={ids['emulated_ok']}&cand={run}", f"compare-ok-vs-{name}")
        for name, run in ids.items()
        if name != "emulated_ok"
    ]
    failures: dict[str, list[str]] = {}
    graphs = 0
    for url, shot in views:
        _, problems = visitor.open(url, shot)
        visitor.pg.wait_for_function(ALL_DRAWN_JS, timeout=TIMEOUT_MS)
        graphs += visitor.pg.evaluate("() => document.querySelectorAll('#page .js-plotly-plot').length")
        problems += visitor.pg.evaluate(LABELS_OUTSIDE_JS)
        problems += visitor.pg.evaluate(THIN_BARS_JS)
        if problems:
            failures[f"{url} ({shot})"] = problems
    assert graphs >= 3 * len(ids)  # the pages drew their graphs: the check had something to check
    assert not failures, _report(failures, len(views), started)

"""The pages' render functions on a small store of two recorded runs: what each returns."""

from __future__ import annotations

import json

import numpy as np
import plotly
import pytest

from scprof.cli import build_parser
from ui import data, figures, state
from ui.app import create_app
from ui.pages.compare import render_compare, render_compare_verdict
from ui.pages.findings import render_findings
from ui.pages.memory import render_memory
from ui.pages.overview import render_overview, render_overview_analysis
from ui.pages.runs import render_runs
from ui.pages.sparsecore import render_sparsecore
from ui.pages.sql import render_sql
from ui.pages.timeline_page import render_timeline
from ui.render import time_unit
from ui.routing import page_for
from ui.store_access import StoreAccess


def text_of(component) -> str:
    """All text in a Dash component tree (what a reader would see, roughly)."""
    if component is None:
        return ""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(text_of(c) for c in component)
    spec = getattr(component, "data-table", None)  # a table whose cells travel as data (data_views.js)
    if spec is not None:
        table = json.loads(spec)
        return " ".join(table["columns"] + [t if t is not None else table["null"] for r in table["rows"] for t in r])
    cards = getattr(component, "data-kpis", None)  # figure cards that travel as data (render.kpis)
    if cards is not None:
        return " ".join(f"{c['label']} {c['value']} {c['detail']}" for c in json.loads(cards))
    return text_of(getattr(component, "children", None))


def data_table_of(component) -> dict | None:
    """The first table in a tree whose cells travel as data (render.table without a link column,
    render.data_table): its spec, as ui/assets/data_views.js builds the table from it (columns, rows of
    cell texts, the columns' flags); None when there is none."""
    if isinstance(component, list | tuple):
        return next((t for t in (data_table_of(c) for c in component) if t is not None), None)
    if component is None or isinstance(component, str | int | float):
        return None
    spec = getattr(component, "data-table", None)
    return json.loads(spec) if spec is not None else data_table_of(getattr(component, "children", None))


def find(component, id_):
    """The component with id `id_` in a tree, or None."""
    if isinstance(component, list | tuple):
        return next((x for x in (find(c, id_) for c in component) if x is not None), None)
    if getattr(component, "id", None) == id_:
        return component
    children = getattr(component, "children", None)
    return find(children, id_) if children is not None and not isinstance(children, str) else None


def payload(obj) -> int:
    return len(json.dumps(obj, cls=plotly.utils.PlotlyJSONEncoder))


@pytest.fixture
def runs(ro_store):
    ids = {r["name"]: r["run_id"] for r in ro_store.rows("SELECT run_id, name FROM runs")}
    return ids["baseline"], ids["tuned"]


def test_runs_listing_filters_and_sorts(ro_store):
    rows = data.runs(ro_store)
    assert [r["name"] for r in rows] == ["baseline", "tuned"]
    assert all(r["mean_step_ps"] > 0 and r["hardware"].startswith("v5p") for r in rows)
    assert [r["name"] for r in data.runs(ro_store, "tun")] == ["tuned"]
    assert [r["name"] for r in data.runs(ro_store, sort="mean_step_ps", descending=True)][0] == "baseline"
    body = render_runs(ro_store, {"filter": "nothing-matches"})
    assert "No run matches" in text_of(body)


def test_overview_kpis_carry_units(ro_store, runs):
    base, _ = runs
    steps = data.clamp_steps(data.step_bounds(ro_store, base), None)
    kpis = {k.label: k for k in data.overview_kpis(ro_store, base, steps)}
    assert kpis["step time mean"].unit == "ps" and kpis["step time mean"].value > 0
    assert kpis["SC minibatches per step"].value > 1  # the baseline's limits are too low
    assert kpis["HBM peak"].unit == "bytes" and "capacity" in kpis["HBM peak"].detail
    text = text_of(render_overview(ro_store, {"run": base, "steps": list(steps)}))
    assert "step time mean" in text and ("µs" in text or "ms" in text)


def test_overview_analysis_shows_breakdown_and_findings(ro_store, runs):
    base, _ = runs
    steps = data.clamp_steps(data.step_bounds(ro_store, base), None)
    text = text_of(render_overview_analysis(ro_store, {"run": base, "steps": list(steps)}))
    assert "Top findings" in text
    assert "Step time by category" in text
    # the headline cards are figures the analyzers really produce (a renamed figure would vanish)
    head, _ = figures.analysis_kpis(data.analysis(ro_store, base))
    sources = {k.source for k in head}
    assert {"idle_gaps.tensorcore.host.share", "overlap.overlap_share_of_sc", "stacking.tables"} <= sources
    assert "All analyzer figures" in text


def test_timeline_mounts_the_trace_viewer_on_the_steps_window(ro_store, runs):
    """The page ships no events: a mount point for the canvas viewer with the run and the window of
    the chosen steps (the device chips' step spans), or the URL's window when it has one."""
    base, _ = runs
    body, _ = render_timeline(ro_store, {"run": base, "steps": [1, 2], "t0": None, "t1": None})
    assert body.className == "trace-viewer" and payload(body) < 2_000
    attrs = body.to_plotly_json()["props"]
    (ref,) = ro_store.rows(
        """SELECT min(start_ps) AS t0, max(end_ps) AS t1 FROM step_spans WHERE run_id = ? AND chip >= 0
           AND source IN ('tensorcore_steps', 'device_steps') AND step BETWEEN 1 AND 2""",
        [base],
    )
    assert (attrs["data-run"], int(attrs["data-t0"]), int(attrs["data-t1"])) == (str(base), ref["t0"], ref["t1"])
    body, _ = render_timeline(ro_store, {"run": base, "steps": [0, 4], "t0": 100, "t1": 250})
    assert (body.to_plotly_json()["props"]["data-t0"], body.to_plotly_json()["props"]["data-t1"]) == ("100", "250")


def test_time_units():
    assert time_unit(5e12) == ("s", 1e12)
    assert time_unit(5e9) == ("ms", 1e9)
    assert time_unit(3e3) == ("ns", 1e3)


def test_sparsecore_heatmaps_against_limits(ro_store, runs):
    base, cand = runs
    steps = data.clamp_steps(data.step_bounds(ro_store, base), None)
    d = data.sparsecore(ro_store, base, steps, [])
    assert not d["empty"] and d["from_stats"]
    assert d["matrices"]["ids"].shape == (len(d["partitions"]), len(d["steps"]))
    assert np.nanmax(d["matrices"]["ids_ratio"]) > 1  # baseline overflows its compiled limits
    tuned = data.sparsecore(ro_store, cand, data.clamp_steps(data.step_bounds(ro_store, cand), None), [])
    assert np.nanmax(tuned["matrices"]["ids_ratio"]) <= 1
    text = text_of(render_sparsecore(ro_store, {"run": base, "steps": list(steps), "tables": [], "metric": "ids"}))
    assert "against the compiled limit" in text and "Per table" in text


def test_memory_peak_and_page(ro_store, runs):
    base, _ = runs
    peak = data.hbm_peak(ro_store, base)
    assert peak is not None and peak["peak"] > 0 and peak["parts"]
    assert abs(sum(peak["parts"].values()) - peak["peak"]) < 1
    steps = data.clamp_steps(data.step_bounds(ro_store, base), None)
    text = text_of(render_memory(ro_store, {"run": base, "steps": list(steps), "chips": [0]}))
    assert "HBM over time" in text and "of capacity" in text


def test_findings_render_every_field_generically(ro_store, runs):
    base, _ = runs
    report = data.analysis(ro_store, base)
    assert data.analysis(ro_store, base) is report  # cached
    text = text_of(render_findings(ro_store, {"run": base, "sev": ["critical", "warning", "info"]}))
    from analyzers.findings import group_findings

    for group in group_findings(report.findings):
        lead = group[0]  # a rule's findings share a card: its lead in full, the rest as rows
        assert lead.title in text and lead.recommendation in text
        for f in group[1:]:
            assert all(t in text for t in (f.entities or {}).get("tables") or [])
    assert "Analyzers run" in text


def test_compare_shows_the_verdict(ro_store, runs):
    base, cand = runs
    verdict = render_compare_verdict(ro_store, {"base": base, "cand": cand})
    word = find(verdict, "compare-verdict-word")
    assert word is not None and word.children in (
        "improved",
        "regressed",
        "no change",
        "inconclusive",
        "not enough steps",
    )
    text = text_of(render_compare(ro_store, {"base": base, "cand": cand}))
    assert "Step-time distributions" in text and "SparseCore side by side" in text
    assert "same run" in text_of(render_compare(ro_store, {"base": base, "cand": base}))
    # the two runs' step times in one set of bins: a run whose counted steps are all alike
    # (a short run) still draws a bar, not one too narrow to see on the shared axis
    hist = find(render_compare(ro_store, {"base": base, "cand": cand}), "compare-hist").figure.data
    assert len(hist) == 2 and hist[0].bingroup == hist[1].bingroup is not None


def test_sql_console_returns_rows_and_refuses_writes(ro_store):
    ok = render_sql(ro_store, {"q": "SELECT run_id, name FROM runs ORDER BY run_id", "rows": 1})
    assert "capped at 1" in text_of(ok)
    assert find(ok, "sql-result") is not None
    refused = text_of(render_sql(ro_store, {"q": "DELETE FROM runs", "rows": 10}))
    assert "only read-only SELECT queries are allowed" in refused
    assert "Type a query" in text_of(render_sql(ro_store, {"q": ""}))


def test_state_round_trip():
    search = state.encode({"run": 3, "steps": state.steps_text((2, 5)), "tables": ["t1", "t2"], "empty": None})
    st = state.parse(search)
    assert st == {"run": "3", "steps": "2:6", "tables": "t1,t2"}
    assert state.steps_param(st["steps"]) == (2, 5)
    assert state.str_list(st["tables"]) == ["t1", "t2"]
    assert state.steps_param("5:2") is None and state.int_list("x") is None


def test_empty_store_shows_how_to_record(tmp_path):
    access = StoreAccess(str(tmp_path / "none.duckdb"))
    for path in ("/runs", "/overview", "/compare"):
        page, nav = page_for(access, path, "")
        assert "scprof record" in text_of(page)
        assert len(nav) == len(state.PAGES)


def test_downloads(ui_db):
    app = create_app(ui_db)
    client = app.server.test_client()
    r = client.get("/download/sql.csv", query_string={"q": "SELECT name FROM runs ORDER BY run_id"})
    assert r.status_code == 200 and r.data.decode().splitlines() == ["name", "baseline", "tuned"]
    r = client.get("/download/sql.csv", query_string={"q": "DROP TABLE runs"})
    assert r.status_code == 400 and b"read-only" in r.data
    r = client.get("/download/perfetto", query_string={"run": "tuned", "steps": "0:2"})
    assert r.status_code in (200, 501)
    if r.status_code == 200:
        assert len(r.data) > 100 and "attachment" in r.headers["Content-Disposition"]
    r.close()
    app.scprof_access.close()


def test_cli_ui_defaults_to_loopback():
    args = build_parser().parse_args(["ui"])
    assert (args.host, args.port, args.db) == ("127.0.0.1", 8050, None)


def test_breakdown_per_step_sums_per_step_and_chip():
    from types import SimpleNamespace

    import pyarrow as pa

    from analyzers.time_split import CATEGORIES

    rng = np.random.default_rng(3)
    n = 500
    cats = [CATEGORIES[0], CATEGORIES[1], "not-a-category"]
    t = pa.table(
        {
            "chip": rng.integers(0, 3, n),
            "step": rng.integers(0, 12, n),
            "dur_ps": rng.integers(0, 10**9, n),
            "category": [cats[i] for i in rng.integers(0, 3, n)],
        }
    )
    # steps 0..11; the summaries count 1..10 (step_times.counted: not the first and last)
    times = pa.table({"step": list(range(12)), "counted": [0 < k < 11 for k in range(12)]})
    report = SimpleNamespace(analyses={"breakdown": SimpleNamespace(tables={"step_breakdown": t, "step_times": times})})
    rows = t.to_pylist()
    for steps, chip in (((2, 9), None), ((0, 11), 1)):
        got = data.breakdown_per_step(report, steps, chip)
        in_range = [r for r in rows if steps[0] <= r["step"] <= steps[1]]
        sel = [r for r in in_range if chip is None or r["chip"] == chip]
        counted = [r for r in in_range if 0 < r["step"] < 11]  # the per-chip means cover counted steps
        step_list = sorted({r["step"] for r in sel})
        n_chips, n_steps = len({r["chip"] for r in sel}), len({r["step"] for r in counted})
        assert got["steps"] == step_list and got["chips"] == sorted({r["chip"] for r in counted})
        assert list(got["per_step"]) == [CATEGORIES[0], CATEGORIES[1]]
        for c in got["per_step"]:
            assert got["per_step"][c] == [
                sum(r["dur_ps"] for r in sel if r["step"] == s and r["category"] == c) / n_chips for s in step_list
            ]
            assert got["per_chip"][c] == [
                sum(r["dur_ps"] for r in counted if r["chip"] == k and r["category"] == c) / n_steps
                for k in got["chips"]
            ]

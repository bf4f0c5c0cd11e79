"""The Memory page's "Device memory (allocator)" section: on a GPU capture with allocator events a
table per allocator with the allocations analyzer's figures, bytes allocated on a byte axis whose
top line is the allocator's recorded peak (checked against the raw samples), fragmentation on an
axis of its own, the largest live allocations; no "No HBM counters" there and no allocator counter
left under "Other counters"; runs without allocator events (emulated, a CPU capture) have no
section, and an emulated run keeps its HBM chart; other counters in bytes and in a ratio are drawn
on charts of their own."""

from __future__ import annotations

import json

import pytest

from profiler.store import Store
from profiler.units import format_value
from tests.ui.alloc_store import build_alloc_store
from tests.ui.test_overview_figures import walk
from ui import data
from ui.pages.memory import render_memory


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = build_alloc_store(tmp_path_factory.mktemp("alloc"))
    with Store.open(db, read_only=True) as s:
        yield s


def memory(store, name: str):
    run = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}[name]
    steps = data.clamp_steps(data.step_bounds(store, run), None)
    return run, render_memory(store, {"run": run, "steps": list(steps), "chips": [0]})


def texts(component) -> str:
    return " ".join(
        c for x in walk(component) for c in ([x.children] if isinstance(getattr(x, "children", None), str) else [])
    )


def graphs(component) -> dict:
    found = [x for x in walk(component) if type(x).__name__ == "Graph"]
    return {getattr(x, "id", None) or f"graph-{i}": x.figure for i, x in enumerate(found)}


def table_rows(component, id_: str) -> list[list]:
    (wrap,) = [x for x in walk(component) if getattr(x, "id", None) == id_]
    (tab,) = [x for x in walk(wrap) if getattr(x, "data-table", None)]
    return json.loads(getattr(tab, "data-table"))["rows"]


def test_a_gpu_capture_shows_its_allocators(store):
    run, page = memory(store, "tf2")
    text = texts(page)
    assert "Device memory (allocator)" in text
    assert "No HBM counters" not in text and "HBM over time" not in text
    figures = data.analysis(store, run).analyses["allocations"].figures["allocators"]
    rows = table_rows(page, "memory-allocators")
    assert len(rows) == len(figures) == 8
    shown = {r[0]: r for r in rows}  # label -> cells: the table reads the analyzer's figures
    names = data.chip_names(store, run)
    for a in figures:
        where = "host" if a["device_kind"] == "host" else names[a["chip"]]
        cells = shown[f"{a['allocator']} · {where} · {a['host']}"]
        assert cells[1] == format_value(a["peak_bytes"], "bytes") and cells[4] == f"{a['allocations']:,}"
        first_ps = data.run_info(store, run)["first_ps"]  # times from the run's start, as `scprof analyze`'s
        assert cells[2] == format_value(a["peak_ts_ps"] - first_ps, "ps") != format_value(a["peak_ts_ps"], "ps")
    g = graphs(page)
    device = g["memory-allocator-device-bytes"]
    assert device.layout.yaxis.ticksuffix == " GiB"
    peak = max(a["peak_bytes"] for a in figures if a["device_kind"] == "device")
    raw = store.rows(
        "SELECT max(value) AS v FROM counter_samples WHERE run_id = ? AND counter LIKE 'GPU_%_bfc bytes_allocated'",
        [run],
    )[0]["v"]
    assert raw == peak  # the counters the chart draws top out at the analyzer's peak
    assert max(max(t.y) for t in device.data) == pytest.approx(peak / 2**30)
    assert "peak" in [t.name for t in device.data]
    assert g["memory-allocator-host-bytes"].layout.yaxis.ticksuffix == " KiB"
    frag = g["memory-allocator-fragmentation"]
    assert not frag.layout.yaxis.ticksuffix and frag.layout.yaxis.tickformat.endswith("%")
    assert max(max(t.y) for t in frag.data) < 1  # ratios, never bytes
    for fig in g.values():  # no allocator stat counter drawn anywhere else
        names = [t.name or "" for t in fig.data]
        assert not any(n.endswith((" fragmentation", " bytes_allocated", " peak_bytes_in_use")) for n in names)
    assert "554 allocations live at its peak" in text


@pytest.mark.parametrize("name", ["emulated", "cpu"])
def test_runs_without_allocator_events_have_no_section(store, name):
    run, page = memory(store, name)
    assert data.analysis(store, run).analyses["allocations"].figures == {}
    text = texts(page)
    assert "Device memory (allocator)" not in text
    if name == "emulated":
        assert "memory-hbm" in graphs(page)


def test_other_counters_in_bytes_and_a_ratio_never_share_an_axis(store):
    _, page = memory(store, "mixed_units")
    text = texts(page)
    assert "Other counters (bytes)" in text and "Other counters (ratio)" in text
    figs = [f for f in graphs(page).values() if any(t.name in ("pool bytes", "pool fragmentation") for t in f.data)]
    assert sorted(sorted(t.name for t in f.data) for f in figs) == [["pool bytes"], ["pool fragmentation"]]
    (in_bytes,) = [f for f in figs if f.data[0].name == "pool bytes"]
    assert in_bytes.layout.yaxis.ticksuffix == " MiB" and max(in_bytes.data[0].y) == pytest.approx(3.0)
    (ratio,) = [f for f in figs if f.data[0].name == "pool fragmentation"]
    assert not ratio.layout.yaxis.ticksuffix and max(ratio.data[0].y) == pytest.approx(0.5)


def test_a_run_analysed_by_older_code_runs_only_the_allocators_for_the_memory_page(store, tmp_path, monkeypatch):
    """The Memory page needs one analyzer: without a current stored analysis it runs that one alone
    (a 10 M-event run's whole suite takes seconds), and its figures are the whole report's."""
    import shutil

    import duckdb

    from analyzers import registry, runstats

    copy = str(tmp_path / "stale.duckdb")
    shutil.copy(store.path, copy)
    con = duckdb.connect(copy)
    con.execute("UPDATE run_analysis SET analysis_sha1 = 'older code'")  # every run's analysis stale
    con.close()
    asked: list[tuple] = []
    real = registry.analyze_run
    monkeypatch.setattr(data, "analyze_run", lambda s, r, only=None: asked.append(only) or real(s, r, only=only))
    with Store.open(copy, read_only=True) as store:
        run = store.resolve_run("tf2")
        assert runstats.stored_report(store, run) is None
        got = data.analysis_of(store, run, "allocations")
        whole = real(store, run).analyses["allocations"]
    assert asked == [("allocations",)] and got.figures == whole.figures
    assert got.figures["device_peak_bytes"] == 6_210_111_488

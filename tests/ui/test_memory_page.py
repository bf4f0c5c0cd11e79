"""The Memory page: SPMEM drawn where a series has one sample (bars, never an empty
line), on a byte axis in a unit that suits it (KiB), one legend entry per distinct series; a
failed compile's bytes shown as figures (the failures analysis'); HBM at the peak for every
chip; contributor colours fixed by name across runs; a run without steps keeps its steps input."""

from __future__ import annotations

import pytest

from profiler.store import Store
from tests.ui.test_overview_figures import cards, walk
from ui import data
from ui.pages.memory import CONTRIBUTOR_COLORS, contributor_color, layout_memory, render_memory


@pytest.fixture
def store(overview_db):
    with Store.open(overview_db, read_only=True) as s:
        yield s


def ids(store) -> dict[str, int]:
    return {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}


def memory(store, name: str, chips: list[int] | None = None):
    run = ids(store)[name]
    steps = data.clamp_steps(data.step_bounds(store, run), None)
    return render_memory(store, {"run": run, "steps": list(steps), "chips": chips if chips is not None else [0, 1]})


def graph(component, id_: str):
    (g,) = [c for c in walk(component) if getattr(c, "id", None) == id_]
    return g.figure


@pytest.mark.parametrize("name", ["spmem_overflow", "baseline"])
def test_spmem_is_drawn_in_kib_once_per_distinct_series(store, name):
    fig = graph(memory(store, name), "memory-spmem")
    assert fig.data
    for t in fig.data:  # a one-sample series is a bar or a marker, never a line that draws nothing
        assert len(t.x) >= 2 or t.type == "bar" or "markers" in (t.mode or ""), t
    names = [t.name for t in fig.data]
    assert len(names) == len(set(names)), names  # identical SparseCores drawn once, named by where
    assert fig.layout.yaxis.ticksuffix == " KiB"
    peak = max(
        r["v"]
        for r in store.rows(
            "SELECT max(value) AS v FROM counter_samples WHERE run_id = ? AND "
            "counter = 'SPMEM per tile' AND chip IN (0, 1)",
            [ids(store)[name]],
        )
    )
    assert max(max(t.y) for t in fig.data) == pytest.approx(peak / 1024)


def test_a_failed_compile_shows_its_bytes_as_figures(store):
    page = memory(store, "spmem_overflow")
    shown = {c["label"]: c for c in cards(page)}
    needed = "SPMEM per tile: fixed-size buffers needed (the failed check)"
    assert shown[needed]["value"] == "150,512 B"
    assert shown["SPMEM per tile: capacity"]["value"] == "131,072 B"
    assert shown[needed]["source"] == "failures.failures.0.requested_bytes"
    # the chart holds another quantity (fixed + gather buffers), named so; it marks the card's bytes
    fig = graph(page, "memory-spmem")
    marks = {a.text: a.y for a in fig.layout.annotations}
    (text,) = [t for t in marks if t.startswith(needed)]
    assert "150,512 B" in text and marks[text] == pytest.approx(150512 / 1024)
    titles = [str(c.children) for c in walk(page) if type(c).__name__ in ("H2", "H3")]
    assert "SPMEM per tile, fixed + gather buffers (the largest stack)" in titles


@pytest.mark.parametrize("name", ["spmem_overflow", "baseline"])
def test_the_peak_breakdown_shows_every_chip(store, name):
    run = ids(store)[name]
    fig = graph(memory(store, name, chips=[0]), "memory-peaks")
    chips = {r["chip"] for r in store.rows("SELECT chip FROM hbm_peaks WHERE run_id = ?", [run])}
    assert len(chips) == 4
    assert {y for t in fig.data for y in t.y} == {f"TPU:{c}" for c in chips}
    top = max(store.rows("SELECT hbm_peak_bytes AS b FROM hbm_peaks WHERE run_id = ?", [run]), key=lambda r: r["b"])
    for t in fig.data:  # each chip's bar sums to its own peak
        assert len(t.x) == 4
    total = [sum(t.x[i] for t in fig.data) for i in range(4)]
    assert max(total) * 2**30 == pytest.approx(top["b"], rel=1e-9)


def test_contributor_colours_are_fixed_by_name_across_runs(store):
    colours: dict[str, set] = {}
    for name in ("baseline", "host_bound", "spmem_overflow"):
        for t in graph(memory(store, name), "memory-peaks").data:
            colours.setdefault(t.name, set()).add(t.marker.color)
    assert len(colours) >= 5
    for name, seen in colours.items():
        assert seen == {contributor_color(name)}, name
    assert contributor_color("HBM heap: embedding tables") == CONTRIBUTOR_COLORS["embedding tables"]
    assert contributor_color("some new part") == contributor_color("some new part")


def test_a_run_without_steps_keeps_its_steps_input_and_says_why(store):
    run = ids(store)["spmem_overflow"]
    page = layout_memory(store, {"run": str(run)})
    (slider,) = [c for c in walk(page) if getattr(c, "id", None) == "memory-steps"]
    assert slider.disabled
    body = memory(store, "real_host_bound")  # a CPU capture: no memory counters
    assert "records no memory counters" in " ".join(str(getattr(c, "children", "")) for c in walk(body))

"""The Overview's figures are the analyzers': every number on its cards equals the
figure `scprof analyze RUN --json` prints at the path the card names, formatted with the
figure's unit; cards are labelled apart (no two say "tables"), the host-input wait is the
host_bound finding's figure, the step-time split chart shows it, and a failed compile's bytes
are figures. On an ok, a host-bound, a failed run and a real capture (tests/ui/overview_store.py)."""

from __future__ import annotations

import json

import pytest

from profiler.store import Store
from profiler.units import format_value, unit_of
from scprof.cli import main
from tests.ui.overview_store import RUNS
from ui import data
from ui.pages.overview import layout_overview, render_overview, render_overview_analysis


def walk(component):
    """Every component of a tree."""
    if component is None or isinstance(component, str | int | float):
        return
    if isinstance(component, list | tuple):
        for c in component:
            yield from walk(c)
        return
    yield component
    yield from walk(getattr(component, "children", None))


def text(component) -> str:
    return " ".join(c if isinstance(c, str) else "" for c in _texts(component)).strip()


def _texts(component):
    if isinstance(component, str):
        yield component
    elif isinstance(component, list | tuple):
        for c in component:
            yield from _texts(c)
    elif component is not None and not isinstance(component, int | float):
        yield from _texts(getattr(component, "children", None))


def cards(component) -> list[dict]:
    """label, value, detail and source (data-source) of every figure card: the cards of every grid
    that carries them as data (render.kpis, built in the browser by ui/assets/data_views.js)."""
    out = []
    for c in walk(component):
        for card in json.loads(getattr(c, "data-kpis", None) or "[]"):
            out.append({**card, "source": card["source"] or None})
    return out


def at(figures: dict, path: str):
    """The figure at a dotted path of analyze's "figures" (list items by index); KeyError if absent.
    The wall-time split lists the categories that took time: one it leaves out took 0."""
    if path.startswith("breakdown.share."):
        return figures["breakdown"]["share"].get(path.rsplit(".", 1)[-1], 0.0)
    node = figures
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def expected_text(path: str, value) -> str:
    """How the figure reads: shares as %, times, bytes (a failure's exactly, in B), counts."""
    leaf = path.rsplit(".", 1)[-1]
    if path.startswith("failures."):
        return f"{value:,} B" if leaf.endswith("bytes") else str(value)
    if path.startswith("breakdown.share.") or leaf == "share":
        return format_value(value, "share")
    return format_value(value, "ps" if leaf.startswith("step_ps_") else unit_of(leaf))


@pytest.fixture(scope="module")
def analyzed(overview_db):
    """Per run: (run_id, analyze --json's document), read with the CLI."""
    import contextlib
    import io

    out = {}
    with Store.open(overview_db, read_only=True) as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
    for name in RUNS:
        buf = []
        with contextlib.redirect_stdout(io.StringIO()) as f:
            assert main(["analyze", name, "--json", "--db", overview_db]) == 0
            buf.append(f.getvalue())
        out[name] = (ids[name], json.loads(buf[0]))
    return out


@pytest.fixture
def store(overview_db):
    with Store.open(overview_db, read_only=True) as s:
        yield s


def overview(store, run_id):
    bounds = data.step_bounds(store, run_id)
    st = {"run": run_id, "steps": list(data.clamp_steps(bounds, None))}
    return render_overview(store, st), render_overview_analysis(store, st)


@pytest.mark.parametrize("name", RUNS)
def test_every_number_on_the_overview_is_the_analyzers_figure(store, analyzed, name):
    run_id, doc = analyzed[name]
    shown = cards(overview(store, run_id))
    assert shown, name
    for c in shown:
        if c["value"] == "-":  # an absent figure says why in its detail
            assert c["detail"], c
            continue
        assert c["source"], f"{name}: card {c['label']!r} = {c['value']} names no analyzer figure"
        assert c["value"] == expected_text(c["source"], at(doc["figures"], c["source"])), (name, c)
        assert c["detail"], (name, c)  # its scope
    labels = [c["label"] for c in shown]
    assert len(labels) == len(set(labels)), f"{name}: two cards with one label: {labels}"
    assert "tables" not in labels and "idle share" not in labels and "tc idle share waiting for input" not in labels


@pytest.mark.parametrize("name", ["host_bound", "real_host_bound", "baseline"])
def test_the_host_input_wait_card_is_the_host_bound_findings_figure(store, analyzed, name):
    run_id, doc = analyzed[name]
    (finding,) = [f for f in doc["findings"] if f["rule"] == "host_bound"]
    shown = {c["label"]: c for c in cards(overview(store, run_id))}
    label = "device awaiting host input" if name.startswith("real") else "TensorCores waiting for host input"
    assert shown[label]["value"] == format_value(finding["value"], "share")
    assert shown[label]["value"] in finding["title"]  # the finding's text quotes the same figure


def test_the_split_chart_shows_the_host_wait_on_a_host_bound_run(store, analyzed):
    run_id, doc = analyzed["host_bound"]
    _, analysis = overview(store, run_id)
    (graph,) = [c for c in walk(analysis) if getattr(c, "id", None) == "overview-split"]
    traces = {t.name: t for t in graph.figure.data}
    wait = doc["figures"]["idle_gaps"]["tensorcore"]["host"]["share"]
    assert traces["TensorCore waiting for host input"].x[0] == pytest.approx(wait) and wait > 0.15
    for cat, share in doc["figures"]["breakdown"]["share"].items():  # the wall-time bar: breakdown.share
        assert traces[cat].x[0] == pytest.approx(share), cat


def test_a_failed_compile_shows_its_bytes_and_why_it_has_no_steps(store, analyzed):
    run_id, doc = analyzed["spmem_overflow"]
    body, analysis = overview(store, run_id)
    shown = {c["label"]: c["value"] for c in cards(analysis)}
    needed = "SPMEM per tile: fixed-size buffers needed (the failed check)"
    assert shown[needed] == "150,512 B" and shown["SPMEM per tile: capacity"] == "131,072 B"
    assert "failed (spmem overflow) before any step ran" in text(body)
    assert "internal error" not in text(body) + text(analysis)


def test_a_run_without_steps_still_has_the_steps_input(store, analyzed):
    """The URL callback listens to overview-steps: a run without steps keeps a (disabled) one."""
    run_id, _ = analyzed["spmem_overflow"]
    page = layout_overview(store, {"run": str(run_id)})
    (slider,) = [c for c in walk(page) if getattr(c, "id", None) == "overview-steps"]
    assert slider.disabled

"""Compare's "Memory side by side": one horizontal bar per run (names read level, not
rotated and overlapping), split by contributor with no contributor at 0 B on both sides (it drew
empty categories), each bar adding up to the run's HBM peak in the store's hbm_peaks view; the
table gives each contributor's bytes on both sides. On an ok pair, an ok run against a failed
compile and an ok run against a capture without HBM counters (the mixed store)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from dash import dcc, html

from ui.pages.compare import render_compare
from ui.pages.memory import byte_unit


def memory_section(tree):
    """The section whose title starts 'Memory side by side'."""
    if isinstance(tree, list | tuple):
        return next((s for s in (memory_section(c) for c in tree) if s is not None), None)
    if isinstance(tree, html.Section) and str(tree.children[0].children).startswith("Memory side by side"):
        return tree
    children = getattr(tree, "children", None)
    return memory_section(children) if children is not None and not isinstance(children, str) else None


def walk(tree):
    if isinstance(tree, list | tuple):
        for c in tree:
            yield from walk(c)
    elif tree is not None and not isinstance(tree, str | int | float):
        yield tree
        yield from walk(getattr(tree, "children", None))


def peak_bytes(store, run: int) -> float | None:
    rows = store.rows("SELECT max(hbm_peak_bytes) AS b FROM hbm_peaks WHERE run_id = ?", [run])
    return rows[0]["b"] if rows and rows[0]["b"] is not None else None


@pytest.mark.parametrize("cand", ["tuned", "spmem", "jax_cpu"])
def test_memory_side_by_side_is_one_level_bar_per_run_without_empty_contributors(mixed, mixed_ids, cand):
    base, other = mixed_ids["baseline"], mixed_ids[cand]
    section = memory_section(render_compare(mixed, {"base": base, "cand": other}))
    assert section is not None
    (graph,) = [c for c in walk(section) if isinstance(c, dcc.Graph)]
    fig = go.Figure(graph.figure)
    bars = [t for t in fig.data if t.type == "bar"]
    assert bars and all(t.orientation == "h" for t in bars)  # run names on the y axis, never rotated
    names = {r["name"]: r["run_id"] for r in mixed.rows("SELECT run_id, name FROM runs")}
    peaks = {role_name: peak_bytes(mixed, names[role_name.split(": ", 1)[1]]) for role_name in bars[0].y}
    with_hbm = [n for n, r in names.items() if n in ("baseline", cand) and peak_bytes(mixed, r) is not None]
    assert list(bars[0].y) == [
        f"{role}: {n}" for role, n in (("baseline", "baseline"), ("candidate", cand)) if n in with_hbm
    ]
    for t in bars:  # no contributor drawn as an empty category
        assert any(x > 0 for x in t.x), t.name
    unit, div = byte_unit(max(peaks.values()))
    assert unit in fig.layout.xaxis.title.text
    for i, label in enumerate(bars[0].y):  # each bar adds up to the run's peak (hbm_peaks)
        assert sum(t.x[i] for t in bars) == pytest.approx(peaks[label] / div, rel=1e-9)
    text = " ".join(str(c.children) for c in walk(section) if isinstance(c, html.Td | html.Div | html.Th))
    if cand == "jax_cpu":
        assert "jax_cpu records no device memory counters" in text and "HBM counters" not in text  # a CPU run's word
    for t in bars:
        assert t.name in text  # each contributor has its row in the table

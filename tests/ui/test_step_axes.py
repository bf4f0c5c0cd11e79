"""Steps are whole numbers: every axis of steps, of trials or of counts of steps has a
tick every 1, 2, 5, 10, ... units from 0, never Plotly's own 0.5 (seen on a run of 5 steps). Read
from the figures the pages send (their layouts), on the Overview, SparseCore, Compare and Tuning
pages of 5-step runs; and the tick spacing on spans from 1 to 1,000 steps."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from dash import dcc

from ui import data
from ui.pages.compare import render_compare
from ui.pages.overview import render_overview, render_overview_analysis
from ui.pages.sparsecore import render_sparsecore
from ui.pages.tuning import render_tuning
from ui.render import integer_axis

# axis titles naming steps, trials or a count of steps
STEP_TITLES = ("step", "trial", "steps")


def graphs(component):
    """Every figure in a component tree."""
    if isinstance(component, list | tuple):
        for c in component:
            yield from graphs(c)
    elif isinstance(component, dcc.Graph):
        yield go.Figure(component.figure)
    elif component is not None and not isinstance(component, str | int | float):
        yield from graphs(getattr(component, "children", None))


def step_axes(component) -> list[tuple[str, go.layout.XAxis]]:
    """(title, axis) of every axis whose title names steps, trials or steps counted."""
    out = []
    for fig in graphs(component):
        for name in ("xaxis", "yaxis"):
            axis = fig.layout[name]
            title = (axis.title.text or "") if axis.title else ""
            if title.split(" (")[0] in STEP_TITLES:
                out.append((title, axis))
    return out


def whole_ticks(axis) -> bool:
    return axis.tickmode == "linear" and float(axis.tick0) == int(axis.tick0) and int(axis.dtick) == axis.dtick >= 1


def steps_of(store, run):
    return list(data.clamp_steps(data.step_bounds(store, run), None))


def test_every_step_axis_has_whole_ticks(ro_store):
    ids = {r["name"]: r["run_id"] for r in ro_store.rows("SELECT run_id, name FROM runs")}
    run = ids["baseline"]
    st = {"run": run, "steps": steps_of(ro_store, run)}
    views = {
        "overview": render_overview(ro_store, st),
        "overview analysis": render_overview_analysis(ro_store, st),
        "sparsecore": render_sparsecore(ro_store, {**st, "tables": [], "metric": "ids"}),
        "compare": render_compare(ro_store, {"base": run, "cand": ids["tuned"]}),
    }
    seen = {page: step_axes(view) for page, view in views.items()}
    # the step charts are there: step time per step, by category; three heatmaps/lines; the histogram's counts
    assert [len(v) for v in seen.values()] == [1, 1, 3, 1], seen
    bad = [(page, title, axis.dtick) for page, axes in seen.items() for title, axis in axes if not whole_ticks(axis)]
    assert not bad


def test_tuning_trial_axis_has_whole_ticks(whatif_store):
    run = whatif_store.rows("SELECT run_id FROM runs WHERE name = 'baseline'")[0]["run_id"]
    axes = step_axes(render_tuning(whatif_store, {"run": run}))
    assert [t for t, _ in axes] == ["trial"]
    assert whole_ticks(axes[0][1])


@pytest.mark.parametrize(
    ("span", "dtick"),
    [
        ((0, 0), 1),
        ((0, 4), 1),
        ((0, 12), 1),
        ((0, 13), 2),
        ((0, 19), 2),
        ((5, 60), 5),
        ((0, 100), 10),
        ((0, 1000), 100),
    ],
)
def test_tick_spacing_is_the_smallest_of_1_2_5_giving_at_most_12_ticks(span, dtick):
    fig = integer_axis(go.Figure(), span)
    assert (fig.layout.xaxis.tickmode, fig.layout.xaxis.dtick, fig.layout.xaxis.tick0) == ("linear", dtick, 0)
    assert (span[1] - span[0]) / dtick <= 12

"""ui/margins.py: label widths in Arial's metrics, the tick labels of a numeric axis, and margins
that only grow. Whether Plotly then draws each graph once is checked in chromium
(tests/ui/test_browser_sweep.py: test_every_graph_is_drawn_once)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from ui import margins, render

# Widths chromium measured for these labels as the UI's graphs draw them (12 px, Liberation Sans:
# Arial's metrics), in px: tick labels of the Overview, Memory, SparseCore and Compare pages.
MEASURED_PX = {"800": 20, "TPU:3": 34, "100 GiB": 43, "chip 3 · SC 3": 69, "baseline: baseline": 96}


@pytest.mark.parametrize("label, px", MEASURED_PX.items())
def test_a_labels_width_is_the_one_chromium_measured(label, px):
    assert margins.text_px(label) == pytest.approx(px, abs=0.6)


def test_a_label_of_several_lines_is_as_wide_as_its_widest_line_in_its_own_font_size():
    # Helvetica's AFM: w 722, i 222, d 556, e 556; "xy" 500 + 500 (thousandths of the font size)
    assert margins.text_px("wide<br>xy") == pytest.approx((722 + 222 + 556 + 556) * 12 / 1000)
    assert margins.text_px("xy<br><span style='font-size:10px'>wide</span>") == pytest.approx(
        (722 + 222 + 556 + 556) / 100
    )
    assert margins.text_px("<b>a&amp;b</b>") == pytest.approx((556 + 667 + 556) * 12 / 1000)  # markup left out


def test_tick_labels_are_plotlys_format_at_a_tick_every_tenth_of_the_span():
    assert margins.nice_step(94.5) == 100 and margins.nice_step(0.13) == 0.2 and margins.nice_step(3) == 5
    assert margins.tick_labels(0, 945) == ["0", "100", "200", "300", "400", "500", "600", "700", "800", "900"]
    assert margins.tick_labels(0, 1575)[-1] == "1400"  # below 10^4: no exponent
    assert margins.tick_labels(0, 15750)[1:3] == ["2k", "4k"] and margins.tick_labels(0, 12000)[-1] == "12k"
    assert (
        "0.5M" in margins.tick_labels(0, 2.6e6) and margins.tick_labels(0, 3.2e9)[-1] == "3B"
    )  # one exponent per axis
    assert margins.tick_labels(0, 0.55) == ["0", "0.1", "0.2", "0.3", "0.4", "0.5"]
    assert margins.tick_labels(-20000, 0)[0] == "−20k" and margins.tick_labels(-1, 0)[0] == "−1"  # Plotly's minus sign
    assert margins.tick_labels(0, 10, "d", dtick=2) == ["0", "2", "4", "6", "8", "10"]
    assert margins.tick_labels(1, 1.5, ".2f")[-1] == "1.50"
    assert margins.tick_labels(0, 1, ".0%")[-1] == "100%"
    assert margins.tick_labels(0, 115, ",.4~g", " GiB")[-1] == "100 GiB"  # the Memory page's widest, as drawn


def test_margins_grow_to_the_labels_and_never_shrink():
    fig = render.figure(yaxis_title="y", xaxis_title="x")
    fig.add_trace(go.Bar(y=["a long category name on the left", "b"], x=[1, 2], orientation="h"))
    margins.fit(fig)
    assert fig.layout.margin.l >= margins.text_px("a long category name on the left") + margins.Y_TITLE_PX
    assert fig.layout.margin.b >= margins.X_LABELS_PX + margins.X_TITLE_PX
    wide = render.figure()
    wide.add_trace(go.Scatter(x=[1, 2], y=[1, 2]))
    wide.update_layout(margin=dict(l=300, r=300, t=300, b=300))
    margins.fit(wide)
    assert (wide.layout.margin.l, wide.layout.margin.r, wide.layout.margin.t, wide.layout.margin.b) == (300,) * 4


def test_the_graph_component_carries_the_fitted_margins():
    fig = render.figure(yaxis_title="memory")
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 100]))
    fig.update_yaxes(ticksuffix=" GiB", tickformat=",.4~g", range=[0, 115])
    left = render.graph(fig).figure["layout"]["margin"]["l"]
    assert left >= margins.text_px("110 GiB") + margins.Y_TITLE_PX > 60  # wider than the figure's own 60 px


def test_a_long_runs_steps_are_filled_lines_stacked_as_the_bars_were():
    """render.step_series: a bar per step while bars can be seen, filled lines beyond MAX_STEP_BARS steps;
    a stack of them reaches the sum of its series, as stacked bars do, and the margins count it so."""
    few, many = list(range(render.MAX_STEP_BARS)), list(range(render.MAX_STEP_BARS + 1))
    assert render.step_series(few, [1] * len(few), stack="s", marker_color="red").type == "bar"
    lines = [
        render.step_series(many, [v] * len(many), stack="s", marker_color="red", name=str(v)) for v in (6000, 7000)
    ]
    assert [(t.type, t.stackgroup, t.fillcolor, t.line.color) for t in lines] == [("scatter", "s", "red", "red")] * 2
    assert render.step_series(many, [1] * len(many)).fill == "tozeroy"  # alone: filled down to zero
    fig = render.figure()
    fig.add_traces(lines)
    _, numbers = margins._axis_values(fig, "y")
    assert max(numbers) == 13000  # the stack's top: the y ticks reach "12k", not the tallest series' "7000"
    assert margins.labels_px(fig, "y")[0][-1] == margins.text_px("12k")

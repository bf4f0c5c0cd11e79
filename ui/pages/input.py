"""The Input page: the host's input work step by step, and whether the device waited for it
(awaited) or it was prepared ahead while the device ran; to tell a host-bound run from one whose
input pipeline keeps up.

Every number is the idle_gaps analyzer's (`scprof analyze --json`: figures.idle_gaps.device_by_step,
tensorcore_by_step and host_input_events; analyzers/rules/idle_gaps.py and device_wait.py), the same
figures the Overview's cards total: the page only stacks them and divides by the counted steps."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import html

from analyzers.registry import RunReport
from profiler.store import Store
from profiler.units import format_value
from ui import data, render
from ui.figures import FIGURE_TEXT, WAIT_CAUSES, figure_kpi
from ui.pages.common import page_run, run_page
from ui.pages.overview import card

AWAITED = FIGURE_TEXT["idle_gaps.device.host_input_wait_share"][0]  # "device awaiting host input"
TC_WAIT = FIGURE_TEXT["idle_gaps.tensorcore.host.share"][0]  # "TensorCores waiting for host input"
AHEAD = "device idle, input prepared ahead (not awaited)"
DEVICE_PARTS = (  # (name, color) of the device bar's parts, bottom up
    ("device busy", "#3949ab"),
    (AWAITED, "#e53935"),
    (AHEAD, "#ffb74d"),
    ("device idle otherwise", "#bdbdbd"),
)
TC_PARTS = ((TC_WAIT, "#e53935"), ("TensorCore time not waiting for host input (busy or other gaps)", "#1e88e5"))
EVENT_COLUMNS = [
    ("name", "host input work", "text"),
    ("events", "events", "count"),
    ("total_ps", "total time", "ps"),
    ("events_per_step", "events per step", "count"),
    ("ps_per_step", "time per step", "ps"),
]
NO_STEPS = (
    "This run has no counted steps: the Input page splits each step's device time, and there are no steps "
    "to split (an inference capture, or a capture cut before its first whole step)."
)
NO_DEVICE = (
    "This run has no device the input could feed (no TensorCore, GPU, CPU running XLA ops or other device "
    "track with steps): there is no device time to split into busy, awaiting input and idle."
)


def layout_input(store: Store, st: dict[str, str]) -> Any:
    run = page_run(store, st)
    return run_page("input", store, run, {"run": run})


def device_parts(row: dict[str, int]) -> dict[str, int]:
    """One step's device time (summed over the chips) as the chart's parts, which sum to device_ps:
    busy; awaiting host input; idle while the host ran input work beyond what was awaited (input
    prepared ahead); the rest of the idle time."""
    busy, awaited = row["busy_ps"], row["host_input_wait_ps"]
    ahead = max(0, row["host_input_idle_ps"] - awaited)
    return {
        "device busy": busy,
        AWAITED: awaited,
        AHEAD: ahead,
        "device idle otherwise": max(0, row["device_ps"] - busy - awaited - ahead),
    }


def tensorcore_parts(row: dict[str, int]) -> dict[str, int]:
    """One step's TensorCore time (summed over the TensorCore op tracks) as the chart's parts."""
    return {TC_PARTS[0][0]: row["host_wait_ps"], TC_PARTS[1][0]: max(0, row["observed_ps"] - row["host_wait_ps"])}


def event_rows(events: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The host input work by name with its events and time per counted step."""
    return [
        {**r, "events_per_step": r["events"] / steps, "ps_per_step": r["total_ps"] / steps} if steps else dict(r)
        for r in events
    ]


def steps_figure(rows: list[dict[str, Any]], parts: Any, colors: tuple, noun: str) -> go.Figure:
    """Stacked bars, one per counted step, of `parts(row)` in the order of `colors`."""
    split = [parts(r) for r in rows]
    steps = [r["step"] for r in rows]
    unit, scale = render.time_unit(max((sum(p.values()) for p in split), default=0))
    fig = render.figure(barmode="stack", xaxis_title="counted step", yaxis_title=f"time ({unit}, {noun})")
    for name, color in colors:
        fig.add_trace(
            render.step_series(
                steps,
                [p[name] / scale for p in split],
                stack="parts",
                name=name,
                marker_color=color,
                hovertemplate=f"{name}<br>step %{{x}}: %{{y:.4g}} {unit}<extra></extra>",
            )
        )
    render.integer_axis(fig, steps)
    fig.update_layout(legend=dict(orientation="h", y=-0.25, traceorder="normal"))
    return fig


def _cards(report: RunReport, paths: tuple[str, ...], extra: list[dict[str, str]], id: str) -> Any:
    """The analyzers' totals behind a chart as the Overview's cards (same label, scope and source)."""
    figs = report.to_dict()["figures"]
    return render.kpis([card(k) for p in paths if (k := figure_kpi(figs, p)) is not None] + extra, id=id)


def _device_section(report: RunReport, gaps: dict[str, Any], covers: str) -> Any:
    rows = gaps["device_by_step"]
    ahead = sum(device_parts(r)[AHEAD] for r in rows)
    ahead_card = {
        "label": AHEAD,
        "value": format_value(ahead, "ps"),
        "detail": f"{covers}, all chips: {WAIT_CAUSES['host_input']}, less the awaited time",
        "source": "",
    }
    return render.section(
        "Device time per step",
        _cards(report, ("idle_gaps.device.host_input_wait_share",), [ahead_card], "input-device-cards"),
        render.graph(steps_figure(rows, device_parts, DEVICE_PARTS, "summed over the chips"), id="input-device"),
        help_text=f"Each counted step's device time, summed over the chips ({covers.split(',')[0]}), split four ways: busy "
        f"(device work); {AWAITED}: idle until input work it waited for ended (idle_gaps.device_by_step "
        f"host_input_wait_ps, summed: the host_bound finding's figure); idle while the host ran input work it did not "
        "wait for (input prepared ahead: idle while the host ran input work, less the awaited time); idle otherwise "
        "(launches, other host work, nothing). A run whose input keeps up shows no red.",
    )


def _tensorcore_section(report: RunReport, gaps: dict[str, Any], covers: str) -> Any:
    rows = gaps["tensorcore_by_step"]
    return render.section(
        "TensorCore time per step",
        _cards(report, ("idle_gaps.tensorcore.host.share",), [], "input-tensorcore-cards"),
        render.graph(
            steps_figure(rows, tensorcore_parts, TC_PARTS, "summed over the TensorCores"), id="input-tensorcore"
        ),
        help_text=f"Each counted step's TensorCore time, summed over the TensorCore op tracks ({covers.split(',')[0]}): "
        f"{TC_WAIT} "
        "(their idle gaps caused by host input, idle_gaps.tensorcore_by_step host_wait_ps; summed over the steps, "
        "the host_bound finding's figure) and the rest: busy, or idle for another cause.",
    )


def input_sections(report: RunReport) -> list[Any]:
    """The page's body from a run's report: the per-step charts, the input work table, or why not."""
    ig = report.analyses.get("idle_gaps")
    bd = report.analyses.get("breakdown")
    gaps = ig.figures if ig else {}
    steps = int((bd.figures.get("steps") if bd else 0) or 0)
    if not steps or bd is None:
        return [render.empty(NO_STEPS)]
    covers = str(bd.figures.get("covers") or "the counted steps").removeprefix("over ")
    parts: list[Any] = []
    if gaps.get("device_by_step"):
        parts.append(_device_section(report, gaps, covers))
    if gaps.get("tensorcore_by_step"):
        parts.append(_tensorcore_section(report, gaps, covers))
    if not parts:
        parts.append(render.empty(NO_DEVICE))
    events = gaps.get("host_input_events") or []
    if events:
        parts.append(
            render.section(
                "Host input work by name",
                render.table(event_rows(events, steps), EVENT_COLUMNS, id="input-events"),
                help_text=f"The host's input work (category host_preprocess) in the {steps} counted steps, "
                "longest first: what the device waited for, or what ran ahead of it "
                "(idle_gaps.host_input_events).",
            )
        )
    else:
        parts.append(render.note("The host ran no input work (category host_preprocess) in the counted steps."))
    return parts


def render_input(store: Store, st: dict[str, Any]) -> Any:
    return html.Div(input_sections(data.analysis(store, st["run"])))

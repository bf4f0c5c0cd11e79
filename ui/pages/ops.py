"""The Ops page: the run's top ops by self time with the FLOPs and bytes they record, their
arithmetic intensity (FLOP/byte) and achieved FLOP/s, and a roofline chart against the device's
peaks; to see which ops are bound by memory bandwidth and which by compute, and how far each sits
below its roof.

Every number is the op profile's (`scprof analyze --json`: figures.ops.top, analyzers/rules/op_profile.py):
the page computes no figure of its own, only the roof from the run's peaks (runs.tc_peak_flops,
runs.hbm_bandwidth_bytes_per_s)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import html

from analyzers.rules.op_profile import TOP
from profiler.store import Store
from profiler.units import format_si, format_value
from ui import data, render
from ui.pages.common import page_run, run_page

NO_WORK = (
    "This capture records no FLOPs or bytes per op: no arithmetic intensity and no roofline. "
    "The ops' self times are below (XLA TPU captures and emulated runs record FLOPs and bytes; "
    "most GPU and CPU captures do not)."
)
NO_PEAKS = "This run records no peak FLOP/s or HBM bandwidth for its device: the ops are drawn without the roof."
COLUMNS = [
    ("track_kind", "on", "text"),
    ("name", "op", "text"),
    ("category", "category", "text"),
    ("events", "events", "count"),
    ("self_ps", "self time", "ps"),
    ("share", "share of its kind", "share"),
    ("flops", "FLOPs", "flop"),
    ("bytes", "bytes accessed", "bytes"),
    ("flop_per_byte", "intensity", "flop_per_byte"),
    ("flop_per_s", "achieved", "flop_per_s"),
]
KIND_COLORS = {"tensorcore": "#1e88e5", "sparsecore": "#8e24aa", "gpu": "#43a047", "cpu": "#fb8c00"}


def layout_ops(store: Store, st: dict[str, str]) -> Any:
    run = page_run(store, st)
    return run_page("ops", store, run, {"run": run})


def has_work(top: list[dict[str, Any]]) -> bool:
    """Whether any op of the profile records FLOPs or bytes."""
    return any(r.get("flops") is not None or r.get("bytes") is not None for r in top)


def plotted(top: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ops a log-log roofline can show: a positive intensity and a positive achieved FLOP/s."""
    return [r for r in top if (r.get("flop_per_byte") or 0) > 0 and (r.get("flop_per_s") or 0) > 0]


def peaks(info: dict[str, Any]) -> tuple[float, float] | None:
    """(peak FLOP/s, peak HBM bytes/s) of the run's device, None when either is unknown."""
    flops, bw = info.get("tc_peak_flops"), info.get("hbm_bandwidth_bytes_per_s")
    return (float(flops), float(bw)) if flops and bw else None


def roof(peak: tuple[float, float], lo: float, hi: float) -> dict[str, list[float]]:
    """The roof min(peak FLOP/s, intensity × HBM bandwidth) from intensity `lo` to `hi`: the memory
    slope up to the ridge (peak / bandwidth), then the flat compute roof; the ridge as its point."""
    flops, bw = peak
    ridge = flops / bw
    lo, hi = min(lo, ridge / 10), max(hi, ridge * 10)
    return {"memory_x": [lo, ridge], "memory_y": [lo * bw, flops], "compute_x": [ridge, hi], "ridge": [ridge, flops]}


def roofline_figure(points: list[dict[str, Any]], peak: tuple[float, float] | None) -> go.Figure:
    """The ops as points (x: FLOP/byte, y: achieved FLOP/s, both log) under the device's roof."""
    fig = render.figure(xaxis_title="arithmetic intensity (FLOP/byte)", yaxis_title="achieved FLOP/s")
    if peak is not None:
        xs = [r["flop_per_byte"] for r in points]
        r = roof(peak, min(xs) / 2, max(xs) * 2)
        line = dict(color="#555", width=2)
        fig.add_trace(
            go.Scatter(
                x=r["memory_x"],
                y=r["memory_y"],
                mode="lines",
                name=f"HBM roof ({format_si(peak[1], 'B/s')})",
                line=line,
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=r["compute_x"],
                y=[peak[0], peak[0]],
                mode="lines",
                name=f"compute roof ({format_value(peak[0], 'flop_per_s')})",
                line=dict(line, dash="dash"),
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[r["ridge"][0]],
                y=[r["ridge"][1]],
                mode="markers",
                name=f"ridge ({format_value(r['ridge'][0], 'flop_per_byte')})",
                marker=dict(symbol="diamond", size=10, color="#555"),
                hovertemplate="ridge: %{x:.3g} FLOP/byte<extra></extra>",
            )
        )
    for kind in sorted({r["track_kind"] for r in points}):
        rows = [r for r in points if r["track_kind"] == kind]
        fig.add_trace(
            go.Scatter(
                x=[r["flop_per_byte"] for r in rows],
                y=[r["flop_per_s"] for r in rows],
                mode="markers",
                name=f"{kind} ops",
                marker=dict(size=10, color=KIND_COLORS.get(kind, "#e53935"), opacity=0.8),
                customdata=[
                    [
                        render.plain(r["name"][:120]),
                        format_value(r["self_ps"], "ps"),
                        format_value(r["flops"], "flop"),
                        format_value(r["bytes"], "bytes"),
                        format_value(r["flop_per_s"], "flop_per_s"),
                    ]
                    for r in rows
                ],
                hovertemplate="%{customdata[0]}<br>self time %{customdata[1]}<br>%{customdata[2]}, "
                "%{customdata[3]}<br>%{x:.3g} FLOP/byte, %{customdata[4]}<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", tickformat="~g")  # 0.1, 100, 1000: plain numbers, no exponents
    fig.update_yaxes(type="log", tickformat="~s")  # 100G, 1T, 1P (FLOP/s)
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return fig


def render_ops(store: Store, st: dict[str, Any]) -> Any:
    run = st["run"]
    ops = data.analysis(store, run).analyses.get("ops")
    top = (ops.figures.get("top") if ops else None) or []
    if not top:
        notes = "; ".join(ops.notes) if ops and ops.notes else "the analyzers found no op events"
        return render.empty(f"No op profile: {notes}.")
    scope = f"The top {len(top)} of {ops.figures['ops']:,} ops by self time, over the whole run"
    if not has_work(top):
        return html.Div(
            [
                render.note(NO_WORK),
                render.section(
                    "Ops by self time", render.table(top, COLUMNS[:6], id="ops-table"), help_text=scope + "."
                ),
            ]
        )
    parts: list[Any] = []
    points = plotted(top)
    peak = peaks(data.run_info(store, run))
    if points:
        if peak is None:
            parts.append(render.note(NO_PEAKS))
        left = len(top) - len(points)
        parts.append(
            render.section(
                "Roofline",
                render.graph(roofline_figure(points, peak), id="ops-roofline", height=480),
                help_text="One point per op: its FLOPs over the bytes it accessed (x) and over its self time (y), "
                "summed over the run's cores; the roof is min(peak FLOP/s, intensity × peak HBM bandwidth). "
                "Left of the ridge an op is bound by memory bandwidth, right of it by compute."
                + (
                    f" {left} of the top ops record no FLOPs or no bytes (or zero: a copy moves bytes without "
                    "FLOPs) and are left off the log-scale chart; the table has them."
                    if left
                    else ""
                ),
            )
        )
    else:
        parts.append(render.note("None of the top ops records both FLOPs and bytes: no roofline."))
    parts.append(
        render.section(
            "Ops by self time",
            render.table(top, COLUMNS, id="ops-table"),
            help_text=f"{scope} (`scprof analyze --json`: figures.ops.top, at most {TOP}). Intensity: FLOPs / bytes; "
            "achieved: FLOPs / self time.",
        )
    )
    return html.Div(parts)

"""The Overview page: a run's KPIs, step time per step and per chip (SQL, fast on any run size),
then the analyzers' step-time breakdown and top findings; the first look at where a run's time goes."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from profiler.stdlib import steps_covered
from profiler.store import Store
from profiler.units import format_value
from ui import data, figures, render
from ui.pages.common import body, run_and_steps, run_page, steps_slider
from ui.render import time_unit


def layout_overview(store: Store, st: dict[str, str]) -> Any:
    run, bounds, steps = run_and_steps(store, st)
    analysis = render.section(
        "Step-time breakdown and findings",
        body("overview", "analysis"),
        help_text="From the analyzers (the same numbers as `scprof analyze`).",
    )
    state = {"run": run, "steps": list(steps)}
    return run_page("overview", store, run, state, steps_slider("overview-steps", bounds, steps), after=[analysis])


def card(k: data.Kpi) -> dict[str, str]:
    """A figure's card (render.kpis): label, value with its unit, scope; `source` names the figure's path
    in `scprof analyze --json` (shown on hover), when it is the analyzers' figure."""
    return {"label": k.label, "value": format_figure(k.value, k.unit), "detail": k.detail, "source": k.source or ""}


def format_figure(value: Any, unit: str) -> str:
    """A card's value: exact bytes ("B": 175,000 B, to set against a limit) or profiler.units' format."""
    if unit == "B" and value is not None:
        return f"{int(value):,} B"
    return format_value(value, unit)


def no_steps_text(info: dict[str, Any]) -> str:
    """Why a run has no steps: it failed (with the failure's kind), or it recorded no step markers."""
    tags = info.get("tags") or {}
    if info.get("status") == "failed":
        kind = str(tags.get("failure") or "a failure").replace("_", " ")
        return f"This run failed ({kind}) before any step ran: it has no step times. Its failure is below."
    return "This run has no steps (no step markers and no events tagged with a step)."


def render_overview(store: Store, st: dict[str, Any]) -> Any:
    """KPIs from SQL, step time per step, per-chip step time (fast on any run size)."""
    run, steps = st["run"], tuple(st["steps"])
    names = data.chip_names(store, run)
    kpis = data.overview_kpis(store, run, steps)
    tiles = [card(k) for k in kpis]
    st_times = data.step_times(store, run, steps)
    parts: list[Any] = [render.kpis(tiles, id="overview-kpis")]
    if len(st_times["step"]):
        unit, scale = time_unit(float(st_times["step_ps"].max()))
        fig = render.figure(xaxis_title="step", yaxis_title=f"step time ({unit})")
        fig.add_trace(
            go.Scatter(
                x=st_times["step"],
                y=st_times["step_ps"] / scale,
                mode="lines+markers" if len(st_times["step"]) < 200 else "lines",
                name="step time",
                hovertemplate=f"step %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>",
            )
        )
        render.integer_axis(fig, st_times["step"])
        chips = data.chip_step_times(store, run, steps)
        row: list[Any] = [render.section("Step time per step", render.graph(fig, height=280))]
        if chips:
            cf = render.figure(
                xaxis_title=f"{data.device_noun(names)} (mean {data.steps_covered(st_times)})",
                yaxis_title=f"mean step time ({unit})",
            )
            cf.add_trace(
                go.Bar(
                    x=[data.chip_name(names, c["chip"]) for c in chips],
                    y=[c["mean_step_ps"] / scale for c in chips],
                    hovertemplate=f"%{{x}}<br>mean %{{y:.4g}} {unit}<extra></extra>",
                    marker_color="#1e88e5",
                )
            )
            row.append(render.section(f"Per {data.device_noun(names)}", render.graph(cf, height=280)))
        parts.append(html.Div(row, className="grid2"))
    else:
        parts.append(render.empty(no_steps_text(data.run_info(store, run))))
    return html.Div(parts)


def render_overview_analysis(store: Store, st: dict[str, Any]) -> Any:
    """The analyzers' part of the Overview: the failure (if any), headline figures, the step-time
    split (where a host-bound run shows), per step and chip by category, top ops and findings."""
    run, steps = st["run"], tuple(st["steps"])
    names = data.chip_names(store, run)
    report = data.analysis(store, run)
    parts: list[Any] = [failure_cards(i, f) for i, f in enumerate(figures.failure_facts(report))]
    head, rest = figures.analysis_kpis(report)
    if head:
        parts.append(render.kpis([card(k) for k in head], id="overview-figures"))
    if rest:
        parts.append(
            html.Details(
                [
                    html.Summary(f"All analyzer figures ({len(rest)} more)"),
                    render.kpis([card(k) for k in rest]),
                ]
            )
        )
    split = figures.time_split(report)
    if split:
        parts.append(
            render.section(
                "Where step time goes",
                render.graph(split_figure(split), id="overview-split", height=130 + 60 * len(split)),
                help_text="Wall time: each instant of a step on each chip goes to the highest-priority category "
                "running (breakdown.share). TensorCore time: what the TensorCores waited for in their idle gaps "
                "(idle_gaps): a host-bound run shows here even when SparseCore work fills the wall time. "
                "The same figures as `scprof analyze --json`.",
            )
        )
    bd = data.breakdown_per_step(report, steps)
    if bd and bd["steps"]:
        parts.append(category_charts(bd, names))
    else:
        notes = (report.analyses["breakdown"].notes if "breakdown" in report.analyses else []) or [
            "the analyzers found no step windows"
        ]
        parts.append(render.empty("No step-time breakdown: " + "; ".join(notes) + "."))
    ops = report.analyses.get("ops")
    if ops and ops.figures.get("top"):
        parts.append(
            render.section(
                "Top ops (self time)",
                render.table(
                    ops.figures["top"][:10],
                    [
                        ("track_kind", "on", "text"),
                        ("name", "op", "text"),
                        ("category", "category", "text"),
                        ("events", "events", "count"),
                        ("self_ps", "self time", "ps"),
                        ("total_ps", "total", "ps"),
                        ("share", "share of its kind", "share"),
                        ("flops", "FLOPs", "flop"),
                        ("bytes", "bytes", "bytes"),
                    ],
                ),
                help_text="XProf's op profile: device work first; self time leaves out ops nested inside; "
                "the share is of the device's (or the host's) self time. `scprof analyze --json`: figures.ops.",
            )
        )
    top = report.findings[:5]
    parts.append(html.H4(f"Top findings ({len(report.findings)} in all)"))
    parts.append(
        html.Div([render.finding_card(f, run, compact=True) for f in top])
        if top
        else render.empty("No findings: the analyzers found nothing to flag in this run.")
    )
    parts.append(dcc.Link("all findings →", href=render.href("/findings", run=run)))
    return html.Div(parts)


# idle_gaps' causes of waiting (TensorCore gaps; a real capture's device): host input stands out
WAIT_COLORS = {
    "host": "#d81b60",
    "host_input": "#d81b60",
    "input_transfer": "#fb8c00",
    "launch": "#ffb300",
    "host_other": "#ffcc80",
    "sparsecore": "#43a047",
    "collective": "#8e24aa",
    "unknown": "#757575",
    "idle": "#bdbdbd",
}
BUSY_COLOR = "#cfd8dc"


def split_figure(bars: list[dict[str, Any]]) -> go.Figure:
    """Horizontal 100% bars, one per split of figures.time_split, a trace per part (legend: the part)."""
    fig = render.figure(barmode="stack", xaxis_title="share of the time named on the left", showlegend=True)
    fig.update_xaxes(tickformat=".0%", range=[0, 1])
    fig.update_yaxes(autorange="reversed")
    for bar in bars:
        y = f"{bar['name']}<br><span style='font-size:10px'>{render.plain(bar['scope'])}</span>"
        for part in bar["parts"]:
            source = part["source"]
            key = source.rsplit(".", 2)[-2] if source.startswith("idle_gaps.tensorcore.") else source.rsplit(".", 1)[-1]
            color = (
                render.CATEGORY_COLORS.get(key) if source.startswith("breakdown.") else WAIT_COLORS.get(key)
            ) or BUSY_COLOR
            share = part["share"]
            fig.add_trace(
                go.Bar(
                    y=[y],
                    x=[share],
                    name=part["name"],
                    orientation="h",
                    marker_color=color,
                    text=[format_value(share, "share") if share >= 0.04 else ""],
                    textposition="inside",
                    insidetextanchor="middle",
                    hovertemplate=f"{render.plain(part['name'])}: {format_value(share, 'share')}"
                    f"<br>{render.plain(bar['name'])}, {render.plain(bar['scope'])}<extra></extra>",
                )
            )
    fig.update_layout(legend=dict(orientation="h", y=-0.35), margin=dict(l=260, r=20, t=10, b=40))
    return fig


def category_charts(bd: dict[str, Any], names: dict[int, str]) -> html.Div:
    """Per step and per chip, each category's time (the breakdown's table)."""
    peak = max(sum(v[i] for v in bd["per_step"].values()) for i in range(len(bd["steps"])))
    unit, scale = time_unit(peak or 1)
    noun = data.device_noun(names)  # chip (TPU), GPU, CPU
    fig = render.figure(barmode="stack", xaxis_title="step", yaxis_title=f"time ({unit}, mean over {noun}s)")
    for cat, vals in bd["per_step"].items():
        fig.add_trace(
            render.step_series(
                bd["steps"],
                np.asarray(vals) / scale,
                stack="categories",
                name=cat,
                marker_color=render.CATEGORY_COLORS.get(cat),
                hovertemplate=f"{cat}<br>step %{{x}}: %{{y:.4g}} {unit}<extra></extra>",
            )
        )
    render.integer_axis(fig, bd["steps"])
    counted = set(bd["counted_steps"])
    over = steps_covered(bd["steps"], [s in counted for s in bd["steps"]])
    cf = render.figure(barmode="stack", xaxis_title=f"{noun} (mean {over})", yaxis_title=f"time per step ({unit})")
    for cat, vals in bd["per_chip"].items():
        cf.add_trace(
            go.Bar(
                x=[data.chip_name(names, c) for c in bd["chips"]],
                y=np.asarray(vals) / scale,
                name=cat,
                marker_color=render.CATEGORY_COLORS.get(cat),
                showlegend=False,
                hovertemplate=f"{cat}<br>%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
            )
        )
    return html.Div(
        [
            render.section("Step time by category", render.graph(fig, height=320)),
            render.section(f"Per {noun}, by category", render.graph(cf, height=320)),
        ],
        className="grid2",
    )


def failure_cards(i: int, f: dict[str, Any]) -> html.Div:
    """The run's `i`-th recorded failure as figures: what it is, the bytes asked for against the room there was."""
    where = f"{f['memory']} {f['scope']}".strip()
    src = f"failures.failures.{i}"
    cards = [data.Kpi("run failed", f["kind"], "text", "the failure recorded with the run", f"{src}.kind")]
    if f.get("requested_bytes") is not None:
        cards.append(
            data.Kpi(
                figures.failure_needed_label(f),
                f["requested_bytes"],
                "B",
                format_value(f["requested_bytes"], "bytes"),
                f"{src}.requested_bytes",
            )
        )
    if f.get("capacity_bytes") is not None:
        cards.append(
            data.Kpi(
                f"{where}: capacity",
                f["capacity_bytes"],
                "B",
                format_value(f["capacity_bytes"], "bytes"),
                f"{src}.capacity_bytes",
            )
        )
    return html.Div(
        [
            render.kpis([card(k) for k in cards]),
            html.P(f["message"], className="muted"),
        ],
        className="failure-facts",
    )

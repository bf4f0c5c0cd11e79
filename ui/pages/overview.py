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
from ui import data as D
from ui import render as R
from ui import state as S
from ui.pages.common import _no_runs, body, controls, pick_run, run_dropdown, run_header, state_store, steps_slider
from ui.timeline import time_unit


def layout_overview(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    bounds = D.step_bounds(store, run)
    steps = D.clamp_steps(bounds, S.steps_param(st.get("steps")))
    state = {"run": run, "steps": list(steps)}
    return html.Div(
        [
            controls(run_dropdown("overview-run", store, run), steps_slider("overview-steps", bounds, steps)),
            run_header(store, run),
            state_store("overview", state),
            body("overview"),
            R.section(
                "Step-time breakdown and findings",
                body("overview", "analysis"),
                help_text="From the analyzers (the same numbers as `scprof analyze`).",
            ),
        ]
    )


def render_overview(store: Store, st: dict[str, Any]) -> Any:
    """KPIs from SQL, step time per step, per-chip step time (fast on any run size)."""
    run, steps = st["run"], tuple(st["steps"])
    names = D.chip_names(store, run)
    kpis = D.overview_kpis(store, run, steps)
    tiles = [R.kpi(k.label, format_value(k.value, k.unit), k.detail) for k in kpis]
    st_times = D.step_times(store, run, steps)
    parts: list[Any] = [html.Div(tiles, className="kpis", id="overview-kpis")]
    if len(st_times["step"]):
        unit, scale = time_unit(float(st_times["step_ps"].max()))
        fig = R.figure(xaxis_title="step", yaxis_title=f"step time ({unit})")
        fig.add_trace(
            go.Scatter(
                x=st_times["step"],
                y=st_times["step_ps"] / scale,
                mode="lines+markers" if len(st_times["step"]) < 200 else "lines",
                name="step time",
                hovertemplate=f"step %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>",
            )
        )
        chips = D.chip_step_times(store, run, steps)
        row: list[Any] = [R.section("Step time per step", R.graph(fig, height=280))]
        if chips:
            cf = R.figure(
                xaxis_title=f"chip (mean {D.steps_covered(st_times)})", yaxis_title=f"mean step time ({unit})"
            )
            cf.add_trace(
                go.Bar(
                    x=[D.chip_name(names, c["chip"]) for c in chips],
                    y=[c["mean_step_ps"] / scale for c in chips],
                    hovertemplate=f"%{{x}}<br>mean %{{y:.4g}} {unit}<extra></extra>",
                    marker_color="#1e88e5",
                )
            )
            row.append(R.section("Per chip", R.graph(cf, height=280)))
        parts.append(html.Div(row, className="grid2"))
    else:
        parts.append(R.empty("This run has no steps (no step markers and no events tagged with a step)."))
    return html.Div(parts)


def render_overview_analysis(store: Store, st: dict[str, Any]) -> Any:
    """The analyzers' part of the Overview: wall-time split per step and chip, idle share, top findings."""
    run, steps = st["run"], tuple(st["steps"])
    names = D.chip_names(store, run)
    report = D.analysis(store, run)
    parts: list[Any] = []
    extra = D.analysis_kpis(report)
    head = [k for k in extra if k.label in D.HEADLINE_FIGURES]
    rest = [k for k in extra if k.label not in D.HEADLINE_FIGURES]
    if head:
        parts.append(
            html.Div([R.kpi(k.label, format_value(k.value, k.unit), k.detail) for k in head], className="kpis")
        )
    if rest:
        parts.append(
            html.Details(
                [
                    html.Summary(f"All analyzer figures ({len(rest)} more)"),
                    html.Div([R.kpi(k.label, format_value(k.value, k.unit), k.detail) for k in rest], className="kpis"),
                ]
            )
        )
    bd = D.breakdown_per_step(report, steps)
    if bd and bd["steps"]:
        peak = max(sum(v[i] for v in bd["per_step"].values()) for i in range(len(bd["steps"])))
        unit, scale = time_unit(peak or 1)
        fig = R.figure(barmode="stack", xaxis_title="step", yaxis_title=f"time ({unit}, mean over chips)")
        for cat, vals in bd["per_step"].items():
            fig.add_trace(
                go.Bar(
                    x=bd["steps"],
                    y=np.asarray(vals) / scale,
                    name=cat,
                    marker_color=R.CATEGORY_COLORS.get(cat),
                    hovertemplate=f"{cat}<br>step %{{x}}: %{{y:.4g}} {unit}<extra></extra>",
                )
            )
        counted = set(bd["counted_steps"])
        over = steps_covered(bd["steps"], [s in counted for s in bd["steps"]])
        cf = R.figure(barmode="stack", xaxis_title=f"chip (mean {over})", yaxis_title=f"time per step ({unit})")
        for cat, vals in bd["per_chip"].items():
            cf.add_trace(
                go.Bar(
                    x=[D.chip_name(names, c) for c in bd["chips"]],
                    y=np.asarray(vals) / scale,
                    name=cat,
                    marker_color=R.CATEGORY_COLORS.get(cat),
                    showlegend=False,
                    hovertemplate=f"{cat}<br>%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
                )
            )
        parts.append(
            html.Div(
                [
                    R.section("Step time by category", R.graph(fig, height=320)),
                    R.section("Per chip, by category", R.graph(cf, height=320)),
                ],
                className="grid2",
            )
        )
    else:
        parts.append(
            R.empty(
                "No step-time breakdown: " + "; ".join(n for a in report.analyses.values() for n in a.notes)
                if any(a.notes for a in report.analyses.values())
                else "No step-time breakdown for this run."
            )
        )
    ops = report.analyses.get("ops")
    if ops and ops.figures.get("top"):
        parts.append(
            R.section(
                "Top ops (self time)",
                R.table(
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
                ),  # fmt: skip
                help_text="XProf's op profile: device work first; self time leaves out ops nested inside; "
                "the share is of the device's (or the host's) self time. `scprof analyze --json`: figures.ops.",
            )
        )
    top = report.findings[:5]
    parts.append(html.H4(f"Top findings ({len(report.findings)} in all)"))
    parts.append(
        html.Div([R.finding_card(f, run, compact=True) for f in top])
        if top
        else R.empty("No findings: the analyzers found nothing to flag in this run.")
    )
    parts.append(dcc.Link("all findings →", href=R.href("/findings", run=run)))
    return html.Div(parts)

"""The Tuning page: a run's latest `scprof tune` session (whatif_trials): step time per trial with
the accepted path, the trials in a table, and the tuned config to download; how a search went
and what it settled on."""

from __future__ import annotations

import shlex
from typing import Any

import plotly.graph_objects as go
from dash import html

from profiler.store import Store
from profiler.units import ci_text, format_ps, signed_pct
from ui import data, render, whatif_data
from ui.pages.common import page_run, run_page
from ui.render import time_unit

GOOD, TRIED, FAILED = "#2e7d32", "#90a4ae", "#c62828"


def layout_tuning(store: Store, st: dict[str, str]) -> Any:
    run = page_run(store, st)
    return run_page("tuning", store, run, {"run": run})


def render_tuning(store: Store, st: dict[str, Any]) -> Any:
    run = st["run"]
    name = data.run_info(store, run)["name"]
    t = whatif_data.tuning(store, run)
    if t is None:
        return render.empty(
            f"No tuning session started from {name!r}. Search for a faster config, each step proven by "
            "simulation, with:",
            f"scprof tune {shlex.quote(name)}",
        )
    trials = t["trials"]
    accepted = [r for r in trials if r["accepted"]]
    failed = sum(r["failed"] for r in trials)
    best = t["best"]
    start_ps = t["start_step_time_ps"]
    if best is not None:
        total = (best["step_time_ps"] - start_ps) / start_ps if start_ps else None
        headline = (
            f"{len(trials)} trials, {len(accepted)} accepted, {failed} failed: "
            f"{format_ps(start_ps)} -> {format_ps(best['step_time_ps'])}"
            + (f" ({signed_pct(total)})" if total is not None else "")
            + f" with {best['change_text']}"
        )
    else:
        headline = f"{len(trials)} trials, none accepted ({failed} failed): no faster config found"
    sessions = t["sessions"]
    parts: list[Any] = [
        html.P(
            [
                headline,
                html.Span(f" · latest of {sessions} tuning sessions" if sessions > 1 else "", className="muted"),
            ],
            className="status",
            id="tuning-summary",
        )
    ]
    if best is not None:
        parts.append(
            html.Div(
                [
                    html.A(
                        "download the tuned config (TOML)",
                        href=render.href("/download/tuned.toml", run=run, session=t["session"]),
                        id="tuning-download",
                        className="button small",
                    ),
                    html.Span(" then: scprof record tuned.toml", className="muted"),
                ]
            )
        )
    parts.append(
        render.section(
            "Step time per trial",
            render.graph(trial_figure(t), id="tuning-graph", height=340),
            help_text="Each trial's mean step time over its counted steps; the accepted trials, "
            "joined from the starting run, are the path the search took; failed trials sit at "
            "the step time they were measured against.",
        )
    )
    rows = [
        {
            **r,
            "ci": ci_text(r["ci_low"], r["ci_high"]),
            "accepted_text": "accepted" if r["accepted"] else "",
            "delta": signed_pct(r["change"]) if r["change"] is not None else None,
        }
        for r in trials
    ]
    parts.append(
        render.section(
            "Trials",
            render.table(
                rows,
                [
                    ("seq", "#", "text"),
                    ("change_text", "changes (from the starting run)", "wrap"),
                    ("step_time_ps", "step time", "ps"),
                    ("delta", "change", "text"),
                    ("ci", "95% interval", "text"),
                    ("verdict", "verdict", "text"),
                    ("accepted_text", "taken", "text"),
                    ("reason", "why", "wrap"),  # whole and wrapped: it runs off the page at 1,400 px
                ],
                id="tuning-trials",
            ),
            help_text="Each change is measured against the best run so far (scprof compare's interval).",
        )
    )
    return html.Div(parts)


def trial_figure(t: dict[str, Any]) -> go.Figure:
    """Step time (human units) per trial by its order: tried, failed, and the accepted path."""
    trials = t["trials"]
    values = [r["step_time_ps"] for r in trials if r["step_time_ps"] is not None] + [t["start_step_time_ps"] or 0]
    unit, scale = time_unit(max(values))
    fig = render.figure(xaxis_title="trial", yaxis_title=f"mean step time ({unit})")
    tried = [r for r in trials if not r["failed"] and not r["accepted"] and r["step_time_ps"] is not None]
    fig.add_trace(_markers(tried, "step_time_ps", scale, unit, "tried", TRIED, "circle"))
    failed = [r for r in trials if r["failed"]]
    if failed:
        fig.add_trace(_markers(failed, "ref_step_time_ps", scale, unit, "failed", FAILED, "x"))
    xs, ys = zip(*t["path"], strict=True)
    fig.add_trace(
        go.Scatter(
            x=list(xs),
            y=[(y or 0) / scale for y in ys],
            mode="lines+markers",
            name="accepted path",
            line=dict(color=GOOD, width=2),
            marker=dict(color=GOOD, size=11, symbol="diamond"),
            text=["starting run"] + [render.plain(r["change_text"]) for r in trials if r["accepted"]],
            hovertemplate=f"#%{{x}}: %{{y:.4g}} {unit}<br>%{{text}}<extra>accepted</extra>",
        )
    )
    render.integer_axis(fig, [0, *xs, *(r["seq"] for r in trials)])
    return fig


def _markers(
    rows: list[dict[str, Any]], key: str, scale: float, unit: str, name: str, color: str, symbol: str
) -> go.Scatter:
    return go.Scatter(
        x=[r["seq"] for r in rows],
        y=[(r[key] or 0) / scale for r in rows],
        mode="markers",
        name=name,
        marker=dict(color=color, size=9, symbol=symbol),
        text=[render.plain(f"{r['change_text']}: {r['reason'] or r['verdict']}") for r in rows],
        hovertemplate=f"#%{{x}}: %{{y:.4g}} {unit}<br>%{{text}}<extra>{name}</extra>",
    )

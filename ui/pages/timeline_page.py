"""The Timeline page (its data: ui/timeline.py): a run's tracks as exact events or per-column busy
shares, zoomed through the URL, with Perfetto downloads; to see what each core did when."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from profiler.store import Store
from profiler.trace_fields import TYPED_FIELDS
from profiler.units import format_value
from ui import data as D
from ui import render as R
from ui import state as S
from ui.pages.common import (
    _no_runs,
    body,
    chips_checklist,
    controls,
    pick_run,
    run_dropdown,
    run_header,
    state_store,
    steps_slider,
)
from ui.timeline import EXACT_LIMIT, run_tracks, select_tracks, time_unit, timeline_view


def layout_timeline(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    bounds = D.step_bounds(store, run)
    steps = D.clamp_steps(bounds, S.steps_param(st.get("steps")))
    tracks = run_tracks(store, run)
    chips = sorted({t.chip for t in tracks if t.chip >= 0})
    chosen = S.int_list(st.get("chips"))
    chosen = [c for c in chosen if c in chips] if chosen is not None else chips[:1]
    state = {
        "run": run,
        "steps": list(steps),
        "chips": chosen,
        "t0": S.int_param(st.get("t0")),
        "t1": S.int_param(st.get("t1")),
    }
    return html.Div(
        [
            controls(
                run_dropdown("timeline-run", store, run),
                chips_checklist("timeline-chips", chips, chosen, D.chip_names(store, run)),
                steps_slider("timeline-steps", bounds, steps),
            ),
            run_header(store, run),
            html.Div(
                [
                    dcc.Link("whole run", href=R.href("/timeline", run=run, chips=chosen), className="button small"),
                    html.Span(id="timeline-perfetto"),
                ],
                className="toolbar",
            ),
            state_store("timeline", state),
            dcc.Store(id="timeline-view"),
            body("timeline"),
        ]
    )


def render_timeline(store: Store, st: dict[str, Any]) -> tuple[Any, dict[str, Any], Any]:
    """(body, view {t0, t1, scale}, Perfetto links): exact events or per-column aggregates."""
    run = st["run"]
    tracks = select_tracks(run_tracks(store, run), st.get("chips"))
    info = D.run_info(store, run)
    if st.get("t0") is not None and st.get("t1") is not None and st["t1"] > st["t0"]:
        t0, t1 = st["t0"], st["t1"]
    else:
        window = D.steps_window(store, run, tuple(st["steps"])) if st["steps"][1] >= st["steps"][0] else None
        t0, t1 = window or (int(info["first_ps"] or 0), int(info["last_ps"] or 1))
    view = timeline_view(store, run, tracks, t0, t1)
    t0, t1 = view.t0, view.t1  # a wide view covers whole bins of the run's timeline summary
    unit, scale = time_unit(t1 - t0)
    links = _perfetto_links(store, run, t0, t1)
    status = (
        f"{view.mode} view · window {format_value(t0, 'ps')} – {format_value(t1, 'ps')} ({format_value(t1 - t0, 'ps')}) · "
        f"{view.events_in_window:,} events in window on {len(tracks)} tracks"
    )
    if view.mode == "aggregated":
        status += f" · {view.columns} columns of {format_value(view.column_ps, 'ps')} (zoom in to ≤ {EXACT_LIMIT:,} events for exact events)"
    instant = info["first_ps"] is not None and info["first_ps"] == info["last_ps"]
    if view.mode == "empty" or instant:  # an instant has no width to draw (a failed compile's one event)
        msg = "No events in this window." if tracks else "This run has no timeline tracks."
        if instant and tracks:
            msg = (
                f"Nothing to draw: the run's {info['events']:,} event(s) all sit at "
                f"{format_value(info['first_ps'], 'ps')} with no duration"
                + (" (it failed before any step ran: see the note above)." if info["status"] == "failed" else ".")
            )
        return (
            html.Div([html.P(status, id="timeline-status", className="status"), R.empty(msg)]),
            {"t0": t0, "t1": t1, "scale": scale},
            links,
        )
    fig = _timeline_figure(view, unit, scale)
    height = max(300, 60 + 22 * len(tracks))
    graph = dcc.Graph(
        id="timeline-graph", figure=fig, config={**R.GRAPH_CONFIG, "scrollZoom": False}, style={"height": f"{height}px"}
    )
    return (
        html.Div(
            [
                html.P(status, id="timeline-status", className="status", **{"data-mode": view.mode}),
                graph,
                html.P(
                    "Drag across the chart to zoom into a window; double-click to zoom out to the steps chosen "
                    "above. Hover shows an event's arguments (exact view) or a column's busy share.",
                    className="muted",
                ),
            ]
        ),
        {"t0": t0, "t1": t1, "scale": scale},
        links,
    )


def _timeline_figure(view, unit: str, scale: float) -> go.Figure:
    labels = [R.plain(t.label) for t in view.tracks]
    fig = R.figure(
        xaxis_title=f"time ({unit})", barmode="overlay", hovermode="closest", showlegend=view.mode == "exact"
    )
    fig.update_layout(margin=dict(l=260, r=20, t=10, b=40), legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    fig.update_yaxes(
        autorange="reversed", fixedrange=True, type="category", categoryorder="array", categoryarray=labels
    )
    fig.update_xaxes(range=[view.t0 / scale, view.t1 / scale])
    if view.mode == "aggregated":
        x = (view.t0 + (np.arange(view.columns) + 0.5) * view.column_ps) / scale
        z = np.round(view.busy, 3).astype(np.float32)
        fig.add_trace(
            go.Heatmap(
                x=x.astype(np.float64),
                y=labels,
                z=z,
                customdata=view.counts.astype(np.int32),
                zmin=0,
                zmax=1,
                colorscale=[[0, "#e3f2fd"], [0.5, "#42a5f5"], [1, "#0d47a1"]],
                colorbar=dict(title="busy", tickformat=".0%"),
                hovertemplate=f"%{{y}}<br>%{{x:.6g}} {unit}<br>busy %{{z:.0%}}<br>%{{customdata}} events<extra></extra>",
                hoverongaps=False,
            )
        )
        return fig
    label_of = {t.track_id: R.plain(t.label) for t in view.tracks}
    by_name: dict[str, list[dict]] = {}
    for e in view.events:
        by_name.setdefault(e["category"] if e["category"] == "step" else e["name"], []).append(e)
    palette = [
        "#1e88e5",
        "#43a047",
        "#fb8c00",
        "#8e24aa",
        "#e53935",
        "#00897b",
        "#6d4c41",
        "#3949ab",
        "#c0ca33",
        "#d81b60",
        "#546e7a",
        "#fdd835",
    ]
    names = sorted(by_name)  # colours and legend order by name
    # Longest events drawn first: an event nested in another on the same track (a host loop's
    # `next_batch` inside its `train` step) is drawn over its parent, not hidden under it.
    for name in sorted(names, key=lambda n: -max(e["dur_ps"] for e in by_name[n])):
        i, evs = names.index(name), by_name[name]
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=[label_of[e["track_id"]] for e in evs],
                x=[max(e["dur_ps"], 1) / scale for e in evs],
                base=[e["start_ps"] / scale for e in evs],
                name=name,
                legendrank=1000 + i,
                marker_color="#9e9e9e" if name == "step" else palette[i % len(palette)],
                marker_line_width=0.5,
                marker_line_color="white",
                width=0.8,
                hovertext=[_event_hover(e) for e in evs],
                hoverinfo="text",
            )
        )
    return fig


def _event_hover(e: dict[str, Any]) -> str:
    lines = [
        f"<b>{R.plain(e['name'])}</b>",
        f"start {format_value(e['start_ps'], 'ps')} · dur {format_value(e['dur_ps'], 'ps')}",
    ]
    for f in TYPED_FIELDS:  # step markers carry the category `step`: not worth a line
        v = e.get(f.value_column)
        if v is not None and not (f.name == "category" and v == "step"):
            lines.append(f"{f.name}: {R.plain(format_value(v, f.unit))}")
    lines += [f"{R.plain(k)}: {R.plain(v)}" for k, v in list(e.get("args", {}).items())[:12]]
    return "<br>".join(lines)


def _perfetto_links(store: Store, run: int, t0: int, t1: int) -> Any:
    try:
        import exporters.perfetto  # noqa: F401
    except ImportError:
        return html.Span(
            "Perfetto export not available in this build (exporters/perfetto/ missing).", className="muted"
        )
    st = store.rows(
        "SELECT min(step) AS lo, max(step) AS hi FROM steps WHERE run_id = ? AND start_ps < ? AND start_ps + dur_ps > ?",
        [run, t1, t0],
    )[0]
    links: list[Any] = [
        html.A(
            "Download Perfetto trace (whole run)",
            href=R.href("/download/perfetto", run=run),
            className="button small",
            id="perfetto-run",
        )
    ]
    if st["lo"] is not None:
        links.append(
            html.A(
                f"(visible steps {st['lo']}–{st['hi']})",
                href=R.href("/download/perfetto", run=run, steps=S.steps_text((st["lo"], st["hi"]))),
                className="button small",
            )
        )
    links.append(html.Span(" open it at ui.perfetto.dev", className="muted"))
    return links


def zoom_search(search: str, relayout: dict[str, Any] | None, view: dict[str, Any] | None) -> str | None:
    """The URL after a zoom on the timeline (None when the relayout is not a zoom)."""
    if not relayout or not view:
        return None
    if relayout.get("xaxis.autorange"):
        return S.with_params(search, t0=None, t1=None)
    rng = relayout.get("xaxis.range")
    a = relayout.get("xaxis.range[0]", rng[0] if rng else None)
    b = relayout.get("xaxis.range[1]", rng[1] if rng else None)
    if a is None or b is None:
        return None
    scale = float(view.get("scale") or 1)
    t0, t1 = int(round(float(a) * scale)), int(round(float(b) * scale))
    if t1 <= t0:
        return None
    return S.with_params(search, t0=max(t0, 0), t1=t1)

"""The pages: `layout_*` builds a page's controls from its URL state; `render_*` is its main
data callback (store + state -> components), called by ui/app.py and by the tests.

Every render returns components, never raises for missing data: an empty state says
what is missing and how to get it. Times and sizes carry units everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from analyzers.breakdown import step_stats
from analyzers.findings import SEVERITIES, Finding
from analyzers.registry import ANALYZERS
from analyzers.timeline import CATEGORIES
from profiler.sql_guard import QueryError, run_query
from profiler.stdlib import COUNTED_RULE, steps_covered
from profiler.store import Store
from scprof.formatting import format_cell
from ui import data as D
from ui import queries as Q
from ui import render as R
from ui import state as S
from ui.downloads import SQL_MAX_ROWS, SQL_PAGE_MAX_BYTES, SQL_TIMEOUT_S
from ui.timeline import EXACT_LIMIT, run_tracks, select_tracks, time_unit, timeline_view

NO_RUNS = (
    "No runs in this store yet. Record one, then reload this page:",
    "scprof record configs/baseline.toml && scprof record configs/tuned.toml",
)
SQL_SHOWN_ROWS, SQL_SHOWN_CHARS = 500, 1_000  # rows shown, characters shown of a cell (all in the CSV)


# ---- shared controls ---------------------------------------------------------------------------


def pick_run(store: Store, st: dict[str, str], key: str = "run", fallback: int = -1) -> int | None:
    """The run named in the URL, else the `fallback`-th newest run (-1: newest)."""
    run = D.resolve(store, st.get(key))
    if run is None:
        ids = [r["value"] for r in D.run_options(store)]
        run = ids[fallback] if len(ids) >= abs(fallback) else (ids[-1] if ids else None)
    return run


def run_dropdown(id: str, store: Store, value: int | None, label: str = "run") -> html.Label:
    return html.Label(
        [
            label,
            dcc.Dropdown(id=id, options=D.run_options(store), value=value, clearable=False, className="run-dropdown"),
        ],
        className="control",
    )


def steps_slider(id: str, bounds: tuple[int, int] | None, value: tuple[int, int]) -> html.Label:
    if bounds is None:
        return html.Label(["steps", html.Span(" (no steps in this run)", className="muted")], className="control")
    lo, hi = bounds
    return html.Label(
        [
            f"steps ({lo}–{hi})",
            dcc.RangeSlider(
                id=id,
                min=lo,
                max=max(hi, lo + 1),
                step=1,
                value=[value[0], value[1]],
                allowCross=False,
                marks=None,
                tooltip={"placement": "bottom", "always_visible": True},
                updatemode="mouseup",
            ),
        ],
        className="control slider",
    )


def chips_checklist(id: str, chips: list[int], value: list[int]) -> html.Label:
    return html.Label(
        [
            "chips",
            dcc.Checklist(id=id, options=[{"label": f"TPU:{c}", "value": c} for c in chips], value=value, inline=True),
        ],
        className="control",
    )


def state_store(page: str, state: dict[str, Any]) -> dcc.Store:
    return dcc.Store(id=f"{page}-state", data=state)


def body(page: str, extra: str = "body") -> dcc.Loading:
    return dcc.Loading(html.Div(id=f"{page}-{extra}", className="page-body"), type="default", delay_show=150)


def controls(*children: Any) -> html.Div:
    return html.Div([c for c in children if c is not None], className="controls")


def run_header(store: Store, run: int) -> html.Div:
    info = D.run_info(store, run)
    hw = f"{info.get('generation') or '?'} × {info.get('num_chips') or '?'} chips"
    return html.Div(
        [
            html.Span(info["name"], className="run-name"),
            html.Span(
                f" #{run} · {info['source']} · {hw} · {info['steps']} steps · {info['events']:,} events",
                className="muted",
            ),
        ],
        className="run-header",
    )


def _no_runs() -> html.Div:
    return R.empty(*NO_RUNS)


# ---- Runs ------------------------------------------------------------------------------------


def layout_runs(store: Store, st: dict[str, str]) -> Any:
    opts = D.run_options(store)
    if not opts:
        return _no_runs()
    ids = [o["value"] for o in opts]
    base = D.resolve(store, st.get("base")) or (ids[-2] if len(ids) > 1 else ids[0])
    cand = D.resolve(store, st.get("cand")) or ids[-1]
    sort_opts = [{"label": k.replace("_ps", "").replace("_", " "), "value": k} for k in D.RUN_SORT_KEYS]
    return html.Div(
        [
            controls(
                html.Label(
                    [
                        "filter",
                        dcc.Input(
                            id="runs-filter",
                            value=st.get("filter", ""),
                            debounce=True,
                            placeholder="name, source, status, tags…",
                            type="text",
                        ),
                    ],
                    className="control",
                ),
                html.Label(
                    [
                        "sort by",
                        dcc.Dropdown(
                            id="runs-sort", options=sort_opts, value=st.get("sort", "run_id"), clearable=False
                        ),
                    ],
                    className="control",
                ),
                dcc.Checklist(
                    id="runs-desc",
                    options=[{"label": "descending", "value": "desc"}],
                    value=["desc"] if st.get("desc") == "1" else [],
                    className="control",
                ),
            ),
            controls(
                run_dropdown("runs-base", store, base, "baseline"),
                run_dropdown("runs-cand", store, cand, "candidate"),
                dcc.Link(
                    "Compare →",
                    href=R.href("/compare", base=base, cand=cand),
                    id="runs-compare-link",
                    className="button",
                ),
            ),
            state_store("runs", {**st, "base": base, "cand": cand}),
            body("runs"),
        ]
    )


def render_runs(store: Store, st: dict[str, Any]) -> Any:
    rows = D.runs(store, st.get("filter", ""), st.get("sort", "run_id"), st.get("desc") == "1")
    if not rows and not st.get("filter"):
        return _no_runs()
    if not rows:
        return R.empty(f"No run matches the filter {st.get('filter')!r}.")
    for r in rows:
        rid = r["run_id"]
        r["name_link"] = dcc.Link(r["name"], href=R.href("/overview", run=rid))
        r["pages"] = html.Span(
            [
                dcc.Link("timeline", href=R.href("/timeline", run=rid)),
                " · ",
                dcc.Link("findings", href=R.href("/findings", run=rid)),
                " · ",
                dcc.Link("compare", href=R.href("/compare", base=st.get("base"), cand=rid)),
            ]
        )
    cols = [
        ("run_id", "id", "count"),
        ("name_link", "name", "link"),
        ("source", "source", "text"),
        ("hardware", "hardware", "text"),
        ("steps", "steps", "count"),
        ("events", "events", "count"),
        ("mean_step_ps", "mean step time (counted steps)", "ps"),
        ("span_ps", "span", "ps"),
        ("status_text", "status", "text"),
        ("tags", "tags", "text"),
        ("ingested", "ingested", "text"),
        ("pages", "open", "link"),
    ]
    note = f"{len(rows)} run(s). Mean step time: over each run's counted steps ({COUNTED_RULE})."
    return html.Div([R.table(rows, cols, id="runs-table"), html.P(note, className="muted")])


# ---- Overview ----------------------------------------------------------------------------------


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
    kpis = D.overview_kpis(store, run, steps)
    tiles = [R.kpi(k.label, R.fmt(k.value, k.unit), k.detail) for k in kpis]
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
                    x=[f"TPU:{c['chip']}" for c in chips],
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
    report = D.analysis(store, run)
    parts: list[Any] = []
    extra = D.analysis_kpis(report)
    head = [k for k in extra if k.label in D.HEADLINE_FIGURES]
    rest = [k for k in extra if k.label not in D.HEADLINE_FIGURES]
    if head:
        parts.append(html.Div([R.kpi(k.label, R.fmt(k.value, k.unit), k.detail) for k in head], className="kpis"))
    if rest:
        parts.append(
            html.Details(
                [
                    html.Summary(f"All analyzer figures ({len(rest)} more)"),
                    html.Div([R.kpi(k.label, R.fmt(k.value, k.unit), k.detail) for k in rest], className="kpis"),
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
        over = steps_covered(bd["steps"], [s in set(bd["counted_steps"]) for s in bd["steps"]])
        cf = R.figure(barmode="stack", xaxis_title=f"chip (mean {over})", yaxis_title=f"time per step ({unit})")
        for cat, vals in bd["per_chip"].items():
            cf.add_trace(
                go.Bar(
                    x=[f"TPU:{c}" for c in bd["chips"]],
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
    top = report.findings[:5]
    parts.append(html.H4(f"Top findings ({len(report.findings)} in all)"))
    parts.append(
        html.Div([R.finding_card(f, run, compact=True) for f in top])
        if top
        else R.empty("No findings: the analyzers found nothing to flag in this run.")
    )
    parts.append(dcc.Link("all findings →", href=R.href("/findings", run=run)))
    return html.Div(parts)


# ---- Timeline ----------------------------------------------------------------------------------


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
                chips_checklist("timeline-chips", chips, chosen),
                steps_slider("timeline-steps", bounds, steps),
            ),
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
    if st.get("t0") is not None and st.get("t1") is not None and st["t1"] > st["t0"]:
        t0, t1 = st["t0"], st["t1"]
    else:
        window = D.steps_window(store, run, tuple(st["steps"])) if st["steps"][1] >= st["steps"][0] else None
        info = D.run_info(store, run)
        t0, t1 = window or (int(info["first_ps"] or 0), int(info["last_ps"] or 1))
    view = timeline_view(store, run, tracks, t0, t1)
    t0, t1 = view.t0, view.t1  # a wide view covers whole bins of the run's timeline summary
    unit, scale = time_unit(t1 - t0)
    links = _perfetto_links(store, run, t0, t1)
    status = (
        f"{view.mode} view · window {R.fmt(t0, 'ps')} – {R.fmt(t1, 'ps')} ({R.fmt(t1 - t0, 'ps')}) · "
        f"{view.events_in_window:,} events in window on {len(tracks)} tracks"
    )
    if view.mode == "aggregated":
        status += f" · {view.columns} columns of {R.fmt(view.column_ps, 'ps')} (zoom in to ≤ {EXACT_LIMIT:,} events for exact events)"
    if view.mode == "empty":
        msg = "No events in this window." if tracks else "This run has no timeline tracks."
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
    for i, (name, evs) in enumerate(sorted(by_name.items())):
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=[label_of[e["track_id"]] for e in evs],
                x=[max(e["dur_ps"], 1) / scale for e in evs],
                base=[e["start_ps"] / scale for e in evs],
                name=name,
                marker_color="#9e9e9e" if name == "step" else palette[i % len(palette)],
                marker_line_width=0.5,
                marker_line_color="white",
                width=0.8,
                hovertext=[_event_hover(e) for e in evs],
                hoverinfo="text",
            )
        )
    return fig


ARG_UNITS = {
    "dur_ps": "ps",
    "bytes": "bytes",
    "flops": "count",
    "ids": "count",
    "unique_ids": "count",
    "dropped_ids": "count",
}


def _event_hover(e: dict[str, Any]) -> str:
    lines = [f"<b>{R.plain(e['name'])}</b>", f"start {R.fmt(e['start_ps'], 'ps')} · dur {R.fmt(e['dur_ps'], 'ps')}"]
    for k in (
        "step",
        "category",
        "table_name",
        "sc",
        "minibatch",
        "ids",
        "unique_ids",
        "dropped_ids",
        "bytes",
        "flops",
    ):
        if e.get(k) is not None and not (k == "category" and e[k] == "step"):
            lines.append(f"{k}: {R.fmt(e[k], ARG_UNITS.get(k, 'text')) if k in ARG_UNITS else R.plain(e[k])}")
    lines += [f"{R.plain(k)}: {R.plain(v)}" for k, v in list(e.get("args", {}).items())[:12]]
    return "<br>".join(lines)


def _perfetto_links(store: Store, run: int, t0: int, t1: int) -> Any:
    try:
        import exporters.perfetto  # noqa: F401
    except ImportError:
        return html.Span(
            "Perfetto export not available in this build (exporters/perfetto.py missing).", className="muted"
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


# ---- SparseCore --------------------------------------------------------------------------------

SC_METRICS = {
    "ids": ("IDs per partition", "ids_ratio", "max_ids_per_partition"),
    "unique_ids": ("unique IDs per partition", "unique_ratio", "max_unique_ids_per_partition"),
    "minibatches": ("minibatches", None, None),
    "dropped_ids": ("dropped IDs", None, None),
}


def layout_sparsecore(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    bounds = D.step_bounds(store, run)
    steps = D.clamp_steps(bounds, S.steps_param(st.get("steps")))
    tables, _ = D.sc_tables(store, run)
    chosen = [t for t in S.str_list(st.get("tables")) if t in tables]
    metric = st.get("metric") if st.get("metric") in SC_METRICS else "ids"
    return html.Div(
        [
            controls(
                run_dropdown("sparsecore-run", store, run),
                steps_slider("sparsecore-steps", bounds, steps),
                html.Label(
                    [
                        "tables (none chosen: all)",
                        dcc.Dropdown(
                            id="sparsecore-tables", options=tables, value=chosen, multi=True, placeholder="all tables"
                        ),
                    ],
                    className="control wide",
                ),
                html.Label(
                    [
                        "metric",
                        dcc.RadioItems(
                            id="sparsecore-metric",
                            value=metric,
                            inline=True,
                            options=[{"label": v[0], "value": k} for k, v in SC_METRICS.items()],
                        ),
                    ],
                    className="control",
                ),
            ),
            run_header(store, run),
            state_store("sparsecore", {"run": run, "steps": list(steps), "tables": chosen, "metric": metric}),
            body("sparsecore"),
        ]
    )


def render_sparsecore(store: Store, st: dict[str, Any]) -> Any:
    run, steps, metric = st["run"], tuple(st["steps"]), st.get("metric", "ids")
    d = D.sparsecore(store, run, steps, st.get("tables") or [])
    if d["empty"]:
        return R.empty(
            "This run records no SparseCore partition statistics or SparseCore ops with IDs "
            "(the emulator writes them; imported XProf captures usually lack them)."
        )
    title, ratio_key, limit_col = SC_METRICS[metric]
    parts: list[Any] = []
    if not d["from_stats"]:
        parts.append(
            R.note(
                "No partition statistics in this run: figures come from SparseCore op events "
                "(forward ops), and the compiled limits are unknown."
            )
        )
    bucket = f" (columns of {d['step_bucket']} steps, highest per column)" if d["step_bucket"] > 1 else ""
    h = 90 + 16 * len(d["partitions"])
    fig = R.figure(xaxis_title="step" + bucket)
    fig.add_trace(
        go.Heatmap(
            x=d["steps"],
            y=d["partitions"],
            z=d["matrices"][metric],
            colorscale="Viridis",
            colorbar=dict(title=metric),
            hoverongaps=False,
            hovertemplate=f"%{{y}}<br>step %{{x}}<br>{title}: %{{z:,.0f}}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    parts.append(R.section(f"{title} per SparseCore × step", R.graph(fig, id="sc-heatmap", height=h)))
    if ratio_key and np.isfinite(d["matrices"][ratio_key]).any():
        ratio = d["matrices"][ratio_key]
        rf = R.figure(xaxis_title="step" + bucket)
        rf.add_trace(
            go.Heatmap(
                x=d["steps"],
                y=d["partitions"],
                z=ratio,
                zmid=1.0,
                colorscale="RdBu_r",
                colorbar=dict(title="× limit"),
                hoverongaps=False,
                hovertemplate="%{y}<br>step %{x}<br>%{z:.2f} × the compiled limit<extra></extra>",
            )
        )
        rf.update_yaxes(autorange="reversed")
        parts.append(
            R.section(
                f"{title} against the compiled limit ({limit_col})",
                R.graph(rf, height=h),
                help_text="Highest ratio over the chosen tables. Above 1 (red): the partition overflows its "
                "limit, so the step is split into minibatches or IDs are dropped.",
            )
        )
    elif ratio_key:
        parts.append(R.note("No compiled limits recorded for these tables: no comparison with the limit."))
    sk = R.figure(xaxis_title="step" + bucket)
    sk.add_trace(
        go.Scatter(
            x=d["steps"],
            y=d["skew"],
            name="skew (max / mean IDs per partition)",
            mode="lines",
            hovertemplate="step %{x}<br>skew %{y:.2f}×<extra></extra>",
        )
    )
    sk.add_trace(
        go.Scatter(
            x=d["steps"],
            y=d["minibatches_per_step"],
            name="minibatches (most split partition)",
            mode="lines",
            yaxis="y2",
            hovertemplate="step %{x}<br>%{y:.0f} minibatches<extra></extra>",
        )
    )
    sk.add_trace(
        go.Bar(
            x=d["steps"],
            y=d["dropped_per_step"],
            name="dropped IDs",
            yaxis="y2",
            opacity=0.4,
            hovertemplate="step %{x}<br>%{y:,.0f} dropped IDs<extra></extra>",
        )
    )
    sk.update_layout(
        yaxis=dict(title="skew (×)"), yaxis2=dict(title="minibatches / dropped IDs", overlaying="y", side="right")
    )
    parts.append(R.section("Skew, minibatches and dropped IDs over time", R.graph(sk, height=300)))
    if d["tables"]:
        parts.append(
            R.section(
                "Per table",
                R.table(
                    d["tables"],
                    [
                        ("table_name", "table", "text"),
                        ("max_ids", "max IDs / partition", "count"),
                        ("max_ids_per_partition", "limit", "count"),
                        ("max_unique_ids", "max unique IDs", "count"),
                        ("max_unique_ids_per_partition", "unique limit", "count"),
                        ("minibatches_per_step", "minibatches / step", "count"),
                        ("dropped_ids", "dropped IDs", "count"),
                        ("skew", "skew (max/mean)", "count"),
                    ],
                    id="sc-tables",
                ),
            )
        )
    return html.Div(parts)


# ---- Memory ------------------------------------------------------------------------------------


def layout_memory(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    bounds = D.step_bounds(store, run)
    steps = D.clamp_steps(bounds, S.steps_param(st.get("steps")))
    chips = sorted({c["chip"] for c in D.counters(store, run) if c["chip"] >= 0})
    chosen = S.int_list(st.get("chips"))
    chosen = [c for c in chosen if c in chips] if chosen is not None else chips[:1]
    return html.Div(
        [
            controls(
                run_dropdown("memory-run", store, run),
                chips_checklist("memory-chips", chips, chosen),
                steps_slider("memory-steps", bounds, steps),
            ),
            run_header(store, run),
            state_store("memory", {"run": run, "steps": list(steps), "chips": chosen}),
            body("memory"),
        ]
    )


def render_memory(store: Store, st: dict[str, Any]) -> Any:
    run, steps, chips = st["run"], tuple(st["steps"]), st.get("chips") or []
    series = D.counters(store, run)
    if not series:
        return R.empty("This run records no counters (HBM heap/stack, SPMEM, ...).")
    info = D.run_info(store, run)
    window = D.steps_window(store, run, steps) if steps[1] >= steps[0] else None
    t0, t1 = window or (int(info["first_ps"] or 0), int(info["last_ps"] or 1) + 1)
    unit, scale = time_unit(t1 - t0)
    parts: list[Any] = []
    hbm = [c for c in series if D.is_hbm(c) and c["chip"] in chips]
    spmem = [c for c in series if D.is_spmem(c) and c["chip"] in chips]
    other = [
        c
        for c in series
        if not D.is_hbm(c) and not D.is_hbm_part(c) and not D.is_spmem(c) and (c["chip"] in chips or c["chip"] < 0)
    ]
    data = D.counter_series(store, run, [c["track_id"] for c in hbm + spmem + other], t0, t1)

    def line_chart(cs: list[dict], ytitle: str, capacity: float | None = None, cap_label: str = "") -> go.Figure:
        fig = R.figure(xaxis_title=f"time ({unit})", yaxis_title=ytitle)
        bytes_axis = all(c["unit"] == "bytes" for c in cs)
        div = 2**30 if bytes_axis else 1
        for c in cs:
            s = data.get(c["track_id"])
            if s is None:
                continue
            name = f"TPU:{c['chip']} {c['counter']}" if c["chip"] >= 0 else c["counter"]
            fig.add_trace(
                go.Scatter(
                    x=s["ts_ps"] / scale,
                    y=s["value"] / div,
                    mode="lines",
                    line_shape="hv",
                    name=name,
                    hovertemplate=f"{R.plain(name)}<br>%{{x:.4g}} {unit}<br>%{{y:,.3f}} "
                    f"{'GiB' if bytes_axis else c['unit']}<extra></extra>",
                )
            )
        fig.update_layout(showlegend=True)
        if bytes_axis:
            fig.update_yaxes(rangemode="tozero")
        if capacity:
            fig.add_hline(
                y=capacity / div,
                line_dash="dash",
                line_color="#c62828",
                annotation_text=f"{cap_label} {R.fmt(capacity, 'bytes')}",
                annotation_position="top left",
            )
        return fig

    if hbm:
        cap = info.get("hbm_bytes")
        bucketed = any(data.get(c["track_id"], {}).get("bucketed") for c in hbm)
        parts.append(
            R.section(
                "HBM over time",
                R.graph(line_chart(hbm, "GiB", cap, "HBM capacity"), id="memory-hbm", height=340),
                help_text="Each counter's value holds from its sample on"
                + (" (downsampled: the highest value per pixel column)." if bucketed else "."),
            )
        )
        peak = D.hbm_peak(store, run, chips)
        if peak:
            pf = R.figure(xaxis_title="GiB", barmode="stack")
            for name, v in peak["parts"].items():
                pf.add_trace(
                    go.Bar(
                        y=[f"TPU:{peak['chip']}"],
                        x=[v / 2**30],
                        name=name,
                        orientation="h",
                        hovertemplate=f"{R.plain(name)}: %{{x:.3f}} GiB<extra></extra>",
                    )
                )
            if cap:
                pf.add_vline(x=cap / 2**30, line_dash="dash", line_color="#c62828", annotation_text="capacity")
            share = f" = {peak['peak'] / cap:.1%} of capacity" if cap else ""
            parts.append(
                R.section(
                    f"At the peak: {R.fmt(peak['peak'], 'bytes')}{share} on TPU:{peak['chip']} at "
                    f"{R.fmt(peak['ts_ps'], 'ps')}",
                    R.graph(pf, height=200),
                    help_text="HBM by contributor (counter) at the moment of the highest total.",
                )
            )
    else:
        parts.append(R.empty("No HBM counters recorded for the chosen chips."))
    tile = info.get("spmem_bytes_per_tile")
    if spmem:
        parts.append(R.section("SPMEM", R.graph(line_chart(spmem, "GiB", tile, "tile scratchpad"), height=280)))
    else:
        parts.append(
            R.note(
                "SPMEM: this run records no SPMEM counter"
                + (f" (tile scratchpad {R.fmt(tile, 'bytes')})." if tile else ".")
            )
        )
    if other:
        parts.append(R.section("Other counters", R.graph(line_chart(other, "value"), height=260)))
    return html.Div(parts)


# ---- Findings ----------------------------------------------------------------------------------


def layout_findings(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    sev = [s for s in S.str_list(st.get("sev")) if s in SEVERITIES] or list(SEVERITIES)
    return html.Div(
        [
            controls(
                run_dropdown("findings-run", store, run),
                html.Label(
                    ["severity", dcc.Checklist(id="findings-sev", options=list(SEVERITIES), value=sev, inline=True)],
                    className="control",
                ),
            ),
            run_header(store, run),
            state_store("findings", {"run": run, "sev": sev}),
            body("findings"),
        ]
    )


def render_findings(store: Store, st: dict[str, Any]) -> Any:
    run = st["run"]
    report = D.analysis(store, run)
    sev = st.get("sev") or list(SEVERITIES)
    shown = [f for f in report.findings if f.severity in sev]
    counts = {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES}
    parts: list[Any] = [
        html.P(" · ".join(f"{n} {s}" for s, n in counts.items()), className="status", id="findings-counts")
    ]
    if shown:
        parts += [R.finding_card(f, run) for f in shown]
    else:
        parts.append(
            R.empty(
                "No findings"
                + (
                    " of the chosen severities."
                    if report.findings
                    else ": the analyzers found nothing to flag in this run."
                )
            )
        )
    notes = [(name, n) for name, a in report.analyses.items() for n in a.notes]
    if notes:
        parts.append(
            R.section("What the analyzers could not check", html.Ul([html.Li(f"{name}: {n}") for name, n in notes]))
        )
    parts.append(
        R.section("Analyzers run", html.Ul([html.Li([html.B(m.NAME), f" — {m.QUESTION}"]) for m in ANALYZERS]))
    )
    return html.Div(parts)


# ---- Compare -----------------------------------------------------------------------------------


def layout_compare(store: Store, st: dict[str, str]) -> Any:
    opts = D.run_options(store)
    if not opts:
        return _no_runs()
    base = pick_run(store, st, "base", fallback=-2)
    cand = pick_run(store, st, "cand", fallback=-1)
    return html.Div(
        [
            controls(
                run_dropdown("compare-base", store, base, "baseline"),
                run_dropdown("compare-cand", store, cand, "candidate"),
                dcc.Link("⇄ swap", href=R.href("/compare", base=cand, cand=base), className="button small"),
            ),
            state_store("compare", {"base": base, "cand": cand}),
            body("compare", "verdict"),
            body("compare"),
        ]
    )


def render_compare(store: Store, st: dict[str, Any]) -> Any:
    """The SQL side of Compare (fast on any run size): step-time distributions from the step
    markers, SparseCore and memory side by side."""
    base, cand = st["base"], st["cand"]
    if base == cand:
        return R.note("Baseline and candidate are the same run: pick two different runs above.")
    bi, ci = D.run_info(store, base), D.run_info(store, cand)
    parts: list[Any] = []
    b_all = D.step_times(store, base, D.clamp_steps(D.step_bounds(store, base), None))
    c_all = D.step_times(store, cand, D.clamp_steps(D.step_bounds(store, cand), None))
    # the counted steps, as every summary (and the verdict) covers them
    bst, cst = ({"step_ps": s["step_ps"][s["counted"]]} for s in (b_all, c_all))
    if len(bst["step_ps"]) and len(cst["step_ps"]):
        unit, scale = time_unit(float(max(bst["step_ps"].max(), cst["step_ps"].max())))
        fig = R.figure(barmode="overlay", xaxis_title=f"step time ({unit})", yaxis_title="steps")
        for name, s, color in (
            (f"baseline: {bi['name']}", bst, R.BASE_COLOR),
            (f"candidate: {ci['name']}", cst, R.CAND_COLOR),
        ):
            fig.add_trace(
                go.Histogram(
                    x=s["step_ps"] / scale,
                    name=name,
                    opacity=0.6,
                    marker_color=color,
                    nbinsx=40,
                    hovertemplate=f"%{{x}} {unit}: %{{y}} steps<extra>{name}</extra>",
                )
            )
        bs, cs = ({**step_stats(s["step_ps"]), "step_ps_min": s["step_ps"].min(), "step_ps_max": s["step_ps"].max()}
                  for s in (bst, cst))  # fmt: skip
        rows = []
        for label in ("mean", "p50", "p90", "min", "max"):
            b, c = float(bs[f"step_ps_{label}"]), float(cs[f"step_ps_{label}"])
            rows.append({"stat": label, "base": b, "cand": c, "delta": R.fmt_delta(b, c, "ps")})
        parts.append(
            html.Div(
                [
                    R.section("Step-time distributions", R.graph(fig, id="compare-hist", height=300)),
                    R.section(
                        "Step time",
                        R.table(
                            rows,
                            [
                                ("stat", "", "text"),
                                ("base", bi["name"], "ps"),
                                ("cand", ci["name"], "ps"),
                                ("delta", "change", "text"),
                            ],
                        ),
                        help_text=f"{bi['name']}: {D.steps_covered(b_all)}; {ci['name']}: {D.steps_covered(c_all)}.",
                    ),
                ],
                className="grid2",
            )
        )
    else:
        parts.append(R.empty("One of the runs has no steps: no step-time comparison."))
    parts.append(_side_by_side_sc(store, base, cand, bi, ci))
    parts.append(_side_by_side_memory(store, base, cand, bi, ci))
    return html.Div(parts)


def _side_by_side_sc(store: Store, base: int, cand: int, bi: dict, ci: dict) -> Any:
    cells = []
    for run, info in ((base, bi), (cand, ci)):
        bounds = D.clamp_steps(D.step_bounds(store, run), None)
        kp = {k.label: k for k in D.overview_kpis(store, run, bounds)}
        summary = D.sparsecore(store, run, bounds, [])
        rows = summary.get("tables", []) if not summary["empty"] else []
        cells.append(
            html.Div(
                [
                    html.H4(info["name"]),
                    html.Div(
                        [
                            R.kpi(lbl, R.fmt(kp[lbl].value, kp[lbl].unit), kp[lbl].detail)
                            for lbl in ("SC minibatches per step", "dropped IDs")
                            if lbl in kp
                        ],
                        className="kpis",
                    ),
                    R.table(
                        rows,
                        [
                            ("table_name", "table", "text"),
                            ("max_ids", "max IDs", "count"),
                            ("max_ids_per_partition", "limit", "count"),
                            ("minibatches_per_step", "minibatches/step", "count"),
                            ("skew", "skew", "count"),
                        ],
                    )
                    if rows
                    else R.note("no partition statistics"),
                ]
            )
        )
    return R.section("SparseCore side by side", html.Div(cells, className="grid2"))


def _side_by_side_memory(store: Store, base: int, cand: int, bi: dict, ci: dict) -> Any:
    fig = R.figure(barmode="group", yaxis_title="GiB")
    rows = []
    for run, info, color in ((base, bi, R.BASE_COLOR), (cand, ci, R.CAND_COLOR)):
        peak = D.hbm_peak(store, run)
        if peak:
            fig.add_trace(
                go.Bar(
                    x=list(peak["parts"]),
                    y=[v / 2**30 for v in peak["parts"].values()],
                    name=info["name"],
                    marker_color=color,
                    hovertemplate="%{x}: %{y:.3f} GiB<extra>" + R.plain(info["name"]) + "</extra>",
                )
            )
        rows.append(
            {
                "run": info["name"],
                "peak": peak["peak"] if peak else None,
                "capacity": info.get("hbm_bytes"),
                "share": (peak["peak"] / info["hbm_bytes"]) if peak and info.get("hbm_bytes") else None,
            }
        )
    return R.section(
        "Memory side by side (HBM at each run's peak)",
        html.Div(
            [
                R.graph(fig, height=260),
                R.table(
                    rows,
                    [
                        ("run", "run", "text"),
                        ("peak", "HBM peak", "bytes"),
                        ("capacity", "capacity", "bytes"),
                        ("share", "of capacity", "share"),
                    ],
                ),
            ],
            className="grid2",
        ),
    )


def render_compare_verdict(store: Store, st: dict[str, Any]) -> Any:
    """The verdict of `scprof compare` at the top, then its breakdown deltas, findings resolved / new /
    persisting, per-op and per-table deltas and config diff (analyzers/compare.py, cached)."""
    base, cand = st["base"], st["cand"]
    if base == cand:
        return html.Div()
    bi, ci = D.run_info(store, base), D.run_info(store, cand)
    c, why_not = D.compare(store, base, cand)
    if c is None:
        return R.error(why_not or "comparison unavailable")
    bn, cn = bi["name"], ci["name"]
    parts: list[Any] = [_verdict_banner(c, bn, cn)]
    parts.append(_breakdown_deltas(c.get("breakdown") or [], bn, cn))
    fd = c.get("findings") or {}
    cols = []
    for title, key, tone, run in (
        ("Resolved", "resolved", "good", base),
        ("New", "new", "bad", cand),
        ("Persisting", "persisting", "", cand),
    ):
        items = [i.get("cand", i) if key == "persisting" else i for i in fd.get(key, [])]
        cols.append(
            html.Div(
                [
                    html.H4(f"{title} ({len(items)})", className=tone),
                    *([_finding_from_dict(f, run) for f in items] or [html.P("none", className="muted")]),
                ],
                id=f"compare-findings-{key}",
            )
        )
    parts.append(
        R.section(
            "Findings",
            html.Div(cols, className="grid3"),
            help_text="Matched by rule and affected tables: resolved = only in the baseline, new = only in "
            "the candidate, persisting = in both (shown as in the candidate).",
        )
    )
    ops = c.get("ops") or []
    if ops:
        for r in ops:
            r["delta"] = R.fmt_delta(r.get("base_ps_per_step"), r.get("cand_ps_per_step"), "ps")
        parts.append(
            R.section(
                f"Per-op deltas (time per step; {len(ops)} ops, largest changes first)",
                R.table(
                    ops,
                    [
                        ("track_kind", "core", "text"),
                        ("name", "op", "text"),
                        ("base_events_per_step", f"ops/step {bn}", "count"),
                        ("cand_events_per_step", f"ops/step {cn}", "count"),
                        ("base_ps_per_step", f"time/step {bn}", "ps"),
                        ("cand_ps_per_step", f"time/step {cn}", "ps"),
                        ("delta", "change", "text"),
                        ("change", "", "text"),
                    ],
                    id="compare-ops",
                    max_rows=25,
                ),
            )
        )
    tables = c.get("tables") or []
    if tables:
        for r in tables:
            r["delta"] = R.fmt_delta(r.get("base_ps_per_step"), r.get("cand_ps_per_step"), "ps")
        parts.append(
            R.section(
                "Per-table deltas (SparseCore time per step)",
                R.table(
                    tables,
                    [
                        ("table_name", "table", "text"),
                        ("base_ops_per_step", f"ops/step {bn}", "count"),
                        ("cand_ops_per_step", f"ops/step {cn}", "count"),
                        ("base_ps_per_step", f"time/step {bn}", "ps"),
                        ("cand_ps_per_step", f"time/step {cn}", "ps"),
                        ("delta", "change", "text"),
                    ],
                    max_rows=25,
                ),
            )
        )
    diff = c.get("config_diff") or []
    parts.append(
        R.section(
            f"Config diff ({len(diff)} keys differ)",
            R.table(diff, [("key", "key", "text"), ("base", bn, "text"), ("cand", cn, "text")], id="compare-config")
            if diff
            else R.empty("The configs are identical."),
        )
    )
    known = {"base", "cand", "step_time", "breakdown", "findings", "ops", "tables", "config_diff", "notes"}
    rest = {k: v for k, v in c.items() if k not in known}
    if rest:
        parts.append(
            html.Details([html.Summary("Further figures of `scprof compare`"), R.generic(rest)], className="card")
        )
    return html.Div(parts)


def _finding_from_dict(d: dict[str, Any], run: int) -> Any:
    try:
        return R.finding_card(Finding(**d), run, compact=True)
    except (TypeError, ValueError):
        return R.generic(d)


def _verdict_banner(c: dict[str, Any], base_name: str, cand_name: str) -> html.Div:
    stc = c.get("step_time") or {}
    verdict = str(stc.get("verdict") or c.get("verdict") or "unknown")
    tone = {"improved": "good", "regressed": "bad"}.get(verdict, "neutral")
    lines: list[Any] = []
    if "change" in stc:
        lines.append(
            html.Div(
                [
                    html.B(
                        f"mean step time {R.fmt(stc.get('base_mean_ps'), 'ps')} → {R.fmt(stc.get('cand_mean_ps'), 'ps')} "
                        f"({stc['change']:+.1%})"
                    ),
                    f"; 95% interval of the change {stc.get('ci_low', float('nan')):+.1%} … {stc.get('ci_high', float('nan')):+.1%} "
                    f"over {stc.get('base_steps')} and {stc.get('cand_steps')} steady steps",
                ],
                id="compare-change",
            )
        )
    lines += [html.Div(n, className="muted") for n in c.get("notes") or []]
    return html.Div(
        [
            html.Div(f"candidate {cand_name} vs baseline {base_name} (scprof compare)", className="muted"),
            html.Div(verdict, className="verdict-word", id="compare-verdict-word"),
            *lines,
        ],
        className=f"verdict {tone}",
    )


def _breakdown_deltas(rows: list[dict[str, Any]], bname: str, cname: str) -> Any:
    if not rows:
        return R.note("No step-time breakdown for one of the runs.")
    order = {c: i for i, c in enumerate(CATEGORIES)}
    rows = sorted(rows, key=lambda r: order.get(r["category"], 99))
    unit, scale = time_unit(max(sum(r["base_ps"] or 0 for r in rows), sum(r["cand_ps"] or 0 for r in rows), 1))
    fig = R.figure(barmode="stack", yaxis_title=f"time per step ({unit})")
    for r in rows:
        k = r["category"]
        fig.add_trace(
            go.Bar(
                x=[R.plain(bname), R.plain(cname)],
                y=[(r["base_ps"] or 0) / scale, (r["cand_ps"] or 0) / scale],
                name=k,
                marker_color=R.CATEGORY_COLORS.get(k),
                hovertemplate=f"{k}<br>%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
            )
        )
    for r in rows:
        r["change"] = R.fmt_delta(r["base_ps"], r["cand_ps"], "ps")
    return R.section(
        "Step-time breakdown (mean per step and chip)",
        html.Div(
            [
                R.graph(fig, id="compare-breakdown", height=320),
                R.table(
                    rows,
                    [
                        ("category", "category", "text"),
                        ("base_ps", bname, "ps"),
                        ("cand_ps", cname, "ps"),
                        ("change", "change", "text"),
                    ],
                    id="compare-breakdown-table",
                ),
            ],
            className="grid2",
        ),
    )


# ---- SQL console -------------------------------------------------------------------------------


def layout_sql(store: Store | None, st: dict[str, str]) -> Any:
    q = st.get("q", "")
    rows = S.int_param(st.get("rows"), 1000) or 1000
    return html.Div(
        [
            html.Div(
                [html.Span("Examples: ", className="muted")]
                + [
                    html.Button(name, id={"type": "sql-example", "index": i}, className="button small", n_clicks=0)
                    for i, name in enumerate(Q.SQL_EXAMPLES)
                ],
                className="toolbar",
            ),
            dcc.Textarea(
                id="sql-text",
                value=q,
                className="sql-input",
                placeholder="SELECT ... (one read-only statement; "
                "tables and views: runs, slices, counter_samples, step_markers, sc_partition_stats, event_args …)",
            ),
            controls(
                html.Button("Run query", id="sql-run", className="button", n_clicks=0),
                html.Label(
                    [
                        "row cap",
                        dcc.Input(id="sql-rows", type="number", min=1, max=SQL_MAX_ROWS, value=rows, debounce=True),
                    ],
                    className="control",
                ),
                html.Span(
                    f"read-only; time limit {SQL_TIMEOUT_S:g} s; times are picoseconds (schema: docs/schema.md)",
                    className="muted",
                ),
            ),
            state_store("sql", {"q": q, "rows": rows}),
            body("sql"),
        ]
    )


def render_sql(store: Store, st: dict[str, Any]) -> Any:
    q = str(st.get("q") or "").strip()
    if not q:
        return R.empty("Type a query above, or pick an example.")
    cap = max(1, min(S.int_param(str(st.get("rows") or ""), 1000) or 1000, SQL_MAX_ROWS))
    try:
        result = run_query(store, q, max_rows=cap, timeout_s=SQL_TIMEOUT_S, max_bytes=SQL_PAGE_MAX_BYTES)
    except QueryError as e:
        return R.error(str(e))
    t, clip = result.table, lambda v: v if len(v) <= SQL_SHOWN_CHARS else v[:SQL_SHOWN_CHARS] + " …"
    columns = [c.slice(0, SQL_SHOWN_ROWS).to_pylist() for c in t.columns]  # by position: names may repeat
    head = html.Tr([html.Th(c) for c in t.column_names])
    body_rows = [html.Tr([html.Td(clip(format_cell(v))) for v in r]) for r in zip(*columns, strict=True)]
    capped = {"rows": f"capped at {cap:,}; raise the row cap", "bytes": f"capped at {SQL_PAGE_MAX_BYTES // 2**20} MiB"}
    info = f"{t.num_rows:,} row(s)" + (f" ({capped[result.capped_by]} or add LIMIT)" if result.capped_by else "")
    if t.num_rows > SQL_SHOWN_ROWS:
        info += f"; showing the first {SQL_SHOWN_ROWS:,} (all in the CSV)"
    return html.Div(
        [
            html.Div(
                [
                    html.Span(info, id="sql-info", className="status"),
                    " ",
                    html.A(
                        "Download CSV",
                        href=R.href("/download/sql.csv", q=q, rows=cap),
                        className="button small",
                        id="sql-csv",
                    ),
                ],
                className="toolbar",
            ),
            html.Div(
                html.Table([html.Thead(head), html.Tbody(body_rows)], className="data", id="sql-result"),
                className="table-wrap",
            ),
        ]
    )


LAYOUTS = {
    "/runs": layout_runs,
    "/overview": layout_overview,
    "/timeline": layout_timeline,
    "/sparsecore": layout_sparsecore,
    "/memory": layout_memory,
    "/findings": layout_findings,
    "/compare": layout_compare,
    "/sql": layout_sql,
}

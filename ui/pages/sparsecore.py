"""The SparseCore page: IDs, unique IDs, minibatches and dropped IDs per partition and step,
against the compiled limits, and per table; to find the embedding tables that overflow their partitions."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from profiler.store import Store
from ui import data as D
from ui import render as R
from ui import state as S
from ui.pages.common import _no_runs, body, controls, pick_run, run_dropdown, run_header, state_store, steps_slider

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

"""The SparseCore page: IDs, unique IDs, minibatches and dropped IDs per partition and step,
against the compiled limits, and per table; to find the embedding tables that overflow their partitions."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import dcc, html

from profiler.store import Store
from ui import data, render, state
from ui.pages.common import run_and_steps, run_page, steps_slider

SC_METRICS = {
    "ids": ("IDs per partition", "ids_ratio", "max_ids_per_partition"),
    "unique_ids": ("unique IDs per partition", "unique_ratio", "max_unique_ids_per_partition"),
    "minibatches": ("minibatches", None, None),
    "dropped_ids": ("dropped IDs", None, None),
}

COLORBAR_TITLES = {"ids": "IDs", "unique_ids": "unique IDs", "minibatches": "minibatches", "dropped_ids": "dropped IDs"}
UNDER, OVER = ("#f7fbff", "#9ecae1", "#2171b5", "#08306b"), ("#fc9272", "#cb181d", "#67000d")


def ratio_top(ratio: np.ndarray) -> float:
    """The top of the × limit scale: the highest ratio, at least 1.25 so that 1.0 (the limit) sits
    inside it; a ratio cannot be negative, so the scale starts at 0."""
    finite = ratio[np.isfinite(ratio)]
    return max(1.25, float(finite.max()) if finite.size else 1.25)


def ratio_colorscale(zmax: float) -> list[list[Any]]:
    """A sequential scale from 0 to `zmax`: blues up to the limit (1.0), reds past it."""
    at = 1.0 / zmax
    under = [[at * i / (len(UNDER) - 1), c] for i, c in enumerate(UNDER)]
    over = [[at + (1 - at) * i / (len(OVER) - 1), c] for i, c in enumerate(OVER)]
    over[0][0] = min(1.0, at + 1e-6)
    return under + over


def ratio_ticks(zmax: float) -> list[float]:
    """Round ticks from 0 to `zmax` that include 1.0 (the limit)."""
    step = next(s for s in (0.25, 0.5, 1, 2, 5, 10, 20, 50, 100) if zmax / s <= 8)
    ticks = [round(i * step, 2) for i in range(0 if step < 2 else 1, int(zmax / step) + 1)]
    return sorted(set(ticks) | {1.0})  # 0 left out where its label would overlap 1's


def skew_range(skew: np.ndarray) -> list[float]:
    """The skew axis from 1.0 (perfectly balanced) up, at least to 1.5: noise of 1.09-1.11 stays small."""
    finite = skew[np.isfinite(skew)]
    top = float(finite.max()) if finite.size else 1.0
    return [1.0, max(1.5, 1.0 + (top - 1.0) * 1.1)]


def count_top(*series: np.ndarray) -> float:
    """The top of the minibatches / dropped IDs axis: the highest value and a margin, at least 2
    (one minibatch, no split, sits inside the axis)."""
    values = [float(np.nanmax(a)) for a in series if np.isfinite(a).any()]
    return max(2.0, max(values, default=0.0) * 1.1)


NO_SPARSECORES = (
    "This run has no SparseCores: a GPU or CPU capture, or a PyTorch trace, has no embedding lookups "
    "to show here. Pick a TPU or emulated run."
)


def layout_sparsecore(store: Store, st: dict[str, str]) -> Any:
    run, bounds, steps = run_and_steps(store, st)
    tables = sorted(data.sc_tables(store, run)[0], key=render.natural_key)  # t0, t1, t2, ..., t10
    chosen = [t for t in state.str_list(st.get("tables")) if t in tables]
    metric = st.get("metric") if st.get("metric") in SC_METRICS else "ids"
    more = _controls(bounds, steps, tables, chosen, metric)
    if not data.has_sparsecores(
        store, run
    ):  # the run picker alone shows; the rest stay, hidden, for the URL's callback
        more = [html.Div(more, style={"display": "none"})]
    return run_page(
        "sparsecore", store, run, {"run": run, "steps": list(steps), "tables": chosen, "metric": metric}, *more
    )


def _controls(
    bounds: tuple[int, int] | None, steps: tuple[int, int], tables: list[str], chosen: list[str], metric: str
) -> list[Any]:
    """The page's controls after the run picker: steps, tables, metric."""
    return [
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
    ]


def render_sparsecore(store: Store, st: dict[str, Any]) -> Any:
    run, steps, metric = st["run"], tuple(st["steps"]), st.get("metric", "ids")
    if not data.has_sparsecores(store, run):
        return render.empty(NO_SPARSECORES)
    d = data.sparsecore(store, run, steps, st.get("tables") or [])
    if d["empty"]:
        return render.empty(
            "This run records no SparseCore partition statistics or SparseCore ops with IDs "
            "(the emulator writes them; imported XProf captures usually lack them)."
        )
    title, ratio_key, limit_col = SC_METRICS[metric]
    parts: list[Any] = []
    if not d["from_stats"]:
        parts.append(
            render.note(
                "No partition statistics in this run: figures come from SparseCore op events "
                "(forward ops), and the compiled limits are unknown."
            )
        )
    bucket = f" (columns of {d['step_bucket']} steps, highest per column)" if d["step_bucket"] > 1 else ""
    h = 90 + 16 * len(d["partitions"])
    fig = render.figure(xaxis_title="step" + bucket)
    fig.add_trace(
        go.Heatmap(
            x=d["steps"],
            y=d["partitions"],
            z=d["matrices"][metric],
            colorscale="Viridis",
            colorbar=dict(title=dict(text=COLORBAR_TITLES[metric]), tickformat=",~r"),
            hoverongaps=False,
            hovertemplate=f"%{{y}}<br>step %{{x}}<br>{title}: %{{z:,.0f}}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    render.integer_axis(fig, d["steps"])
    parts.append(render.section(f"{title} per SparseCore × step", render.graph(fig, id="sc-heatmap", height=h)))
    if ratio_key and np.isfinite(d["matrices"][ratio_key]).any():
        ratio = d["matrices"][ratio_key]
        rf = render.figure(xaxis_title="step" + bucket)
        zmax = ratio_top(ratio)
        rf.add_trace(
            go.Heatmap(
                x=d["steps"],
                y=d["partitions"],
                z=ratio,
                zmin=0.0,
                zmax=zmax,
                colorscale=ratio_colorscale(zmax),
                colorbar=dict(
                    title=dict(text="× limit"),
                    tickvals=(ticks := ratio_ticks(zmax)),
                    ticktext=[("1 = limit" if t == 1 else f"{t:g}") for t in ticks],
                ),
                hoverongaps=False,
                hovertemplate="%{y}<br>step %{x}<br>%{z:.2f} × the compiled limit<extra></extra>",
            )
        )
        rf.update_yaxes(autorange="reversed")
        render.integer_axis(rf, d["steps"])
        parts.append(
            render.section(
                f"{title} against the compiled limit ({limit_col})",
                render.graph(rf, id="sc-ratio", height=h),
                help_text="Highest ratio over the chosen tables, from 0 (no IDs) to 1 (at the limit, blue at its "
                "darkest). Above 1 (red): the partition overflows its limit, so the step is split into "
                "minibatches or IDs are dropped.",
            )
        )
    elif ratio_key:
        parts.append(render.note("No compiled limits recorded for these tables: no comparison with the limit."))
    sk = render.figure(xaxis_title="step" + bucket)
    sk.add_trace(
        go.Scatter(
            x=d["steps"],
            y=d["skew"],
            name="skew (max / mean IDs per partition)",
            mode="lines+markers",
            hovertemplate="step %{x}<br>skew %{y:.3g}× (1 = balanced)<extra></extra>",
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
        render.step_series(
            d["steps"],
            d["dropped_per_step"],
            name="dropped IDs",
            yaxis="y2",
            opacity=0.4,
            hovertemplate="step %{x}<br>%{y:,.0f} dropped IDs<extra></extra>",
        )
    )
    sk.update_layout(
        yaxis=dict(title="skew (max / mean, 1 = balanced)", range=skew_range(d["skew"]), tickformat=".2f"),
        yaxis2=dict(
            title="minibatches / dropped IDs",
            overlaying="y",
            side="right",
            range=[0, (top := count_top(d["minibatches_per_step"], d["dropped_per_step"]))],
            tickmode="auto",
            nticks=6,
            dtick=1 if top <= 8 else None,  # whole minibatches
            showgrid=False,
        ),
    )
    render.integer_axis(sk, d["steps"])
    parts.append(
        render.section("Skew, minibatches and dropped IDs over time", render.graph(sk, id="sc-skew", height=300))
    )
    if d["tables"]:
        parts.append(
            render.section(
                "Per table",
                render.table(
                    sorted(d["tables"], key=lambda r: render.natural_key(r["table_name"])),
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

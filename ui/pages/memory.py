"""The Memory page: HBM, SPMEM and other counters over time per chip, and HBM by contributor at
the peak; to see how close a run comes to its memory capacity and what fills it."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import html

from profiler.store import Store
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
from ui.timeline import time_unit


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
                annotation_text=f"{cap_label} {format_value(capacity, 'bytes')}",
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
                    f"At the peak: {format_value(peak['peak'], 'bytes')}{share} on TPU:{peak['chip']} at "
                    f"{format_value(peak['ts_ps'], 'ps')}",
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
                + (f" (tile scratchpad {format_value(tile, 'bytes')})." if tile else ".")
            )
        )
    if other:
        parts.append(R.section("Other counters", R.graph(line_chart(other, "value"), height=260)))
    return html.Div(parts)

"""Controls and pieces shared by the pages: run picker, steps slider, chips checklist, a page's
state store and body, the run header and the empty store's message, so every page picks runs,
steps and chips the same way."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from profiler.store import Store
from ui import data as D
from ui import render as R

NO_RUNS = (
    "No runs in this store yet. Record one, then reload this page:",
    "scprof record configs/baseline.toml && scprof record configs/tuned.toml",
)


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
            html.Span(
                [f"steps {value[0]}–{value[1]}", html.Span(f" of {lo}–{hi}", className="muted")],
                className="slider-range",
            ),
            dcc.RangeSlider(
                id=id,
                min=lo,
                max=max(hi, lo + 1),
                step=1,
                value=[value[0], value[1]],
                allowCross=False,
                marks=None,
                # only while dragging: always shown, it covered the run header; the label names the range
                tooltip={"placement": "top", "always_visible": False},
                updatemode="mouseup",
            ),
        ],
        className="control slider",
    )


def chips_checklist(id: str, chips: list[int], value: list[int], names: dict[int, str] | None = None) -> html.Label:
    """A chip per box, labelled by its kind (`names`: ui.data.chip_names; TPU:N by default)."""
    names = names or {}
    return html.Label(
        [
            "chips",
            dcc.Checklist(
                id=id,
                options=[{"label": names.get(c, f"TPU:{c}"), "value": c} for c in chips],
                value=value,
                inline=True,
            ),  # fmt: skip
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
    kinds = sorted({name.split(":")[0] for name in D.chip_names(store, run).values()} - {"TPU"})
    hw = f"{info.get('generation') or '/'.join(kinds) or '?'} × {info.get('num_chips') or '?'} chips"
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

"""Controls and pieces shared by the pages: run picker, steps slider, chips checklist, a page's
state store and body, the run header and the empty store's message, so every page picks runs,
steps and chips the same way."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from profiler.errors import ScprofError
from profiler.store import Store
from ui import data as ui_data
from ui import render
from ui import state as ui_state

NO_RUNS = (
    "No runs in this store yet. Record one, then reload this page:",
    "scprof record configs/baseline.toml && scprof record configs/tuned.toml",
)


class UnknownRun(ScprofError):
    """A run the URL names (by id or name) that the store does not hold: the page says so
    (ui/routing.page_for) rather than showing another run under the unknown name."""

    def __init__(self, key: str, ref: str):
        self.key, self.ref = key, ref
        super().__init__(f"The run '{ref}' is not in this store")


def pick_run(store: Store, st: dict[str, str], key: str = "run", fallback: int = -1) -> int | None:
    """The run named in the URL (UnknownRun when the store lacks it), else the `fallback`-th
    newest run that is not a what-if trial (-1: newest); None in a store without runs."""
    ref = st.get(key)
    run = ui_data.resolve(store, ref)
    if run is None and ref not in (None, ""):
        raise UnknownRun(key, ref)
    if run is None:
        ids = [r["value"] for r in ui_data.run_options(store)]
        run = ids[fallback] if len(ids) >= abs(fallback) else (ids[-1] if ids else None)
    return run


class NoRuns(ScprofError):
    """A run page asked of a store without runs: its page is the message saying how to record one
    (ui/routing.page_for)."""

    def __init__(self) -> None:
        super().__init__(NO_RUNS[0])


def page_run(store: Store, st: dict[str, str]) -> int:
    """A run page's run: the URL's (pick_run); NoRuns in a store without runs."""
    run = pick_run(store, st)
    if run is None:
        raise NoRuns()
    return run


def run_and_steps(store: Store, st: dict[str, str]) -> tuple[int, tuple[int, int] | None, tuple[int, int]]:
    """A run page's preamble: (the URL's run (pick_run; NoRuns in a store without runs), its steps'
    bounds, the URL's steps clamped to them)."""
    run = page_run(store, st)
    bounds = ui_data.step_bounds(store, run)
    return run, bounds, ui_data.clamp_steps(bounds, ui_state.steps_param(st.get("steps")))


def run_page(
    page: str, store: Store, run: int, state: dict[str, Any], *more_controls: Any, between: Any = (), after: Any = ()
) -> html.Div:
    """A run page's frame: its controls (the run picker first), the run's header, `between`, its
    state store and data body, then `after`."""
    return html.Div(
        [
            controls(run_dropdown(f"{page}-run", store, run), *more_controls),
            run_header(store, run),
            *between,
            state_store(page, state),
            body(page),
            *after,
        ]
    )


def run_dropdown(id: str, store: Store, value: int | None, label: str = "run") -> html.Label:
    return html.Label(
        [
            label,
            dcc.Dropdown(
                id=id,
                options=ui_data.run_options(store, keep=value),
                value=value,
                clearable=False,
                className="run-dropdown",
            ),
        ],
        className="control",
    )


def steps_slider(id: str, bounds: tuple[int, int] | None, value: tuple[int, int]) -> html.Label:
    """The steps range; a run without steps (a failed compile, a capture without step markers)
    gets a hidden, disabled slider so the page's URL callback finds every control it listens to."""
    if bounds is None:
        placeholder = dcc.RangeSlider(id=id, min=0, max=1, step=1, value=[0, 0], disabled=True, marks=None)
        return html.Label(
            ["steps", html.Span(" (no steps in this run)", className="muted"), html.Div(placeholder, hidden=True)],
            className="control",
        )
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
    """A chip per box, labelled by its kind (`names`: ui.data.chip_names; ui.data.chip_name's default)."""
    names = names or {}
    return html.Label(
        [
            "chips",
            html.Span(" (none: host tracks only)", className="muted") if not chips else None,
            dcc.Checklist(
                id=id,
                options=[{"label": ui_data.chip_name(names, c), "value": c} for c in chips],
                value=value,
                inline=True,
            ),
        ],
        className="control",
    )


def state_store(page: str, state: dict[str, Any]) -> dcc.Store:
    return dcc.Store(id=f"{page}-state", data=state)


def body(page: str, extra: str = "body") -> dcc.Loading:
    """Where the page's render function puts its data (ui/routing.filled_page); a spinner while a
    render left to the body's callback runs."""
    return dcc.Loading(html.Div(id=f"{page}-{extra}", className="page-body"), type="default", delay_show=150)


def controls(*children: Any) -> html.Div:
    return html.Div([c for c in children if c is not None], className="controls")


def run_status(info: dict[str, Any]) -> html.Div | None:
    """Why a failed or truncated run lacks steps, on every page that shows it (its tags carry the
    failure and the compiler's message); None for a complete run."""
    tags = info.get("tags") if isinstance(info.get("tags"), dict) else {}
    if info.get("status") == "failed":
        why = tags.get("failure") or "unknown failure"
        text = f"This run failed ({why}): {tags['error']}" if tags.get("error") else f"This run failed ({why})."
        return html.Div(text, className="note run-status", role="status")
    if info.get("status") == "truncated" or info.get("truncated_at_byte") is not None:
        at = info.get("truncated_at_byte")
        where = f" at byte {int(at):,}" if at is not None else ""
        return html.Div(
            f"This trace is cut short{where} (ingested with --allow-truncated): the events after it are missing.",
            className="note run-status",
            role="status",
        )
    return None


def hardware_text(kind: str | None, chips: int | None, noun: str = "chip") -> str:
    """The hardware line of a run header: "v5p × 4 chips", "4 chips", "v5p" or "hardware not recorded";
    devices other than TPU chips by their own noun (ui.data.device_noun): "16 GPUs", "1 CPU"."""
    if kind and chips:
        return f"{kind} × {chips} {noun}{'s' if chips != 1 else ''}"
    if chips:
        return f"{chips} {noun}{'s' if chips != 1 else ''}"
    return kind or "hardware not recorded"


def run_header(store: Store, run: int) -> html.Div:
    info = ui_data.run_info(store, run)
    names = ui_data.chip_names(store, run)
    noun = ui_data.device_noun(names)
    kinds = sorted({name.split(":")[0] for name in names.values()} - {"TPU", noun})  # GPU × 16 GPUs: said once
    hw = hardware_text(info.get("generation") or "/".join(kinds), info.get("num_chips") or len(names), noun)
    return html.Div(
        [
            html.Span(info["name"], className="run-name"),
            html.Span(
                f" #{run} · {info['source']} · {hw} · {ui_data.timed_steps(store, run)} steps · {info['events']:,} events",
                className="muted",
            ),
            run_status(info),
        ],
        className="run-header",
    )


def unknown_run(store: Store, pathname: str, st: dict[str, str], e: UnknownRun) -> html.Div:
    """The page for a URL naming a run the store lacks: says so and links to the newest runs it
    holds in its place (Compare names its own sides: ui/compare_data.py)."""
    runs = ui_data.run_options(store)[-12:][::-1]
    links = [
        dcc.Link(r["label"], href=render.href(pathname, **{e.key: r["value"]}), className="button small") for r in runs
    ]
    return html.Div(
        [
            html.P(f"{e}.", id="unknown-run"),
            html.P(["Pick another on the ", dcc.Link("Runs page", href="/runs"), " or here:" if links else "."]),
            html.Div(links, className="toolbar"),
        ],
        className="empty-state",
    )


def _no_runs() -> html.Div:
    return render.empty(*NO_RUNS)

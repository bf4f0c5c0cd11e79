"""The Timeline page: a run's trace in the browser's own canvas trace viewer (ui/assets/trace_*.js,
fed by the /api/trace/* routes), opened on the URL's window or the chosen steps, with Perfetto
downloads; to see what each core did when. Zoom, pan, find, selection and flows run client-side."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from profiler import sqltree
from profiler.store import Store
from profiler.units import format_value
from ui import data, render
from ui import state as ui_state
from ui.pages.common import run_and_steps, run_page, steps_slider
from ui.trace_api import run_tracks


def layout_timeline(store: Store, st: dict[str, str]) -> Any:
    run, bounds, steps = run_and_steps(store, st)
    state = {
        "run": run,
        "steps": list(steps),
        "t0": ui_state.int_param(st.get("t0")),
        "t1": ui_state.int_param(st.get("t1")),
    }
    toolbar = html.Div(
        [
            dcc.Link("whole run", href=render.href("/timeline", run=run), className="button small"),
            html.Span(id="timeline-perfetto"),
        ],
        className="toolbar",
    )
    return run_page("timeline", store, run, state, steps_slider("timeline-steps", bounds, steps), between=[toolbar])


def initial_window(store: Store, st: dict[str, Any]) -> tuple[int, int]:
    """[t0, t1) in ps the viewer opens on: the URL's window, else the chosen steps', else the run's."""
    if st.get("t0") is not None and st.get("t1") is not None and st["t1"] > st["t0"]:
        return int(st["t0"]), int(st["t1"])
    info = data.run_info(store, st["run"])
    steps = st.get("steps") or [0, -1]
    window = data.steps_window(store, st["run"], tuple(steps)) if steps[1] >= steps[0] else None
    return window or (int(info["first_ps"] or 0), int(info["last_ps"] or 1))


def render_timeline(store: Store, st: dict[str, Any]) -> tuple[Any, Any]:
    """(body, Perfetto links): the trace viewer's mount point (ui/assets/trace_viewer*.js draws it
    from /api/trace/*), or an empty state saying why there is nothing to draw."""
    run = st["run"]
    info = data.run_info(store, run)
    tracks = run_tracks(store, run)
    t0, t1 = initial_window(store, st)
    links = _perfetto_links(store, run, t0, t1)
    instant = info["first_ps"] is not None and info["first_ps"] == info["last_ps"]
    if not tracks or instant:  # an instant has no width to draw (a failed compile's one event)
        msg = "This run has no timeline tracks."
        if instant and tracks:
            msg = (
                f"Nothing to draw: the run's {info['events']:,} event(s) all sit at "
                f"{format_value(info['first_ps'], 'ps')} with no duration"
                + (" (it failed before any step ran: see the note above)." if info["status"] == "failed" else ".")
            )
        return html.Div([render.empty(msg)], id="timeline-empty"), links
    viewer = html.Div(
        id="timeline-trace",
        className="trace-viewer",
        **{"data-run": str(run), "data-t0": str(t0), "data-t1": str(t1)},
    )
    return viewer, links


def _perfetto_links(store: Store, run: int, t0: int, t1: int) -> Any:
    try:
        import exporters.perfetto  # noqa: F401
    except ImportError:
        return html.Span(
            "Perfetto export not available in this build (exporters/perfetto/ missing).", className="muted"
        )
    st = sqltree.query(store.con, "ui.timeline.steps_in_window", run=run, t0=t0, t1=t1).to_pylist()[0]
    links: list[Any] = [
        html.A(
            "Download Perfetto trace (whole run)",
            href=render.href("/download/perfetto", run=run),
            className="button small",
            id="perfetto-run",
        )
    ]
    if st["lo"] is not None:
        links.append(
            html.A(
                f"(visible steps {st['lo']}–{st['hi']})",
                href=render.href("/download/perfetto", run=run, steps=ui_state.steps_text((st["lo"], st["hi"]))),
                className="button small",
            )
        )
    links.append(html.Span(" open it at ui.perfetto.dev", className="muted"))
    return links

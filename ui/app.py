"""The Dash application: the pages (ui/pages/, served with Dash Pages: ui/routing.py), the
callbacks wiring their controls to the URL, downloads.

The URL is the state: a control's change rewrites the query string and Dash Pages renders the
page from it, data included (ui/routing.filled_page). So every view is a link.

    scprof ui [--host 127.0.0.1] [--port 8050] [--token T] [--db PATH]

Every request passes ui/auth.py (loopback only, or the access token) and every callback's inputs
ui/inputs.py's checks; downloads are in ui/downloads.py.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import dash
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from profiler.errors import ScprofError
from profiler.sql_guard import keep_spare_worker
from profiler.store import default_path
from ui import auth, downloads, inputs, pages, trace_api
from ui import state as ui_state
from ui.pages.sql import SQL_EXAMPLES
from ui.routing import ACCESS, PATHNAME, finish, guarded, hidden_pages, nav, pending_id, register_pages
from ui.store_access import StoreAccess, analyse_stale_runs
from ui.warmup import prime

log = logging.getLogger("scprof.ui")

# The trace viewer's own URL state (ui/assets/trace_viewer*.js), meaningless in another run.
TRACE_VIEW_RESET = {"sel": None, "find": None, "hl": None, "collapsed": None, "pinned": None}


# Dash Pages' URL (dash.page_container): what the controls write, what the top bar follows
URL = "_pages_location"


def create_app(db_path: str | None = None, token: str | None = None) -> Dash:
    """The Dash app serving the store at `db_path` (default: $SCPROF_DB or ./scprof.duckdb);
    with a `token`, every request must carry it (ui/auth.py), else only localhost may ask."""
    path = os.path.abspath(db_path or default_path())
    access = StoreAccess(path)
    # the SQL console's next query finds its worker process started; started first, so that its
    # start-up (Python and DuckDB imports) overlaps prime()'s, not a first view's
    keep_spare_worker()
    prime()  # plotly's validators and the pages' optional modules: at start, not in a user's first view
    app = Dash(
        __name__,
        title="scprof",
        suppress_callback_exceptions=True,
        update_title=None,
        assets_folder=os.path.join(os.path.dirname(__file__), "assets"),
        use_pages=True,
        pages_folder="",  # the pages register themselves (ui/routing.register_pages)
        include_pages_meta=False,
        routing_callback_inputs={PATHNAME: State(URL, "pathname")},  # for the page of an unknown path
    )
    app.scprof_access = access  # type: ignore[attr-defined]  # for tests and benchmarks
    app.server.config[ACCESS] = access  # the pages' layouts find the store here
    auth.require_access(app.server, token)
    inputs.guard_dispatch(app.server)
    register_pages()
    app.layout = _layout(path)
    _nav_callback(app, access)
    _pending_callbacks(app, access)
    _url_callbacks(app)
    downloads.register(app.server, access)
    trace_api.register(app.server, access)
    return app


def _layout(store_path: str) -> Callable[[], Any]:
    """The frame: the top bar and the page Dash Pages renders from the URL."""

    def layout() -> Any:
        return html.Div(
            [
                html.Header(
                    [
                        html.A("scprof", href="/runs", className="brand"),
                        html.Nav(id="nav"),
                        html.Span(store_path, className="store-path", title="store"),
                    ],
                    className="topbar",
                ),
                # a page being rendered: the one shown dimmed under a spinner (after 150 ms)
                dcc.Loading(
                    html.Main(dash.page_container, id="page"),
                    delay_show=150,
                    overlay_style={"visibility": "visible", "opacity": 0.5},
                    target_components={"_pages_content": "children"},  # not a body's own callback (its spinner)
                ),
            ]
        )

    return layout


def _nav_callback(app: Dash, access: StoreAccess) -> None:
    """The top bar's links, carrying the URL's runs (ui/routing.nav), whenever the URL changes;
    a run without SparseCores has no SparseCore link (routing.hidden_pages)."""

    @app.callback(Output("nav", "children"), Input(URL, "pathname"), Input(URL, "search"))
    def top_bar(pathname: Any, search: Any) -> Any:
        search = inputs.text(search) or ""
        return nav(inputs.text(pathname) or "/", search, hidden_pages(access, search))


def _pending_callbacks(app: Dash, access: StoreAccess) -> None:
    """A body a page's layout left pending (its render outlasted routing.RENDER_BUDGET_S: the
    analyzers on a big run, a long query) is filled by its own callback, from the render left
    running (routing.finish)."""
    for page, outputs, fn in pages.RENDERERS:
        render = guarded(access, len(outputs), needs=inputs.STATE_NEEDS.get(page, ()))(fn)
        app.callback(
            *[Output(i, prop) for i, prop in outputs],
            Input(pending_id(outputs[0][0]), "data"),
            State(f"{page}-state", "data"),
        )(_filler(outputs[0][0], render))


def _filler(body: str, render: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def fill(pending: Any, state: Any) -> Any:
        return finish(body, state, render)

    fill.__name__ = f"fill_{body.replace('-', '_')}"
    return fill


def _same(value: Any, rendered: Any) -> bool:
    """Whether a control's value is the one its page was rendered with (components may report
    their value on mount; that is no change of state)."""
    if isinstance(value, list | tuple) or isinstance(rendered, list | tuple):
        return [str(x) for x in value or []] == [str(x) for x in rendered or []]
    return str(value if value is not None else "") == str(rendered if rendered is not None else "")


def _url_callbacks(app: Dash) -> None:
    """Controls write the URL (Dash Pages then renders the page from it)."""
    out = Output(URL, "search", allow_duplicate=True)
    search = State(URL, "search")

    # page -> [(control id, URL/state key)]; the first control of a run page picks the run.
    controls = {
        "runs": [
            ("runs-filter", "filter"),
            ("runs-sort", "sort"),
            ("runs-desc", "desc"),
            ("runs-trials", "trials"),
            ("runs-base", "base"),
            ("runs-cand", "cand"),
        ],
        "overview": [("overview-run", "run"), ("overview-steps", "steps")],
        "timeline": [("timeline-run", "run"), ("timeline-steps", "steps")],
        "sparsecore": [
            ("sparsecore-run", "run"),
            ("sparsecore-steps", "steps"),
            ("sparsecore-tables", "tables"),
            ("sparsecore-metric", "metric"),
        ],
        "memory": [("memory-run", "run"), ("memory-chips", "chips"), ("memory-steps", "steps")],
        "ops": [("ops-run", "run")],
        "input": [("input-run", "run")],
        "findings": [("findings-run", "run"), ("findings-sev", "sev")],
        "tuning": [("tuning-run", "run")],
        "compare": [("compare-base", "base"), ("compare-cand", "cand")],
    }

    def register(page: str, pairs: list[tuple[str, str]]) -> None:
        keys = dict(pairs)

        @app.callback(
            out,
            *[Input(i, "value") for i, _ in pairs],
            State(f"{page}-state", "data"),
            search,
            prevent_initial_call=True,
        )
        @inputs.url_callback
        def page_url(*args):
            *values, rendered, s = args
            trig = ctx.triggered_id
            if not isinstance(trig, str) or trig not in keys:
                return no_update
            value = values[[i for i, _ in pairs].index(trig)]
            key = keys[trig]
            if not inputs.control_value_ok(key, value) or (s is not None and inputs.text(s) is None):
                return no_update
            shown = inputs.clean_state(rendered).get(key)
            if key in inputs.FLAGS:
                value, shown = ("1" if value else ""), (shown or "")
            if _same(value, shown):
                return no_update
            if key == "run":  # another run: its own steps, window and tables
                return ui_state.with_params(
                    s, run=value, steps=None, t0=None, t1=None, tables=None, chips=None, **TRACE_VIEW_RESET
                )
            if key == "steps":
                return ui_state.with_params(s, steps=ui_state.steps_text(value) if value else None, t0=None, t1=None)
            if key == "cand":  # a picked candidate replaces the run the top bar's Compare link carried
                return ui_state.with_params(s, cand=value, run=None)
            if isinstance(value, list):
                value = ",".join(map(str, value)) if value or key in ("chips", "sev") else None
            return ui_state.with_params(s, **{key: value if value not in ("",) else None})

    for page, pairs in controls.items():
        register(page, pairs)

    @app.callback(
        out,
        Input("sql-run", "n_clicks"),
        Input({"type": "sql-example", "index": ALL}, "n_clicks"),
        Input("sql-rows", "value"),
        State("sql-text", "value"),
        State("sql-state", "data"),
        search,
        prevent_initial_call=True,
    )
    @inputs.url_callback
    def sql_url(run_clicks, examples, rows, text, rendered, s):
        trig = ctx.triggered_id
        examples_sql = list(SQL_EXAMPLES.values())
        if not (inputs.is_scalar(rows) and inputs.is_scalar(text) and inputs.text(s or "") is not None):
            return no_update
        if isinstance(trig, dict):
            index = trig.get("index")
            if not (isinstance(index, int) and 0 <= index < len(examples_sql)) or not inputs.is_scalar_list(examples):
                return no_update
            if not any(examples):
                return no_update
            text = examples_sql[index]
        elif (trig == "sql-rows" and _same(rows, inputs.clean_state(rendered).get("rows"))) or (
            trig == "sql-run" and not run_clicks
        ):
            return no_update
        return ui_state.with_params(s, q=str(text or "").strip() or None, rows=rows or None)


def serve(
    db_path: str | None, host: str = "127.0.0.1", port: int = 8050, token: str | None = None, show_token: bool = False
) -> None:
    """Serve the UI until interrupted (`scprof ui`); with a token, every request must carry it
    (`show_token`: print the address with it, for a token made up here)."""
    analyse_stale_runs(os.path.abspath(db_path or default_path()))  # before serving: no page runs the analyzers
    app = create_app(db_path, token)
    try:  # open the store now (its schema checks, ~60 ms), not in the first page's request
        with app.scprof_access.open():
            pass
    except ScprofError:  # no store yet, or one the pages will report on
        pass
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    url = f"http://{auth.url_host(host)}:{port}/"
    if token is not None:
        url += f"?token={token}" if show_token else " (with the access token: add ?token=... once)"
    print(f"scprof UI on {url} (store {app.scprof_access.path}); Ctrl-C to stop", flush=True)
    app.run(host=host, port=port, debug=False)


__all__ = ["create_app", "serve"]

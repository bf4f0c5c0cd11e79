"""The Dash application: routing, callbacks wiring pages (ui/pages/) to the URL, downloads.

The URL is the state: a control's change rewrites the query string and the router renders the
page from it, data included (ui/routing.py). So every view is a link. A page's first view comes
with the layout Dash asks for when it starts (ui/first_view.py): no callback to wait for.

    scprof ui [--host 127.0.0.1] [--port 8050] [--token T] [--db PATH]

Every request passes ui/auth.py (loopback only, or the access token) and every callback's inputs
ui/inputs.py's checks; downloads are in ui/downloads.py.
"""

from __future__ import annotations

import logging
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update
from flask import has_request_context, request

from profiler.errors import ScprofError
from profiler.sql_guard import keep_spare_worker
from profiler.store import default_path
from ui import auth, downloads, inputs, pages, queries, trace_api
from ui import state as ui_state
from ui.first_view import FirstViews, page_url
from ui.routing import filled_page, finish, guarded, pending_id
from ui.store_access import StoreAccess
from ui.warmup import Activity, prefetch_pages, prime, warm_up

log = logging.getLogger("scprof.ui")

# The trace viewer's own URL state (ui/assets/trace_viewer*.js), meaningless in another run.
TRACE_VIEW_RESET = {"sel": None, "find": None, "hl": None, "collapsed": None, "pinned": None}


# Dash's renderer ships @babel/polyfill (core-js 2 and regenerator-runtime) for old browsers: in
# chromium it costs 0.1 s of script per first view and replaces native String.prototype.trim.
# Its code needs only the global regeneratorRuntime, which the vendored regenerator-runtime
# (the version the polyfill bundles) defines in its place, at the same point of the page.
_POLYFILL_TAG = re.compile(r'<script src="[^"]*/deps/polyfill@[^"/]*\.js[^"]*"></script>')
REGENERATOR = "vendor/regenerator-runtime.js"
# dash_table's loader, which Dash adds to every page since `import dash` defines its DataTable: the
# UI draws no DataTable (its tables: ui/render.py), so the page leaves out 34 KB and ~15 ms of script.
_DASH_TABLE_TAG = re.compile(r'<script src="[^"]*/dash_table/bundle[^"/]*\.js[^"]*"></script>')


class ScprofDash(Dash):
    """Dash, its page's scripts without @babel/polyfill (regenerator-runtime instead) and without
    dash_table's."""

    def interpolate_index(self, **kwargs: Any) -> str:
        tag = f'<script src="{self.get_asset_url(REGENERATOR)}"></script>'
        kwargs["scripts"], n = _POLYFILL_TAG.subn(lambda _: tag, kwargs.get("scripts", ""))
        if n != 1:
            log.warning("Dash's polyfill script tag not found (%d): serving the page's scripts as they are", n)
        kwargs["scripts"] = _DASH_TABLE_TAG.sub("", kwargs["scripts"])
        return super().interpolate_index(**kwargs)


def create_app(db_path: str | None = None, token: str | None = None) -> Dash:
    """The Dash app serving the store at `db_path` (default: $SCPROF_DB or ./scprof.duckdb);
    with a `token`, every request must carry it (ui/auth.py), else only localhost may ask."""
    path = os.path.abspath(db_path or default_path())
    access = StoreAccess(path)
    # the SQL console's next query finds its worker process started; started first, so that its
    # start-up (Python and DuckDB imports) overlaps prime()'s, not a first view's
    keep_spare_worker()
    prime()  # plotly's validators and the pages' optional modules: at start, not in a user's first view
    app = ScprofDash(
        __name__,
        title="scprof",
        suppress_callback_exceptions=True,
        update_title=None,
        assets_folder=os.path.join(os.path.dirname(__file__), "assets"),
        assets_path_ignore=["^vendor$"],  # loaded on demand (ui/assets/plotly_loader.js), not on every page
    )
    app.scprof_access = access  # type: ignore[attr-defined]  # for tests and benchmarks
    auth.require_access(app.server, token)
    inputs.guard_dispatch(app.server)
    first_views = FirstViews(access)
    prefetch_pages(app.server, access, first_views)  # after the access check
    app.layout = _layout(app, path, first_views)
    _router(app, access)
    _pending_callbacks(app, access)
    _url_callbacks(app)
    downloads.register(app.server, access)
    trace_api.register(app.server, access)
    return app


def _layout(app: Dash, store_path: str, first_views: FirstViews) -> Callable[[], Any]:
    """The frame (the URL, the top bar, the page). Asked for by a browser opening a page, it holds
    that page, data included (ui/first_view.py): a first view waits for no callback but those of
    bodies still being rendered."""
    layout_path = app.config.requests_pathname_prefix + "_dash-layout"

    def layout() -> Any:
        url, page, links = dcc.Location(id="url", refresh=False), None, None
        at = page_url(request.referrer, request.host) if has_request_context() and request.path == layout_path else None
        if at is not None:
            try:
                page, links = first_views.take(*at)
            except Exception:  # noqa: BLE001 - the router renders the page instead
                log.error("first view of %s failed:\n%s", at[0], traceback.format_exc())
            else:  # the URL as the browser has it: dcc.Location reports no change, the router is not called
                url.pathname, url.search = at
        return html.Div(
            [
                url,
                html.Header(
                    [
                        html.A("scprof", href="/runs", className="brand"),
                        html.Nav(links, id="nav"),
                        html.Span(store_path, className="store-path", title="store"),
                    ],
                    className="topbar",
                ),
                # a page being rendered: the one shown dimmed under a spinner (after 150 ms)
                dcc.Loading(
                    html.Main(page, id="page"),
                    delay_show=150,
                    overlay_style={"visibility": "visible", "opacity": 0.5},
                    target_components={"page": "children"},  # not a body's own callback (its spinner)
                ),
            ]
        )

    return layout


def _router(app: Dash, access: StoreAccess) -> None:
    """The URL's page, data included (ui/routing.filled_page), whenever the URL changes: a link, a
    control writing the URL, the browser's back button. Not called for the layout's first view;
    without one (no Referer), dcc.Location reports the URL when it starts and so calls it."""

    @app.callback(
        Output("page", "children"),
        Output("nav", "children"),
        Input("url", "pathname"),
        Input("url", "search"),
        prevent_initial_call=True,
    )
    def route(pathname: Any, search: Any) -> tuple[Any, Any]:
        return filled_page(access, inputs.text(pathname), inputs.text(search))


def _pending_callbacks(app: Dash, access: StoreAccess) -> None:
    """A body the router or a first view left pending (its render outlasted
    routing.RENDER_BUDGET_S: the analyzers on a big run, a long query) is filled by its own
    callback, from the render left running (routing.finish)."""
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
    """Controls write the URL (the router then renders the page from it)."""
    out = Output("url", "search", allow_duplicate=True)
    search = State("url", "search")

    # page -> [(control id, URL/state key)]; the first control of a run page picks the run.
    controls = {
        "runs": [
            ("runs-filter", "filter"),
            ("runs-sort", "sort"),
            ("runs-desc", "desc"),
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
            if key == "desc":
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
        examples_sql = list(queries.SQL_EXAMPLES.values())
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
    app = create_app(db_path, token)
    try:  # open the store now (its schema checks, ~60 ms), not in the first page's request
        with app.scprof_access.open():
            pass
    except ScprofError:  # no store yet, or one the pages will report on
        pass
    activity = Activity()
    app.server.wsgi_app = activity.wrap(app.server.wsgi_app)  # type: ignore[method-assign]
    warm_up(app.scprof_access, activity)  # the newest runs' analyses while the server is idle (ui/warmup.py)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    url = f"http://{auth.url_host(host)}:{port}/"
    if token is not None:
        url += f"?token={token}" if show_token else " (with the access token: add ?token=... once)"
    print(f"scprof UI on {url} (store {app.scprof_access.path}); Ctrl-C to stop", flush=True)
    app.run(host=host, port=port, debug=False)


__all__ = ["create_app", "serve"]

"""The Dash application: routing, callbacks wiring pages (ui/pages/) to the URL, downloads.

The URL is the state: a control's change rewrites the query string, the router renders
the page from it, and the page's data callbacks fill it in. So every view is a link.

    scprof ui [--host 127.0.0.1] [--port 8050] [--token T] [--db PATH]

Every request passes ui/auth.py (loopback only, or the access token) and every callback's inputs
ui/inputs.py's checks; downloads are in ui/downloads.py.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from profiler.errors import ScprofError, StoreError
from profiler.sql_guard import keep_spare_worker
from profiler.store import default_path
from ui import auth, downloads, trace_api
from ui import inputs as I
from ui import pages as P
from ui import queries as Q
from ui import render as R
from ui import state as S
from ui.pages.common import NO_RUNS, UnknownRun, unknown_run
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


class ScprofDash(Dash):
    """Dash, its page's scripts without @babel/polyfill (regenerator-runtime instead)."""

    def interpolate_index(self, **kwargs: Any) -> str:
        tag = f'<script src="{self.get_asset_url(REGENERATOR)}"></script>'
        kwargs["scripts"], n = _POLYFILL_TAG.subn(lambda _: tag, kwargs.get("scripts", ""))
        if n != 1:
            log.warning("Dash's polyfill script tag not found (%d): serving the page's scripts as they are", n)
        return super().interpolate_index(**kwargs)


def create_app(db_path: str | None = None, token: str | None = None) -> Dash:
    """The Dash app serving the store at `db_path` (default: $SCPROF_DB or ./scprof.duckdb);
    with a `token`, every request must carry it (ui/auth.py), else only localhost may ask."""
    path = os.path.abspath(db_path or default_path())
    access = StoreAccess(path)
    prime()  # plotly's validators and the pages' optional modules: at start, not in a user's first view
    keep_spare_worker()  # the SQL console's next query finds its worker process started
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
    I.guard_dispatch(app.server)
    prefetch_pages(app.server, access)  # after the access check
    app.layout = html.Div(
        [
            dcc.Location(id="url", refresh=False),
            html.Header(
                [
                    html.A("scprof", href="/runs", className="brand"),
                    html.Nav(id="nav"),
                    html.Span(path, className="store-path", title="store"),
                ],
                className="topbar",
            ),
            html.Main(id="page"),
        ]
    )
    _router(app, access)
    _page_callbacks(app, access)
    _url_callbacks(app)
    downloads.register(app.server, access)
    trace_api.register(app.server, access)
    return app


def guarded(access: StoreAccess, n_outputs: int = 1, needs: tuple[str, ...] = ()) -> Callable:
    """Run a page callback on a read-only store with its page state checked (ui/inputs.py: `needs`
    the keys it cannot do without); turn failures into an in-page message."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(state: Any) -> Any:
            st = I.page_state(state, needs)
            try:
                if st is None:
                    raise ScprofError("this page's state is malformed; reload the page")
                with access.open() as store:
                    return fn(store, st)
            except StoreError as e:
                out = (
                    R.empty(f"{e}.", "scprof record configs/baseline.toml") if "no store" in str(e) else R.error(str(e))
                )
            except ScprofError as e:
                out = R.error(str(e))
            except Exception as e:  # noqa: BLE001 - shown in the page, logged with its traceback
                log.error("callback %s failed:\n%s", fn.__name__, traceback.format_exc())
                out = R.error(f"internal error in {fn.__name__}: {type(e).__name__}: {e}")
            return out if n_outputs == 1 else (out, *([no_update] * (n_outputs - 1)))

        return inner

    return wrap


def nav(pathname: str, search: str) -> list[Any]:
    st = S.parse(search)
    keep = {k: st[k] for k in S.CARRIED if k in st}
    if "run" not in keep and "cand" in keep:
        keep["run"] = keep["cand"]
    links = []
    for path, label in S.PAGES.items():
        params = {k: v for k, v in keep.items() if path == "/compare" or k == "run"}
        links.append(
            dcc.Link(
                label,
                href=R.href(path, **params),
                id=f"nav-{label.lower()}",
                className="nav-link active" if pathname == path else "nav-link",
            )
        )
    return links


def page_for(access: StoreAccess, pathname: str | None, search: str | None) -> tuple[Any, Any]:
    """(page, navigation) for a URL: the page's controls from the query, its data left to its callbacks."""
    pathname = pathname if pathname in S.PAGES else ("/runs" if pathname in (None, "", "/") else pathname)
    links = nav(pathname, search or "")
    if pathname not in P.LAYOUTS:
        return R.empty(f"No page at {pathname}.", "try /runs"), links
    st = S.parse(search)
    try:
        with access.open() as store:
            try:
                page = P.LAYOUTS[pathname](store, st)
            except UnknownRun as e:  # named as unknown, never silently another run
                page = unknown_run(store, pathname, st, e)
    except StoreError as e:
        page = R.empty(f"{e}.", NO_RUNS[1]) if "no store" in str(e) else R.error(str(e))
    except Exception as e:  # noqa: BLE001 - shown in the page, logged with its traceback
        log.error("page %s failed:\n%s", pathname, traceback.format_exc())
        page = R.error(f"internal error rendering {pathname}: {type(e).__name__}: {e}")
    return html.Div([html.H2(S.PAGES[pathname]), page], className=f"page page-{pathname.strip('/')}"), links


def _router(app: Dash, access: StoreAccess) -> None:
    @app.callback(
        Output("page", "children"), Output("nav", "children"), Input("url", "pathname"), Input("url", "search")
    )
    def route(pathname: Any, search: Any) -> tuple[Any, Any]:
        return page_for(access, I.text(pathname), I.text(search))


def _page_callbacks(app: Dash, access: StoreAccess) -> None:
    for page, outputs, fn in P.RENDERERS:
        app.callback(*[Output(i, prop) for i, prop in outputs], Input(f"{page}-state", "data"))(
            guarded(access, len(outputs), needs=I.STATE_NEEDS.get(page, ()))(fn)
        )


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
        @I.url_callback
        def page_url(*args):
            *values, rendered, s = args
            trig = ctx.triggered_id
            if not isinstance(trig, str) or trig not in keys:
                return no_update
            value = values[[i for i, _ in pairs].index(trig)]
            key = keys[trig]
            if not I.control_value_ok(key, value) or (s is not None and I.text(s) is None):
                return no_update
            shown = I.clean_state(rendered).get(key)
            if key == "desc":
                value, shown = ("1" if value else ""), (shown or "")
            if _same(value, shown):
                return no_update
            if key == "run":  # another run: its own steps, window and tables
                return S.with_params(
                    s, run=value, steps=None, t0=None, t1=None, tables=None, chips=None, **TRACE_VIEW_RESET
                )
            if key == "steps":
                return S.with_params(s, steps=S.steps_text(value) if value else None, t0=None, t1=None)
            if key == "cand":  # a picked candidate replaces the run the top bar's Compare link carried
                return S.with_params(s, cand=value, run=None)
            if isinstance(value, list):
                value = ",".join(map(str, value)) if value or key in ("chips", "sev") else None
            return S.with_params(s, **{key: value if value not in ("",) else None})

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
    @I.url_callback
    def sql_url(run_clicks, examples, rows, text, rendered, s):
        trig = ctx.triggered_id
        examples_sql = list(Q.SQL_EXAMPLES.values())
        if not (I.is_scalar(rows) and I.is_scalar(text) and I.text(s or "") is not None):
            return no_update
        if isinstance(trig, dict):
            index = trig.get("index")
            if not (isinstance(index, int) and 0 <= index < len(examples_sql)) or not I.is_scalar_list(examples):
                return no_update
            if not any(examples):
                return no_update
            text = examples_sql[index]
        elif (trig == "sql-rows" and _same(rows, I.clean_state(rendered).get("rows"))) or (
            trig == "sql-run" and not run_clicks
        ):
            return no_update
        return S.with_params(s, q=str(text or "").strip() or None, rows=rows or None)


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

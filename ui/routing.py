"""The pages as Dash Pages (`register_pages`: dash.register_page, a path each) and what each shows:
its controls from the URL's query (`page_for`), its render functions run safely (`guarded`), and
the two at once (`filled_page`: a page's layout, data included)."""

from __future__ import annotations

import functools
import json
import logging
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import dash
from dash import dcc, html, no_update
from dash.development.base_component import Component
from flask import current_app

from profiler.errors import ScprofError, StoreError
from ui import data as ui_data
from ui import inputs, pages
from ui import render as ui_render
from ui import state as ui_state
from ui.pages.common import NO_RUNS, NoRuns, UnknownRun, _no_runs, pick_run, unknown_run
from ui.store_access import StoreAccess

log = logging.getLogger("scprof.ui")
_RENDERING = ThreadPoolExecutor(max_workers=8, thread_name_prefix="scprof-ui-render")  # a page's renders side by side
RENDER_BUDGET_S = 0.3  # how long a page's layout waits for a body's render before leaving it to its callback


def guarded(access: StoreAccess, n_outputs: int = 1, needs: tuple[str, ...] = ()) -> Callable:
    """Run a page's render function on a read-only store with its page state checked (ui/inputs.py:
    `needs` the keys it cannot do without); turn failures into an in-page message."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(state: Any) -> Any:
            st = inputs.page_state(state, needs)
            try:
                if st is None:
                    raise ScprofError("this page's state is malformed; reload the page")
                with access.open() as store:
                    return fn(store, st)
            except StoreError as e:
                out = (
                    ui_render.empty(f"{e}.", "scprof record configs/baseline.toml")
                    if "no store" in str(e)
                    else ui_render.error(str(e))
                )
            except ScprofError as e:
                out = ui_render.error(str(e))
            except Exception as e:  # noqa: BLE001 - shown in the page, logged with its traceback
                log.error("callback %s failed:\n%s", fn.__name__, traceback.format_exc())
                out = ui_render.error(f"internal error in {fn.__name__}: {type(e).__name__}: {e}")
            return out if n_outputs == 1 else (out, *([no_update] * (n_outputs - 1)))

        return inner

    return wrap


def nav(pathname: str, search: str, hidden: frozenset[str] = frozenset()) -> list[Any]:
    """The top bar's links, carrying the URL's runs; the pages in `hidden` (hidden_pages) left out."""
    st = ui_state.parse(search)
    keep = {k: st[k] for k in ui_state.CARRIED if k in st}
    if "run" not in keep and "cand" in keep:
        keep["run"] = keep["cand"]
    links = []
    for path, label in ui_state.PAGES.items():
        if path in hidden:
            continue
        params = {k: v for k, v in keep.items() if path == "/compare" or k == "run"}
        links.append(
            dcc.Link(
                label,
                href=ui_render.href(path, **params),
                id=f"nav-{label.lower()}",
                className="nav-link active" if pathname == path else "nav-link",
            )
        )
    return links


def hidden_pages(access: StoreAccess, search: str) -> frozenset[str]:
    """The run pages the top bar leaves out for the run its links carry (the URL's run, else its
    candidate, else the newest): SparseCore for a run without SparseCores. None when the store
    cannot say (no store, an unknown run: the page itself says so)."""
    st = ui_state.parse(search)
    try:
        with access.open() as store:
            run = pick_run(store, {"run": st.get("run") or st.get("cand") or ""})
            return frozenset() if run is None or ui_data.has_sparsecores(store, run) else frozenset({"/sparsecore"})
    except ScprofError:  # UnknownRun among them
        return frozenset()


def register_pages() -> None:
    """Every page with Dash Pages, its layout `filled_page` over the URL's query (the Runs page at
    / too), and the page for a path the UI does not have. Call after the app is made (Dash asks so);
    the layouts find the store through the app serving the request (`ACCESS`), so every app made
    in a process serves its own."""
    for path, name in ui_state.PAGES.items():
        dash.register_page(f"ui.pages.{name.lower()}", path=path, name=name, title="scprof", layout=_layout(path))
    dash.register_page("ui.pages.home", path="/", name="Runs", title="scprof", layout=_layout("/runs"))
    dash.register_page("ui.pages.not_found_404", path="/404", name="404", title="scprof", layout=_not_found)


ACCESS = "scprof_access"  # the app's StoreAccess in its Flask server's config


def _layout(path: str) -> Callable[..., Any]:
    def layout(**query: Any) -> Any:
        return filled_page(current_app.config[ACCESS], path, search_of(query))[0]

    layout.__name__ = f"layout_{path.strip('/')}"
    return layout


def _not_found(**query: Any) -> Any:
    pathname = inputs.text(query.get(PATHNAME))
    return ui_render.empty(f"No page at {pathname}." if pathname else "No page at this address.", "try /runs")


PATHNAME = "_pathname"  # the URL's path, given to every layout (app.py: routing_callback_inputs)


def search_of(query: dict[str, Any]) -> str:
    """The query string of the parameters Dash Pages gives a layout (a list for a repeated one, ''
    for a blank one), as ui/state.py reads one: a parameter's first value, blanks left out."""
    params = {k: (v[0] if isinstance(v, list) and v else v) for k, v in query.items() if k != PATHNAME}
    search = ui_state.encode({k: v for k, v in params.items() if isinstance(v, str)})
    return search if inputs.text(search) is not None else ""


def page_for(access: StoreAccess, pathname: str | None, search: str | None) -> tuple[Any, Any]:
    """(page, navigation) for one of the UI's pages: the page's controls from the query, its bodies
    empty."""
    pathname = "/runs" if pathname in (None, "", "/") else pathname
    links = nav(pathname, search or "", hidden_pages(access, search or ""))
    if pathname not in pages.LAYOUTS:
        return ui_render.empty(f"No page at {pathname}.", "try /runs"), links
    st = ui_state.parse(search)
    try:
        with access.open() as store:
            try:
                page = pages.LAYOUTS[pathname](store, st)
            except UnknownRun as e:  # named as unknown, never silently another run
                page = unknown_run(store, pathname, st, e)
            except NoRuns:
                page = _no_runs()
    except StoreError as e:
        page = ui_render.empty(f"{e}.", NO_RUNS[1]) if "no store" in str(e) else ui_render.error(str(e))
    except Exception as e:  # noqa: BLE001 - shown in the page, logged with its traceback
        log.error("page %s failed:\n%s", pathname, traceback.format_exc())
        page = ui_render.error(f"internal error rendering {pathname}: {type(e).__name__}: {e}")
    return html.Div([html.H2(ui_state.PAGES[pathname]), page], className=f"page page-{pathname.strip('/')}"), links


def components(root: Any) -> Iterator[Component]:
    """Every component in the tree under `root` (a component, a list of them, or text), root first."""
    if isinstance(root, list | tuple):
        for item in root:
            yield from components(item)
    elif isinstance(root, Component):
        yield root
        yield from components(getattr(root, "children", None))


def pending_id(body: str) -> str:
    """The id of the store a body holds while its render is left to the body's own callback."""
    return f"{body}-pending"


def filled_page(
    access: StoreAccess, pathname: str | None, search: str | None, budget_s: float | None = None
) -> tuple[Any, Any]:
    """(page, navigation) for a URL with its data bodies filled in: the page's controls
    (`page_for`), then what its render functions (P.RENDERERS) put in them, side by side. A render
    not done within `budget_s` (default RENDER_BUDGET_S) leaves its body pending: the body holds a
    store whose callback (ui/app.py) fills it from that render (`finish`). So a page whose
    analyzers take seconds (a big run's first visit) shows the rest at once."""
    page, links = page_for(access, pathname, search)
    by_id = {c.id: c for c in components(page) if isinstance(getattr(c, "id", None), str)}
    fills = [  # (the outputs, the page's state, their render function); not this page's: left out
        (outputs, state.data, guarded(access, len(outputs), inputs.STATE_NEEDS.get(name, ()))(render))
        for name, outputs, render in pages.RENDERERS
        if (state := by_id.get(f"{name}-state")) is not None and all(i in by_id for i, _ in outputs)
    ]
    futures = [_RENDERING.submit(render, state) for _, state, render in fills]
    wait(futures, timeout=RENDER_BUDGET_S if budget_s is None else budget_s)
    for (outputs, state, _), future in zip(fills, futures, strict=True):
        body = outputs[0][0]
        if future.done():
            values = future.result()
            for (i, prop), value in zip(outputs, values if len(outputs) > 1 else (values,), strict=True):
                if value is not no_update:
                    setattr(by_id[i], prop, value)
        else:
            if (key := _state_key(state)) is not None:
                _left.put((body, key), future)
            by_id[body].children = dcc.Store(id=pending_id(body), data=True)
    return page, links


def finish(body: str, state: Any, render: Callable[[Any], Any]) -> Any:
    """A pending body's outputs: those of the render `filled_page` left running for this page
    state, else `render(state)` (a render already taken, or a request from elsewhere)."""
    key = _state_key(state)
    future = _left.pop((body, key)) if key is not None else None
    return future.result() if future is not None else render(state)


def _state_key(state: Any) -> str | None:
    try:
        return json.dumps(state, sort_keys=True)
    except (TypeError, ValueError):
        return None


class _LeftRenders:
    """Renders `filled_page` stopped waiting for, by (body, page state), the newest `keep`, until
    the body's callback takes them."""

    def __init__(self, keep: int = 32):
        self._renders: OrderedDict[tuple[str, str], Future] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep

    def put(self, key: tuple[str, str], future: Future) -> None:
        with self._lock:
            self._renders[key] = future
            while len(self._renders) > self._keep:
                self._renders.popitem(last=False)

    def pop(self, key: tuple[str, str]) -> Future | None:
        with self._lock:
            return self._renders.pop(key, None)


_left = _LeftRenders()

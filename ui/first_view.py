"""A page's first view in the layout Dash's renderer asks for (target: a first view within 1 s).

Dash's renderer, once started, asks for the layout, then calls the callbacks whose inputs it
holds. Asking the router for the page would cost a round trip and a second render after Dash's
start. Instead `/_dash-layout` answers with the page the browser's address names (the request's
Referer: the document it was asked from), data included, made by the router's own function
(ui/routing.filled_page) from the moment the document was asked for (FirstViews.start), while the
browser loads and starts Dash. dcc.Location is given that URL: it reports no change, and the
router (prevent_initial_call) is not called.

Without a usable Referer (another host, a path the UI does not have, a browser sending none) the
layout is the bare frame: dcc.Location reports the URL when it starts, and the router renders the
page.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from ui import inputs, state
from ui.routing import filled_page
from ui.store_access import StoreAccess

FRESH_S = 30.0  # a view rendered for a document and not asked for within this long is rendered anew


def page_url(referrer: str | None, host: str) -> tuple[str, str] | None:
    """(path, query string with its '?', or '') of the UI page `referrer` names on this `host`;
    None for another host's URL or a path that is not a page (the router then renders it)."""
    if not referrer or inputs.text(referrer) is None:  # the size the router accepts of a URL's parts
        return None
    try:
        parts = urlsplit(referrer)
    except ValueError:
        return None
    if parts.netloc != host or (parts.path not in state.PAGES and parts.path != "/"):
        return None
    return parts.path, f"?{parts.query}" if parts.query else ""


def _key(pathname: str | None, search: str | None) -> tuple[str | None, str]:
    return pathname, state.encode(dict(sorted(state.parse(search).items())))  # one state, however spelled


class FirstViews:
    """First views rendered ahead by `workers` threads, the newest `keep` held until asked for.
    A view holds every body rendered by the time its layout is asked for; the others are left to
    their callbacks (ui/routing.filled_page)."""

    def __init__(self, access: StoreAccess, workers: int = 2, keep: int = 8):
        self.access = access
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scprof-ui-first-view")
        self._views: OrderedDict[tuple[str | None, str], tuple[float, Future, Future]] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep

    def start(self, pathname: str, search: str) -> None:
        """Start rendering the first view of the page at `pathname` + `search` (its document was
        asked for: its layout is asked for next)."""
        if pathname not in state.PAGES and pathname != "/":
            return
        key = _key(pathname, search)
        with self._lock:
            if key in self._views and time.monotonic() - self._views[key][0] < FRESH_S:
                return
            asked: Future = Future()
            view = self._pool.submit(filled_page, self.access, pathname, search, asked)
            self._views[key] = (time.monotonic(), view, asked)
            self._views.move_to_end(key)
            while len(self._views) > self._keep:
                self._views.popitem(last=False)[1][2].set_result(None)  # never asked for: stop waiting

    def take(self, pathname: str | None, search: str | None) -> tuple[Any, Any]:
        """(page, navigation) of that URL: the view started for its document, else one rendered now."""
        with self._lock:
            started, view, asked = self._views.pop(_key(pathname, search), (0.0, None, None))
        if view is not None and asked is not None and time.monotonic() - started < FRESH_S:
            asked.set_result(None)  # the view stops waiting for its renders
            return view.result()
        return filled_page(self.access, pathname, search)

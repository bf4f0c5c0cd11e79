"""Analyses computed ahead when the UI server starts: the newest runs' reports and the default
Compare pair's comparison, in one background thread, so that a first view of the Overview, the
Findings or Compare need not wait for the analyzers (issue 19: every first view within 1 s).

Only while the server is idle (no request in flight, none for IDLE_S): computed alongside a
page's requests, the analyses made the first views of other pages 50-200 ms slower on 2 cores.

The same functions and caches the pages use (ui/data.py: analysis, compare): the figures are the
ones a page would compute itself, and a page asking for a report still being computed here waits
for that computation (KeyedCache computes a key once) rather than repeating it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from profiler.errors import ScprofError
from ui import compare_data as CD
from ui import data as D
from ui.store_access import StoreAccess

log = logging.getLogger(__name__)

NEWEST_RUNS = 4  # runs analysed ahead, newest first (the analyses' cache holds 8)
IDLE_S = 1.0  # how long the server must have had no request before the next analysis starts


class Activity:
    """The server's requests in flight and when the last one ended (a WSGI wrapper counts them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last = time.monotonic()

    def wrap(self, wsgi_app: Callable[..., Any]) -> Callable[..., Any]:
        def counted(environ: Any, start_response: Any) -> Any:
            self.enter()
            try:
                return wsgi_app(environ, start_response)
            finally:
                self.leave()

        return counted

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight."""
        with self._lock:
            return 0.0 if self._in_flight else time.monotonic() - self._last

    def wait_idle(self, seconds: float, poll_s: float = 0.05) -> None:
        while self.idle_s() < seconds:
            time.sleep(poll_s)


def warm_up(
    access: StoreAccess, activity: Activity | None = None, runs: int = NEWEST_RUNS, idle_s: float = IDLE_S
) -> threading.Thread:
    """Start the background thread computing the newest `runs` runs' analyses, then the default
    Compare pair's comparison, each once the server has been idle `idle_s` (per `activity`; none:
    at once); returns it (a daemon: it never holds the server up)."""
    wait = (lambda: activity.wait_idle(idle_s)) if activity is not None else (lambda: None)
    thread = threading.Thread(target=_warm, args=(access, runs, wait), name="scprof-ui-warm-up", daemon=True)
    thread.start()
    return thread


def _warm(access: StoreAccess, runs: int, wait: Callable[[], None]) -> None:
    try:
        wait()
        with access.open() as store:
            ids = [r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id DESC LIMIT ?", [runs])]
            pair = CD.compare_pair(store, {})
        for run in ids:
            wait()
            with access.open() as store:
                _quietly(lambda run=run, store=store: D.analysis(store, run))
        if pair["base"] is not None and pair["cand"] is not None:
            wait()
            with access.open() as store:
                _quietly(lambda store=store: D.compare(store, pair["base"], pair["cand"]))
    except Exception:  # noqa: BLE001 - no store yet, or one the pages will report on themselves
        log.debug("warm-up stopped", exc_info=True)


def _quietly(compute) -> None:
    """compute(); a run the analyzers refuse is left for its page to explain."""
    try:
        compute()
    except ScprofError:
        log.debug("warm-up: skipped", exc_info=True)
    except Exception:  # noqa: BLE001 - logged; the page shows the error when asked
        log.warning("warm-up: analysis failed", exc_info=True)

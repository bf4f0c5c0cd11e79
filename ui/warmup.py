"""Analyses computed ahead, so that a first view of the Overview, the Findings or Compare need not
wait for the analyzers (the target: every first view within 1 s, docs/benchmarks.md):
- warm_up: when the UI server starts, the newest runs' reports and the default Compare pair's
  comparison, in one background thread, only while the server is idle (no request in flight,
  none for IDLE_S): computed alongside a page's requests, they made the first views of other
  pages 50-200 ms slower on 2 cores;
- Prefetch: when a browser asks for one of those pages' documents, the reports that page's render
  functions will ask for, started at once, on threads of their own (two runs' side by side for
  Compare): the browser's time loading Dash and asking for the page's layout (0.4-1.2 s on 2
  cores) overlaps the analyzers' work instead of preceding it;
- prime: at start, what a page's first render would otherwise pay once per process.

The same functions and caches the pages use (ui/data.py: analysis, compare): the figures are the
ones a page would compute itself, and a page asking for a report still being computed here waits
for that computation (KeyedCache computes a key once) rather than repeating it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, request

from profiler import sqltree
from profiler.errors import ScprofError
from ui import compare_data, data, render
from ui.pages.common import pick_run
from ui.store_access import StoreAccess

log = logging.getLogger(__name__)

# Modules the pages import on first use: optional parts of a build (the what-if engine, which
# brings the emulator, the comparison, the Perfetto exporter), ~150 ms in a page's first render;
# and libraries' parts loaded lazily by what the pages call (numpy's masked arrays by
# np.percentile, its random generators by Compare's bootstrap, narwhals' interchange layer by
# plotly's checks of the Overview's data), another 50-100 ms of a first Overview or Compare.
FIRST_USE_MODULES = (
    "analyzers.compare",
    "exporters.perfetto",
    "whatif.attribute",
    "whatif.tune",
    "whatif.configs",
    "numpy.ma",
    "numpy.random",
    "narwhals._interchange.dataframe",
)
_primed = False


def prime() -> None:
    """Pay at server start, once per process, what a page's first render would otherwise pay:
    plotly's validators (render.prime_figures) and FIRST_USE_MODULES' imports."""
    global _primed
    if _primed:
        return
    render.prime_figures()
    for name in FIRST_USE_MODULES:
        with contextlib.suppress(ImportError):  # a build without it: its page says so
            importlib.import_module(name)
    _primed = True


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
            ids = sqltree.query(store.con, "ui.runs.newest_runs", runs=runs).column("run_id").to_pylist()
            pair = compare_data.compare_pair(store, {})
        for run in ids:
            wait()
            _analyse(access, run)
        if pair["base"] is not None and pair["cand"] is not None:
            wait()
            _compare(access, pair["base"], pair["cand"])
    except Exception:  # noqa: BLE001 - no store yet, or one the pages will report on themselves
        log.debug("warm-up stopped", exc_info=True)


def _analyse(access: StoreAccess, run: int) -> None:
    """The run's analysis into the pages' cache (data.analysis)."""
    with access.open() as store:
        _quietly(lambda: data.analysis(store, run))


def _compare(access: StoreAccess, base: int, cand: int) -> None:
    """The pair's comparison into the pages' cache (data.compare)."""
    with access.open() as store:
        _quietly(lambda: data.compare(store, base, cand))


def _quietly(compute) -> None:
    """compute(); a run the analyzers refuse is left for its page to explain."""
    try:
        compute()
    except ScprofError:
        log.debug("warm-up: skipped", exc_info=True)
    except Exception:  # noqa: BLE001 - logged; the page shows the error when asked
        log.warning("warm-up: analysis failed", exc_info=True)


class Prefetch:
    """The analyses a page is about to ask for, computed by `workers` daemon threads from the
    moment its document is asked for. Queued pages beyond `backlog` are dropped (the page then
    computes its own); a run the URL names wrongly is left for the page to report."""

    PAGES = ("/overview", "/findings", "/compare")  # whose render functions run the analyzers

    def __init__(self, access: StoreAccess, workers: int = 2, backlog: int = 8):
        self.access = access
        self._jobs: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=backlog)
        self._workers = workers
        self._started = False
        self._lock = threading.Lock()

    def page(self, path: str, query: Mapping[str, str]) -> None:
        """Start the analyses the page at `path` with URL parameters `query` will need."""
        if path not in self.PAGES:
            return
        st = dict(query)
        self._submit(lambda: self._page(path, st))

    def _page(self, path: str, st: dict[str, str]) -> None:
        with self.access.open() as store:
            if path != "/compare":
                run = pick_run(store, st)
                runs = [run] if run is not None else []
            else:
                pair = compare_data.compare_pair(store, st)  # a side the URL names wrongly: the page says so
                runs = [] if pair["unknown"] else [r for r in (pair["base"], pair["cand"]) if r is not None]
        for run in runs[1:]:  # each on a worker of its own: DuckDB runs the two side by side
            self._submit(lambda run=run: _analyse(self.access, run))
        if runs:
            _analyse(self.access, runs[0])
        if len(set(runs)) == 2:
            _compare(self.access, runs[0], runs[1])

    def _submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if not self._started:
                for i in range(self._workers):
                    threading.Thread(target=self._work, name=f"scprof-ui-prefetch-{i}", daemon=True).start()
                self._started = True
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            log.debug("prefetch: backlog full, page left to compute its own")

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception:  # noqa: BLE001 - an unknown run or no store: the page reports it
                log.debug("prefetch stopped", exc_info=True)


def prefetch_pages(server: Flask, access: StoreAccess) -> Prefetch:
    """From the moment the server is asked for a page's document: the analyses it needs computed,
    in threads of their own (after ui/auth.py's check: register it after require_access)."""
    prefetch = Prefetch(access)

    @server.before_request
    def _prefetch() -> None:
        if request.method == "GET":
            prefetch.page(request.path, request.args.to_dict())

    return prefetch

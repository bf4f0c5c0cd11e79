"""Analyses computed ahead when the UI server starts: the newest runs' reports and the default
Compare pair's comparison, in one background thread, so that a first view of the Overview, the
Findings or Compare need not wait for the analyzers (issue 19: every first view within 1 s).

The same functions and caches the pages use (ui/data.py: analysis, compare): the figures are the
ones a page would compute itself, and a page asking for a report still being computed here waits
for that computation (KeyedCache computes a key once) rather than repeating it.
"""

from __future__ import annotations

import logging
import threading

from profiler.errors import ScprofError
from ui import compare_data as CD
from ui import data as D
from ui.store_access import StoreAccess

log = logging.getLogger(__name__)

NEWEST_RUNS = 4  # runs analysed ahead, newest first (the analyses' cache holds 8)


def warm_up(access: StoreAccess, runs: int = NEWEST_RUNS) -> threading.Thread:
    """Start the background thread computing the newest `runs` runs' analyses, then the default
    Compare pair's comparison; returns it (a daemon: it never holds the server up)."""
    thread = threading.Thread(target=_warm, args=(access, runs), name="scprof-ui-warm-up", daemon=True)
    thread.start()
    return thread


def _warm(access: StoreAccess, runs: int) -> None:
    try:
        with access.open() as store:
            ids = [r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id DESC LIMIT ?", [runs])]
            for run in ids:
                _quietly(lambda run=run: D.analysis(store, run))
            pair = CD.compare_pair(store, {})
            if pair["base"] is not None and pair["cand"] is not None:
                _quietly(lambda: D.compare(store, pair["base"], pair["cand"]))
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

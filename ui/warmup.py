"""What a page's first render would otherwise pay once per process, paid when the UI server starts
(prime): plotly's validators and the pages' optional modules.

Analyses need no warming: `scprof record` and `ingest` store each run's analysis as tables
(analyzers/materialize.py), which a page reads in milliseconds (analyzers/runstats.py); a run
whose stored analysis is stale (made by older code) is analysed by the first page that asks,
once per process (ui/data.py's caches).
"""

from __future__ import annotations

import contextlib
import importlib

from ui import render

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

"""A store for the polish tests (issue 19): a skewed run (26 tables, one rule's findings repeated),
an HBM-pressure run (a timestamp in the evidence), a failed compile and a run with a tuning-like
long reason; recorded by the emulator, a few steps each."""

from __future__ import annotations

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from tests.tracekit import REPO

STEPS = 5
RUNS = {"skewed": "skewed_ids", "hbm": "hbm_pressure", "failed": "spmem_overflow"}


def build_polish_store(directory) -> str:
    """The runs of RUNS recorded into one store; skips when the emulator is unavailable."""
    try:
        from sim_backend.record import record_run
    except ImportError:
        pytest.skip("the emulator (sim_backend) is needed to record the polish runs")
    from profiler.errors import ScprofError

    db = str(directory / "polish.duckdb")
    with Store.open(db) as store:
        for name, config in RUNS.items():
            out = directory / name
            try:
                result = record_run(str(REPO / "configs" / f"{config}.toml"), [], name, STEPS, str(out), progress=False)
                trace = result.trace_path
            except ScprofError:  # a failed compile still writes its trace, stored as a failed run
                trace = str(out / "trace.sctrace")
            ingest_trace(store, trace, name=name)
    return db

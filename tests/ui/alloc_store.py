"""A store for the Memory page's device memory section: the TF2 GPU capture (allocator events on
two hosts), a JAX CPU capture (none) and a small emulated run (HBM counters, no allocators), each
analysed as `scprof ingest` stores it."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from analyzers import materialize
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from scprof.cli import main
from tests.tracekit import record_small
from tests.xplane.helpers import DATA, JAX_SMALL

TF2 = os.path.join(DATA, "wild", "tf2_gpu_multi_worker")


def build_alloc_store(d: Path) -> str:
    """The store's path; runs named tf2, cpu and emulated."""
    db = str(d / "alloc.duckdb")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", TF2, "--db", db, "--name", "tf2"]) == 0
        assert main(["ingest", JAX_SMALL, "--db", db, "--name", "cpu"]) == 0
    with Store.open(db) as store:
        materialize.build(store, ingest_trace(store, str(record_small(d / "e.sctrace", run_name="emulated"))).run_id)
    return db

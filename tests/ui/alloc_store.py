"""A store for the Memory page's device memory section: the TF2 GPU capture (allocator events on
two hosts), a JAX CPU capture (none), a small emulated run (HBM counters, no allocators) and a
recorded run whose host counters are in bytes and in a ratio, each analysed as `scprof ingest`
stores it."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from analyzers import materialize
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from scprof.cli import main
from tests.tracekit import record_small
from tests.xplane.helpers import DATA, JAX_SMALL

TF2 = os.path.join(DATA, "wild", "tf2_gpu_multi_worker")


def build_alloc_store(d: Path) -> str:
    """The store's path; runs named tf2, cpu, emulated and mixed_units."""
    db = str(d / "alloc.duckdb")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", TF2, "--db", db, "--name", "tf2"]) == 0
        assert main(["ingest", JAX_SMALL, "--db", db, "--name", "cpu"]) == 0
    with Store.open(db) as store:
        materialize.build(store, ingest_trace(store, str(record_small(d / "e.sctrace", run_name="emulated"))).run_id)
        materialize.build(store, ingest_trace(store, str(record_mixed_units(d / "m.sctrace"))).run_id)
    return db


def record_mixed_units(path: Path) -> Path:
    """A run whose host records a counter in bytes (up to 3 MiB) and one in a ratio (up to 0.5)."""
    with Recorder(str(path), run_name="mixed_units", run_id="uuid-mixed-units") as rec:
        tc = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", chip=0, core=0)
        held = rec.track("/host:CPU", "pool bytes", "counter", chip=-1, unit="bytes")
        ratio = rec.track("/host:CPU", "pool fragmentation", "counter", chip=-1, unit="ratio")
        rec.emit(track=[tc], name=["fusion.1"], start_ps=[0], dur_ps=[1_000_000], step=[0])
        rec.counters(track=[held, held], ts_ps=[0, 500_000], value=[1024.0, 3 * 2**20])
        rec.counters(track=[ratio, ratio], ts_ps=[0, 500_000], value=[0.25, 0.5])
    return path

"""A store for the Ops page: an emulated run of two steps (FLOPs, bytes and the chip's peaks), the TPU v6e
inference capture (FLOPs, bytes and peaks from its XSpace) and the TF2 GPU capture (no FLOPs),
each analysed as `scprof ingest` stores it."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from analyzers import materialize
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from scprof.cli import main
from tests.tracekit import REPO
from tests.xplane.test_wild_captures import ingest_path


def build_ops_store(d: Path) -> str:
    """The store's path; runs named emulated, tpu_v6e and tf2."""
    db = str(d / "ops.duckdb")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", ingest_path("tpu_v6e_inference"), "--db", db, "--name", "tpu_v6e"]) == 0
        assert main(["ingest", ingest_path("tf2_gpu_multi_worker"), "--db", db, "--name", "tf2"]) == 0
    from sim_backend.recording.record import record_run

    emulated = record_run(
        str(REPO / "configs" / "baseline.toml"), [], "emulated", 2, str(d / "emulated"), progress=False
    )
    with Store.open(db) as store:
        materialize.build(store, ingest_trace(store, emulated.trace_path, name="emulated").run_id)
    return db


def run_id(store: Store, name: str) -> int:
    return store.rows("SELECT run_id FROM runs WHERE name = ?", [name])[0]["run_id"]

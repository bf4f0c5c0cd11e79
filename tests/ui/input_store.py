"""A store for the Input page: the committed JAX CPU captures host_bound (the device awaits its input)
and prefetched (a thread pool prepares it ahead), and an emulated baseline run of a few steps (the
TensorCores' host wait), each analysed as `scprof ingest` / `scprof record` store them."""

from __future__ import annotations

import contextlib
import io
import os

from profiler.store import Store
from scprof.cli import main
from tests.tracekit import REPO

STEPS = 4
CAPTURES = os.path.join(REPO, "tests", "data", "input_pipeline")
RUNS = ("host_bound", "prefetched", "emulated")


def build_input_store(directory) -> str:
    """The store's path; runs named as RUNS."""
    db = str(directory / "input.duckdb")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name in ("host_bound", "prefetched"):
            assert main(["ingest", os.path.join(CAPTURES, name), "--name", name, "--db", db]) == 0, name
        argv = ["record", str(REPO / "configs" / "baseline.toml"), "--steps", str(STEPS), "--name", "emulated"]
        assert main([*argv, "--out", str(directory / "emulated"), "--db", db]) == 0
    return db


def run_id(store: Store, name: str) -> int:
    return store.rows("SELECT run_id FROM runs WHERE name = ?", [name])[0]["run_id"]

"""A store for the Overview and Memory tests: an emulated ok run (baseline), a host-bound run
(configs/host_bound.toml), a failed compile (configs/spmem_overflow.toml: stored as failed,
without steps) and a real XProf capture (tests/data/input_pipeline/host_bound, a JAX CPU run)."""

from __future__ import annotations

import contextlib
import io
import os

from scprof.cli import main
from tests.tracekit import REPO

STEPS = 5
REAL_CAPTURE = os.path.join(REPO, "tests", "data", "input_pipeline", "host_bound", "plugins", "profile", "run1")
RUNS = ("baseline", "host_bound", "spmem_overflow", "real_host_bound")


def build_overview_store(directory) -> str:
    db = str(directory / "overview.duckdb")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name in ("baseline", "host_bound", "spmem_overflow"):
            argv = ["record", str(REPO / "configs" / f"{name}.toml"), "--steps", str(STEPS)]
            code = main([*argv, "--name", name, "--out", str(directory / name), "--db", db])
            assert code == (2 if name == "spmem_overflow" else 0), name  # the overflow fails, stored as failed
        assert main(["ingest", REAL_CAPTURE, "--name", "real_host_bound", "--db", db]) == 0
    return db

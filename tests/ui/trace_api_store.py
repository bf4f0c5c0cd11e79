"""A store for the trace viewer API's tests (tests/ui/test_trace_api.py): an emulated run
(baseline, 3 steps), a failed compile (configs/spmem_overflow.toml: one instant event), a real
XProf capture (tests/data/jax_cpu_small.xplane.pb), a synthetic run large enough for aggregated
tiles, and a hand-made run without steps whose names hold LIKE wildcards and quotes."""

from __future__ import annotations

import contextlib
import io
import os

from profiler.recorder import Recorder
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_trace
from scprof.cli import main
from tests.tracekit import REPO, record_into

RUNS = ("baseline", "spmem_overflow", "jax_cpu", "synthetic", "handmade")

# The hand-made run: (track, name, start_ps, dur_ps) on two host tracks, no steps.
HANDMADE = (
    ("main", "a%b", 0, 100),
    ("main", "a_b", 100, 50),
    ("main", "axb", 200, 300),
    ("main", 'it\'s "q"', 600, 0),
    ("main", "A%B", 1000, 1000),
    ("other", "a%b", 50, 500),
    ("other", "zzz", 2000, 10),
)


def record_handmade(path: str) -> None:
    with Recorder(path, run_name="handmade", start_time_unix_ns=0) as rec:
        tracks = {line: rec.track("/host:CPU", line, "host", core=n) for n, line in enumerate(("main", "other"))}
        rec.emit(
            track=[tracks[r[0]] for r in HANDMADE],
            name=[r[1] for r in HANDMADE],
            start_ps=[r[2] for r in HANDMADE],
            dur_ps=[r[3] for r in HANDMADE],
        )


def build_trace_api_store(directory) -> str:
    db = str(directory / "trace-api.duckdb")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        with Store.open(db) as store:
            for name in ("baseline", "spmem_overflow"):
                record_into(store, str(REPO / "configs" / f"{name}.toml"), name, 3, str(directory / name))
        capture = os.path.join(REPO, "tests", "data", "jax_cpu_small.xplane.pb")
        assert main(["ingest", capture, "--name", "jax_cpu", "--db", db]) == 0
        with Store.open(db) as store:
            path = str(directory / "synthetic.sctrace")
            write_synthetic_trace(path, 24_000, chips=1, scs=2, seed=3, run_name="synthetic")
            ingest_trace(store, path, name="synthetic")
            path = str(directory / "handmade.sctrace")
            record_handmade(path)
            ingest_trace(store, path, name="handmade")
    return db

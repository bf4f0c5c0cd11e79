"""A store holding a run of every kind the UI must show, each named by its kind: an emulated ok
run, a failed compile, a limits-too-low run, a GPU-like and a CPU XProf capture, a capture
without steps, a PyTorch CPU DataLoader-bound Chrome trace, then every capture of the corpus
of real captures (tests/data/wild, named `wild_<capture>`: XSpace captures and Kineto GPU
traces); with SCPROF_SWEEP_EVENTS=N (e.g. 10000000) also a synthetic run of N events named
`big` (`make test` sets 10 M: about 11 s to build, 2 min for the sweep's pages; pytest run directly
leaves it out). Shared by the browser sweep (test_browser_sweep.py) and the
routing tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tracekit import REPO, record_into

STEPS = 3
KINDS = ("emulated_ok", "failed", "limits_too_low", "gpu_capture", "cpu_capture", "no_steps", "torch_cpu")
TORCH_CPU = REPO / "tests" / "data" / "torch_dataloader" / "dataloader_bound.pt.trace.json.gz"
CPU_CAPTURE = REPO / "tests" / "data" / "jax_cpu_train" / "plugins" / "profile" / "run1"


def capture_without_steps(path: Path) -> None:
    """A host-only XProf capture with events but no step markers: a run without steps."""
    from profiler.xspace import xplane_pb2 as xp
    from tests.xplane.synth import PlaneBuilder

    space = xp.XSpace(hostnames=["nosteps"])
    host = PlaneBuilder(space, 1, "/host:CPU")
    line = host.line(1, "python")
    for i in range(5):
        host.event(line, "work", i * 1_000_000, 500_000)
    path.write_bytes(space.SerializeToString())


def build_sweep_store(d: Path) -> str:
    """The store at d/sweep.duckdb (the emulator records three runs, the failed one stored as failed)."""
    from profiler.store import Store
    from profiler.trace_to_store import ingest_trace
    from tests.xplane.test_real_captures import gpu_space

    db = str(d / "sweep.duckdb")
    with Store.open(db) as store:
        for name, config in (
            ("emulated_ok", "baseline"),
            ("failed", "spmem_overflow"),
            ("limits_too_low", "limits_too_low"),
        ):
            record_into(store, str(REPO / "configs" / f"{config}.toml"), name, STEPS, str(d / name))
        (d / "gpu.xplane.pb").write_bytes(gpu_space().SerializeToString())
        ingest_trace(store, str(d / "gpu.xplane.pb"), name="gpu_capture")
        ingest_trace(store, str(CPU_CAPTURE), name="cpu_capture")
        capture_without_steps(d / "nosteps.xplane.pb")
        ingest_trace(store, str(d / "nosteps.xplane.pb"), name="no_steps")
        ingest_trace(store, str(TORCH_CPU), name="torch_cpu")
        from tests.xplane.test_wild_captures import CAPTURES, ingest_path

        for capture in CAPTURES:
            ingest_trace(store, ingest_path(capture), name=f"wild_{capture}")
        big = int(os.environ.get("SCPROF_SWEEP_EVENTS") or 0)
        if big:
            from profiler.synthetic import write_synthetic_trace

            write_synthetic_trace(str(d / "big.sctrace"), big, run_name="big")
            ingest_trace(store, str(d / "big.sctrace"), name="big")
        kinds = {
            r["name"]: (r["status"], r["steps"])
            for r in store.rows(
                "SELECT name, status, (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id) AS steps FROM runs r ORDER BY run_id"
            )
        }
    # the store holds the kinds the sweep means to cover
    assert tuple(kinds)[: len(KINDS)] == KINDS and kinds["failed"][0] == "failed" and kinds["no_steps"] == ("ok", 0)
    assert all(
        n > 0 for name, (_, n) in kinds.items() if name not in ("failed", "no_steps") and not name.startswith("wild_")
    )
    return db


@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory) -> str:
    return build_sweep_store(tmp_path_factory.mktemp("sweep-store"))

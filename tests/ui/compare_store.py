"""A mixed store for the Compare and Runs pages' tests: the UI store's baseline and tuned, the
baseline with prefetching on (its minibatching finding persists), a failed run (spmem_overflow.toml
does not compile) and two real captures (a CPU capture; a host-bound input pipeline)."""

from __future__ import annotations

import shutil

from tests.tracekit import REPO

DATA = REPO / "tests" / "data"


def build_mixed_store(ui_db: str, directory) -> str:
    from scprof.cli import main

    db = str(directory / "mixed.duckdb")
    shutil.copyfile(ui_db, db)
    base = ["--db", db, "--steps", "5"]
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "baseline.toml"),
                "--set",
                "flags.maximum_parallel_iterations=2",
                "--name",
                "prefetch2",
                "--out",
                str(directory / "p2"),
                *base,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "spmem_overflow.toml"),
                "--name",
                "spmem",
                "--db",
                db,
                "--out",
                str(directory / "f"),
            ]
        )
        == 2
    )  # stored as a failed run
    assert main(["ingest", str(DATA / "jax_cpu_small.xplane.pb"), "--name", "jax_cpu", "--db", db]) == 0
    assert main(["ingest", str(DATA / "input_pipeline" / "host_bound"), "--name", "host_bound", "--db", db]) == 0
    return db

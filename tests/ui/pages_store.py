"""A store for the tests of the UI's pages: a skewed run (26 tables, one rule's findings repeated),
an HBM-pressure run (a timestamp in the evidence), a failed compile and a run with a tuning-like
long reason; recorded by the emulator, a few steps each."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from profiler.store import Store
from scprof.cli import main
from tests.tracekit import REPO, record_into

STEPS = 5
RUNS = {"skewed": "skewed_ids", "hbm": "hbm_pressure", "failed": "spmem_overflow"}


def build_pages_store(directory) -> str:
    """The runs of RUNS recorded into one store (the failed compile stored as a failed run)."""
    db = str(directory / "pages.duckdb")
    with Store.open(db) as store:
        for name, config in RUNS.items():
            record_into(store, str(REPO / "configs" / f"{config}.toml"), name, STEPS, str(directory / name))
    return db


def run_id(store: Store, name: str) -> int:
    return store.rows("SELECT run_id FROM runs WHERE name = ?", [name])[0]["run_id"]


def analyze_json(db: str, run: str) -> dict:
    """`scprof analyze RUN --json`'s document: the reference the UI must agree with."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["analyze", run, "--json", "--db", db]) == 0
    return json.loads(out.getvalue())


# what a trial that fails to compile says (the emulator's SPMEM error, as `scprof tune` stores it)
LONG_REASON = (
    "the simulation failed: Fixed size allocations (150512 bytes) do not fit in TileSpmem (131072 bytes): "
    "table group 't20' is compiled with max_ids_per_partition=200000 and max_unique_ids_per_partition=50000, "
    "buffered over 16 tiles per SparseCore; lower the limits (limits file or sparsecore.max_ids_per_partition "
    "/ max_unique_ids_per_partition)"
)


def with_long_reason(whatif_db: str, path) -> str:
    """A copy of the what-if store whose failed tuning trial gives LONG_REASON as its reason."""
    import shutil

    import duckdb

    shutil.copyfile(whatif_db, path)
    con = duckdb.connect(str(path))
    try:
        con.execute("UPDATE whatif_trials SET reason = ? WHERE purpose = 'tune' AND verdict = 'failed'", [LONG_REASON])
    finally:
        con.close()
    return str(path)

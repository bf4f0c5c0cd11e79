"""Analyzer benchmark: the full analyzer suite (`scprof analyze`) on a large run.

Writes a synthetic run (profiler.synthetic: 4 chips x 4 SparseCores, 26 tables,
SparseCore and TensorCore ops, counters, step markers) of --events events, ingests
it into a temporary store, then times `analyze_run` over every analyzer in the
registry, and each analyzer alone; then storing that report as the store's analysis
tables (`materialize.keep`, what `record` and `ingest` add after the analyzers) and
reading it back (`runstats.stored_report`, what `analyze`, Compare and the UI pay).
Last line: JSON.

Usage: python benchmarks/analyzer_suite.py [--events 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from analyzers import materialize, runstats
from analyzers.context import RunContext
from analyzers.registry import ANALYZERS, analyze_run
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, db = os.path.join(tmp, "run.sctrace"), os.path.join(tmp, "store.duckdb")
        n = write_synthetic_trace(trace, args.events)
        with Store.open(db) as store:
            ingest_trace(store, trace)
        print(f"{n:,} events ingested", file=sys.stderr)
        with Store.open(db, read_only=True) as store:
            t = time.perf_counter()
            report = analyze_run(store, 1)
            suite_s = time.perf_counter() - t
            each = {}
            for module in ANALYZERS:
                t = time.perf_counter()
                module.analyze(RunContext(store, 1))  # a fresh context: shared tables rebuilt
                each[module.NAME] = round(time.perf_counter() - t, 3)
        with Store.open(db) as store:
            t = time.perf_counter()
            stored = materialize.keep(store, report)
            store_s = time.perf_counter() - t
        with Store.open(db, read_only=True) as store:
            t = time.perf_counter()
            read_back = runstats.stored_report(store, 1)
            read_s = time.perf_counter() - t
    print(
        json.dumps(
            {
                "benchmark": "analyzers",
                "events": n,
                "suite_s": round(suite_s, 3),
                "findings": len(report.findings),
                "per_analyzer_s": each,
                "store_s": round(store_s, 3) if stored else None,
                "read_s": round(read_s, 3) if read_back is not None else None,
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()

"""`make demo`: record a run, ingest it, and show what the store holds.

Until the emulator lands, the recorded run is the synthetic SparseCore/TensorCore
trace of profiler.synthetic, written through the Recorder like any producer.
"""

from __future__ import annotations

import argparse
import os
import sys

from profiler.store import default_path
from profiler.synthetic import write_synthetic_trace
from scprof.cli import main as scprof

SAMPLE_QUERY = """SELECT plane, name, count(*) AS events, round(sum(dur_ps) / 1e9, 2) AS busy_ms
FROM slices WHERE run_id = (SELECT max(run_id) FROM runs)
GROUP BY ALL ORDER BY busy_ms DESC LIMIT 8"""


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scprof-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--no-ui", action="store_true", help="stop after printing")
    ap.add_argument("--db", default=None)
    args = ap.parse_args(argv)
    db = args.db or default_path()
    os.makedirs("runs/demo", exist_ok=True)
    trace = "runs/demo/synthetic.sctrace"
    n = write_synthetic_trace(trace, 200_000, run_name="demo-synthetic")
    print(f"$ recorded {n:,} events to {trace}")
    steps = [
        ["ingest", trace, "--replace", "--db", db],
        ["runs", "--db", db],
        ["sql", SAMPLE_QUERY, "--db", db],
    ]
    for cmd in steps:
        shown = " ".join(a if " " not in a else "'...'" for a in cmd)
        print(f"\n$ scprof {shown}")
        if cmd[0] == "sql":
            print(SAMPLE_QUERY)
        sys.stdout.flush()
        code = scprof(cmd)
        if code:
            return code
    if not args.no_ui:
        print("\n(the web UI is not built yet; `make demo` will serve it once it is)")
    return 0


if __name__ == "__main__":
    sys.exit(run())

"""`make demo`: record the bundled baseline and tuned runs, say what is wrong with the
baseline (each fix proven by simulation) and what the tuning gained (and which change gained
what), then serve the UI where a person sees why.

Every step is an ordinary `scprof` command, printed before it runs, so the demo
doubles as a tour of the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profiler import sqltree
from profiler.store import default_path
from scprof.cli import main as scprof

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# SparseCore time per step of each op, summed over all SparseCores: the kind of question `scprof sql` answers
# (profiler/sql/cli/demo.sql; the demo passes its text to `scprof sql`, as a user would).
SAMPLE_QUERY = sqltree.get("cli.demo.sparsecore_time_per_op").sql


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scprof-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--no-ui", action="store_true", help="stop after printing")
    ap.add_argument("--db", default=None, help="store path (default: $SCPROF_DB or ./scprof.duckdb)")
    ap.add_argument("--port", default="8050")
    args = ap.parse_args(argv)
    db = args.db or default_path()
    steps = [
        ["record", str(CONFIGS / "baseline.toml"), "--replace"],
        ["record", str(CONFIGS / "tuned.toml"), "--replace"],
        ["runs"],
        ["analyze", "baseline", "--verify"],
        ["compare", "baseline", "tuned", "--attribute"],
        ["sql", SAMPLE_QUERY],
    ]
    if not args.no_ui:
        steps.append(["ui", "--port", args.port])
    for cmd in steps:
        shown = " ".join(f'"{a}"' if " " in a else a for a in cmd)
        print(f"\n$ scprof {shown}", flush=True)
        code = scprof([*cmd, "--db", db])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run())

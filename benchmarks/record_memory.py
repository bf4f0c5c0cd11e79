"""Recording memory does not grow with the number of steps: peak RSS of `record_run`.

Records the same config (default: the bundled baseline) with a few and with many steps,
each in a fresh subprocess, and reports each one's peak resident set size and wall time
and the ratio of the peaks (target: many / few <= 1.2; the trace streams to disk, so
only the steps in flight are held).

usage: python benchmarks/record_memory.py [--config PATH] [--steps 200 2000]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from sim_backend.recording.record import record_run
t0 = time.perf_counter()
res = record_run({config!r}, [], "bench", {steps}, {out!r})
wall = time.perf_counter() - t0
print(json.dumps({{"steps": {steps}, "wall_s": round(wall, 2), "events": res.events,
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}}))
"""


def record_in_child(config: str, steps: int) -> dict:
    """Peak RSS (MiB) and wall time of one record_run in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as out:
        code = CHILD.format(repo=REPO, config=config, steps=steps, out=out)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        figures["trace_mib"] = round(os.path.getsize(os.path.join(out, "trace.sctrace")) / 2**20, 1)
        return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "baseline.toml"))
    ap.add_argument("--steps", type=int, nargs=2, default=[200, 2000], metavar=("FEW", "MANY"))
    args = ap.parse_args()
    few, many = (record_in_child(args.config, n) for n in args.steps)
    for r in (few, many):
        print(
            f"{r['steps']:6d} steps: peak RSS {r['peak_rss_mib']:7.1f} MiB, {r['wall_s']:7.1f} s, "
            f"{r['events']:,} events, trace {r['trace_mib']} MiB"
        )
    print(
        json.dumps(
            {
                "benchmark": "record_memory",
                "config": os.path.relpath(args.config, REPO),
                "steps": [few["steps"], many["steps"]],
                "peak_rss_mib": [few["peak_rss_mib"], many["peak_rss_mib"]],
                "wall_s": [few["wall_s"], many["wall_s"]],
                "rss_ratio": round(many["peak_rss_mib"] / few["peak_rss_mib"], 3),
                "target_ratio": 1.2,
                "machine": f"{platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
            }
        )
    )


if __name__ == "__main__":
    main()

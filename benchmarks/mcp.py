"""MCP benchmark: tool-call latency of `scprof mcp`'s read tools on a 10 M-event store, through the
SDK's own client over stdio (as an agent's client calls them).

Writes two synthetic runs (profiler.synthetic, as benchmarks/analyzer_suite.py: 4 chips x 4
SparseCores, 26 tables; seeds 0 and 1) of --events events each, ingests them into a temporary
store and keeps their reports (as `scprof ingest` does), starts `scprof mcp --db` as a
subprocess, then per tool calls it once (the first call: cold caches) and --calls more times,
and reports p50 and p95 of those, in ms, measured at the client (JSON-RPC over the pipes, the
tool's work, the result's JSON). Last line: JSON.

Usage: python benchmarks/mcp.py [--events 10000000] [--calls 20] [--db STORE]
(--db: a store made by an earlier run, kept with --keep, to skip writing and ingesting)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# Run as a script, this file's folder leads sys.path, and this file is named like the SDK's package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

# name -> (tool, arguments, group): summaries target <= 200 ms p95; whole-run views <= 1 s
CALLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "list_runs": ("list_runs", {}, "summary"),
    "run_summary": ("run_summary", {"run": "synthetic"}, "summary"),
    "analyze": ("analyze", {"run": "synthetic"}, "summary"),
    "compare": ("compare", {"base": "synthetic", "cand": "synthetic_b"}, "summary"),
    "step_breakdown": ("step_breakdown", {"run": "synthetic", "limit": 100}, "summary"),
    "timeline_link": ("timeline_link", {"run": "synthetic", "steps": "2:4"}, "summary"),
    "top_ops (whole run)": ("top_ops", {"run": "synthetic"}, "whole run"),
    "top_ops (steps 2:4, chip 0)": ("top_ops", {"run": "synthetic", "steps": "2:4", "chip": 0}, "whole run"),
    "events (whole run)": ("events", {"run": "synthetic"}, "whole run"),
    "events (steps 2:3, chip 0)": ("events", {"run": "synthetic", "steps": "2:3", "chip": 0}, "whole run"),
    "find_events (whole run)": ("find_events", {"run": "synthetic", "name": "dot"}, "whole run"),
    "sql (count by name)": (
        "sql",
        {"query": "SELECT name, count(*) AS n FROM slices WHERE run_id = 1 GROUP BY 1 ORDER BY 2 DESC LIMIT 20"},
        "whole run",
    ),
}
TARGET_MS = {"summary": 200, "whole run": 1000}


def build_store(db: str, events: int, tmp: str) -> int:
    from analyzers import materialize
    from profiler.store import Store
    from profiler.synthetic import write_synthetic_trace
    from profiler.trace_to_store import ingest_trace

    n = 0
    with Store.open(db) as store:
        for seed, name in ((0, "synthetic"), (1, "synthetic_b")):
            trace = os.path.join(tmp, f"{name}.sctrace")
            n = write_synthetic_trace(trace, events, seed=seed, run_name=name)
            materialize.build(store, ingest_trace(store, trace).run_id)
            os.remove(trace)
            print(f"{name}: {n:,} events ingested", file=sys.stderr)
    return n


async def measure(db: str, calls: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "scprof.cli", "mcp", "--db", db], env=env)
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for key, (tool, args, group) in CALLS.items():
                times = []
                for _ in range(calls + 1):
                    t = time.perf_counter()
                    result = await client.call_tool(tool, args)
                    times.append((time.perf_counter() - t) * 1000)
                    if result.is_error:
                        raise SystemExit(f"{key}: {result.content[0].text}")
                rest = np.array(times[1:])
                p95 = float(np.percentile(rest, 95))
                out[key] = {
                    "first_ms": round(times[0], 1),
                    "p50_ms": round(float(np.percentile(rest, 50)), 1),
                    "p95_ms": round(p95, 1),
                    "target_ms": TARGET_MS[group],
                    "met": p95 <= TARGET_MS[group],
                    "bytes": len(result.content[0].text),
                }
                print(f"{key:32s} {out[key]}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--db", help="an existing benchmark store (skip writing and ingesting)")
    ap.add_argument("--keep", metavar="PATH", help="keep the store made at PATH")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="scprof-mcp-bench-")
    try:
        db, events = args.db, None
        if db is None:
            db = os.path.join(tmp, "store.duckdb")
            events = build_store(db, args.events, tmp)
            if args.keep:
                shutil.copyfile(db, args.keep)
        else:
            from profiler.store import Store

            with Store.open(db, read_only=True) as store:
                events = store.rows("SELECT events FROM runs WHERE name = 'synthetic'")[0]["events"]
        load = os.getloadavg()[0]
        tools = asyncio.run(measure(db, args.calls))
        load = max(load, os.getloadavg()[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": "mcp",
                "events_per_run": events,
                "calls": args.calls,
                "tools": tools,
                "all_met": all(t["met"] for t in tools.values()),
                "load_1min": round(load, 2),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()

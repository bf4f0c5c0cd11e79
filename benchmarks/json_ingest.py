"""Chrome trace JSON import benchmark: ingest a synthetic PyTorch Kineto trace; Python's json as reference.

The trace is shaped as Kineto writes one for a GPU training loop: per step a `ProfilerStep#N`
span, `cpu_op` events with Kineto's args (External id, Sequence number, Input Dims),
`cudaLaunchKernel` calls and one kernel each on a GPU stream (args: correlation, grid, block,
occupancy), metadata naming the processes and threads; epoch timestamps with three decimals.
It is written gzip'd (`.pt.trace.json.gz`), as users meet it.

Figures (last line, JSON):
- import_events_per_s, import_mb_per_s (of JSON text): `scprof ingest FILE.json.gz`'s path,
  file -> committed store tables (scan, DuckDB's reader, the mapping, the insert), in this process;
- json_load_events_per_s: Python's `json.load` of the same file (gzip inflated as it goes), the
  whole object tree and nothing more: what a Python-object parser costs before any mapping;
  import_over_json_load is the ratio of the two rates;
- max_rss_mb: the process's peak resident memory after the import (before json.load runs).

Usage: python benchmarks/json_ingest.py [--events 1000000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import tempfile
import time

from profiler.store import Store
from profiler.trace_to_store import ingest_traces

OPS = (
    "aten::linear",
    "aten::addmm",
    "aten::relu",
    "aten::mm",
    "aten::add_",
    "aten::copy_",
    "aten::empty",
    "aten::view",
    "autograd::engine::evaluate_function: AddmmBackward0",
    "Optimizer.step#SGD.step",
)


def write_trace(path: str, events: int) -> int:
    """A Kineto-shaped trace of about `events` events; returns the JSON text's size in bytes."""
    t0 = 1_700_000_000_000_000.0
    head = (
        '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}],'
        ' "traceEvents": [\n'
        '{"ph": "M", "name": "process_name", "pid": 77, "tid": 0, "args": {"name": "python3"}},\n'
        '{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},\n'
        '{"ph": "M", "name": "thread_name", "pid": 77, "tid": 77, "args": {"name": "thread 77 (python3)"}},\n'
        '{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}}'
    )
    size = 0
    per_step = 999  # 333 (op, launch, kernel) triples and a step span
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write(head)
        size += len(head)
        n, step, t = 0, 0, t0
        while n < events:
            parts = [
                f',\n{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 77, '
                f'"tid": 77, "ts": {t:.3f}, "dur": {per_step * 10.0:.3f}, "args": {{"External id": {n}}}}}'
            ]
            for k in range(per_step // 3):
                ts = t + k * 30
                parts.append(
                    f',\n{{"ph": "X", "cat": "cpu_op", "name": "{OPS[k % len(OPS)]}", "pid": 77, "tid": 77, '
                    f'"ts": {ts + 0.123:.3f}, "dur": 12.500, "args": {{"External id": {n + k}, "Sequence number": {k}, '
                    f'"Input Dims": [[64, 1024], [1024]], "Input type": ["float", "float"]}}}}'
                    f',\n{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77, "tid": 77, '
                    f'"ts": {ts + 13:.3f}, "dur": 4.250, "args": {{"cbid": 211, "correlation": {n + k}}}}}'
                    f',\n{{"ph": "X", "cat": "kernel", "name": "sm90_gemm_{k % 7}", "pid": 0, "tid": 7, '
                    f'"ts": {ts + 18.5:.3f}, "dur": 9.750, "args": {{"queued": 0, "device": 0, "stream": 7, '
                    f'"correlation": {n + k}, "registers per thread": 168, "grid": [132, 1, 1], "block": [384, 1, 1], '
                    f'"est. achieved occupancy %": 12}}}}'
                )
            text = "".join(parts)
            f.write(text)
            size += len(text)
            n += 1 + 3 * (per_step // 3)
            step += 1
            t += per_step * 10.0 + 5
        f.write("\n]}\n")
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="scprof-json-bench-") as tmp:
        path = os.path.join(tmp, "bench.pt.trace.json.gz")
        text_bytes = write_trace(path, args.events)
        with Store.open(os.path.join(tmp, "s.duckdb")) as st:
            t = time.perf_counter()
            (r,) = ingest_traces(st, [path])
            import_s = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = time.perf_counter()
        with gzip.open(path, "rb") as f:
            n_loaded = len(json.load(f)["traceEvents"])
        load_s = time.perf_counter() - t
        out = {
            "benchmark": "json_ingest",
            "events": r.events,
            "json_events": n_loaded,
            "text_bytes": text_bytes,
            "gz_bytes": os.path.getsize(path),
            "import_s": round(import_s, 2),
            "import_events_per_s": round(r.events / import_s),
            "import_mb_per_s": round(text_bytes / import_s / 1e6, 1),
            "json_load_s": round(load_s, 2),
            "json_load_events_per_s": round(n_loaded / load_s),
            "import_over_json_load": round((r.events / import_s) / (n_loaded / load_s), 2),
            "max_rss_mb": round(rss_mb),
            "cpus": os.cpu_count(),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""Recorder overhead of `span()` around an empty block, per span (target <= 2 us).

Measured as (time of N spans incl. flushing to the file) - (time of the same loop
without spans), divided by N, in one process. Last line: JSON.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from profiler.recorder import Recorder

N = 1_000_000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spans.sctrace")
        t = time.perf_counter()
        for _ in range(N):
            pass
        bare = time.perf_counter() - t
        with Recorder(path, run_name="spans") as rec:
            track = rec.track("/host:CPU", "python", kind="host")
            t = time.perf_counter()
            for i in range(N):
                with rec.span("preprocess", track, step=i):
                    pass
            rec.flush()
            spanned = time.perf_counter() - t
        with Recorder(path, run_name="spans-args") as rec:
            track = rec.track("/host:CPU", "python", kind="host")
            t = time.perf_counter()
            for i in range(N):
                with rec.span("preprocess", track, step=i, table="t1", ids=i):
                    pass
            rec.flush()
            spanned_args = time.perf_counter() - t
    print(
        json.dumps(
            {
                "benchmark": "span",
                "spans": N,
                "ns_per_span": round((spanned - bare) / N * 1e9),
                "ns_per_span_with_args": round((spanned_args - bare) / N * 1e9),
            }
        )
    )


if __name__ == "__main__":
    main()

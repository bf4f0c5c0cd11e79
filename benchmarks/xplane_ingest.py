"""XProf import benchmark: ingest a synthetic TPU-like XSpace file; XProf's own converter as reference.

The file is made the way users would meet one: a synthetic scprof run (profiler/synthetic.py:
SparseCore ops with table/ids/bytes stats, TensorCore ops with flops, steps, HBM counters)
exported with `scprof export xspace`, so events carry group_id and other stats and event
metadata carries hlo_category/flops/bytes_accessed.

Figures (last line, JSON):
- import_events_per_s: file -> committed DuckDB tables (`scprof ingest FILE.xplane.pb`'s path),
  file in page cache, in this process;
- decode_events_per_s: file -> columns only, as `scprof ingest` decodes (the native decoder,
  profiler/xspace/_events.c, one thread), no store; decode_python_events_per_s: its fallback,
  the Python (numpy) decoder (profiler/xspace/decode_python.py) alone; both measured in the same
  run, alternating (best of --reps); decode_speedup = decode / decode_python (the native
  decoder's gain);
- xprof_create_events_db_s: `xprof create_events_db` on the same file (XProf's converter to its
  Events DB Parquet file), run as a subprocess (its protobuf classes would clash with ours in
  one process); xprof_startup_s is the same CLI doing nothing, subtracted for
  xprof_events_per_s; import_over_xprof is the ratio of the two rates.

Usage: python benchmarks/xplane_ingest.py [--events 2000000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from exporters.xspace import export_run
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_traces
from profiler.xspace.decode import decode_files


def _xprof() -> str | None:
    exe = shutil.which("xprof") or os.path.join(os.path.dirname(sys.executable), "xprof")
    return exe if os.path.exists(exe) else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=2, help="decode repetitions (best of), alternating the decoders")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "synthetic.sctrace")
        write_synthetic_trace(trace, args.events)
        run_dir = os.path.join(tmp, "logdir", "plugins", "profile", "bench")
        os.makedirs(run_dir)
        xplane = os.path.join(run_dir, "bench.xplane.pb")
        with Store.open(os.path.join(tmp, "src.duckdb")) as st:
            (r,) = ingest_traces(st, [trace])
            t = time.perf_counter()
            export_run(st, r.run_id, xplane, None, False)
            export_s = time.perf_counter() - t
        size = os.path.getsize(xplane)
        print(f"exported {r.events:,} events, {size / 1e6:.0f} MB in {export_s:.1f} s", file=sys.stderr)

        best = {"native": float("inf"), "python": float("inf")}
        for _ in range(args.reps):
            for kind in best:
                t = time.perf_counter()
                d = decode_files([xplane], native=kind == "native")
                best[kind] = min(best[kind], time.perf_counter() - t)
                n_dec = len(d.events["start_ps"])
                del d
        decode_s = best["native"]

        t = time.perf_counter()
        with Store.open(os.path.join(tmp, "dst.duckdb")) as st:
            (got,) = ingest_traces(st, [xplane])
            st.query("SELECT count(*) FROM events")
        import_s = time.perf_counter() - t
        assert got.events == r.events, (got.events, r.events)
        print(f"import {import_s:.2f} s, decode {decode_s:.2f} s ({best})", file=sys.stderr)

        result = {
            "benchmark": "xplane_ingest",
            "events": got.events,
            "file_bytes": size,
            "file_bytes_per_event": round(size / got.events, 1),
            "export_events_per_s": round(got.events / export_s),
            "decode_events_per_s": round(n_dec / decode_s),
            "decode_threads": 1,
            "decode_python_events_per_s": round(n_dec / best["python"]),
            "decode_speedup": round(best["python"] / decode_s, 2),
            "import_events_per_s": round(got.events / import_s),
        }
        exe = _xprof()
        if exe:
            t = time.perf_counter()
            subprocess.run([exe, "list_hlo_modules", "--help"], capture_output=True, check=False)
            startup = time.perf_counter() - t
            t = time.perf_counter()
            out = subprocess.run(
                [exe, "create_events_db", f"--session_id={xplane}", "--bypass_cache=True"],
                capture_output=True,
                text=True,
            )
            xprof_s = time.perf_counter() - t
            ok = out.returncode == 0
            print(f"xprof create_events_db: rc={out.returncode} {xprof_s:.2f} s", file=sys.stderr)
            if not ok:
                print(out.stderr[-2000:], file=sys.stderr)
            rate = got.events / max(xprof_s - startup, 1e-9)
            result.update(
                {
                    "xprof_create_events_db_s": round(xprof_s, 2),
                    "xprof_startup_s": round(startup, 2),
                    "xprof_ok": ok,
                    "xprof_events_per_s": round(rate) if ok else None,
                    "import_over_xprof": round(result["import_events_per_s"] / rate, 2) if ok else None,
                }
            )
        else:
            result["xprof"] = "not installed (test extra)"
        result["cpus"] = os.cpu_count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()

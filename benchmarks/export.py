"""Perfetto export benchmark: rate, bytes per event against a naive encoding, peak memory.

Figures (last line, JSON):
- export_events_per_s: `scprof export perfetto` on a synthetic run (store -> .pftrace
  file: DuckDB queries, step breakdown, lanes, flows, wire encoding, writing), in a
  child process whose peak RSS (VmHWM of its own address space: `ru_maxrss` would
  include the parent's peak, which exec carries over) is export_peak_rss_bytes;
  export_events_per_s_no_breakdown: the same without the "Step breakdown" tracks;
- bytes_per_event: the file size over the run's events (step markers, counters and
  track descriptors included);
- naive_bytes_per_event / interned_bytes_per_event and their ratio: the same steps
  (--naive-steps) exported by scprof and encoded naively with the official classes
  (no interning, no packet defaults, event/category/annotation names as strings,
  every event naming its track by a random 64-bit uuid), in this process.

Usage: python benchmarks/export.py [--events 10000000] [--naive-steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.perfetto import TYPED_ARGS, write_trace
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_trace

LOADS: list[float] = []  # 1-minute load average before and after each export (the machine is shared)

CHILD_EXPORT = """
import sys, time
from profiler.store import Store
from exporters.perfetto import write_trace
with Store.open(sys.argv[1], read_only=True) as store:
    t = time.perf_counter()
    st = write_trace(store, 1, sys.argv[2], breakdown=sys.argv[3] == "1")
    dt = time.perf_counter() - t
hwm = next(int(x.split()[1]) * 1024 for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(st.events, dt, hwm, st.bytes)
"""


def child_export(db: str, out: str, breakdown: bool) -> tuple[int, float, int, int]:
    """(events, seconds, peak RSS bytes, file bytes) of an export in a fresh process."""
    LOADS.append(round(os.getloadavg()[0], 2))
    res = subprocess.run(
        [sys.executable, "-c", CHILD_EXPORT, db, out, "1" if breakdown else "0"],
        check=True,
        capture_output=True,
        text=True,
    )
    events, secs, rss, size = res.stdout.split()[-4:]
    LOADS.append(round(os.getloadavg()[0], 2))
    os.remove(out)
    return int(events), float(secs), int(rss), int(size)


def naive_bytes(store: Store, steps: tuple[int, int]) -> tuple[int, int]:
    """Bytes of the steps' events encoded naively (one BEGIN and one END packet each); (bytes, events)."""
    rows = store.rows(
        """SELECT * FROM slices WHERE run_id = 1 AND step >= ? AND step < ?
                         ORDER BY start_ps, event_id""",
        list(steps),
    )
    rng = random.Random(0)
    uuids: dict[int, int] = {}
    trace = pt.Trace()
    for d in store.rows("SELECT track_id, plane, line FROM tracks WHERE run_id = 1"):
        uuids[d["track_id"]] = u = rng.getrandbits(63)
        trace.packet.add(
            timestamp=0,
            trusted_packet_sequence_id=1,
            track_descriptor=pt.TrackDescriptor(uuid=u, name=f"{d['plane']} {d['line']}"),
        )
    for r in rows:
        p = trace.packet.add(timestamp=r["start_ps"] // 1000, trusted_packet_sequence_id=1)
        te = p.track_event
        te.type = te.TYPE_SLICE_BEGIN
        te.track_uuid = uuids[r["track_id"]]
        te.name = r["name"]
        te.categories.append(r["track_kind"])
        for k in TYPED_ARGS:
            v = r["table_name" if k == "table" else k]
            if v is None:
                continue
            a = te.debug_annotations.add(name=k)
            if isinstance(v, str):
                a.string_value = v
            else:
                a.int_value = v
        if r["start_ps"] % 1000 or r["dur_ps"] % 1000:
            te.debug_annotations.add(name="dur_ps", int_value=r["dur_ps"])
        e = trace.packet.add(timestamp=(r["start_ps"] + r["dur_ps"]) // 1000, trusted_packet_sequence_id=1)
        e.track_event.type = te.TYPE_SLICE_END
        e.track_event.track_uuid = uuids[r["track_id"]]
    return len(trace.SerializeToString()), len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--naive-steps", type=int, default=20)
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "synthetic.sctrace")
        db = os.path.join(tmp, "store.duckdb")
        t = time.perf_counter()
        n = write_synthetic_trace(trace, args.events)
        with Store.open(db) as store:
            ingest_trace(store, trace)
        os.remove(trace)
        print(f"synthetic run of {n:,} events stored in {time.perf_counter() - t:.0f} s", file=sys.stderr)

        out = os.path.join(tmp, "run.pftrace")
        events, export_s, rss, size = child_export(db, out, breakdown=True)
        assert events == n
        print(f"export {export_s:.1f} s, {size / 1e6:.0f} MB, peak RSS {rss / 1e6:.0f} MB", file=sys.stderr)
        _, bare_s, bare_rss, _ = child_export(db, out, breakdown=False)
        print(f"without breakdown: {bare_s:.1f} s, peak RSS {bare_rss / 1e6:.0f} MB", file=sys.stderr)

        steps = (0, args.naive_steps)
        sub = os.path.join(tmp, "sub.pftrace")
        with Store.open(db, read_only=True) as store:
            st = write_trace(store, 1, sub, steps)
            naive, naive_events = naive_bytes(store, steps)
        assert naive_events == st.events

    result = {
        "benchmark": "export_perfetto",
        "events": n,
        "export_events_per_s": round(n / export_s),
        "export_seconds": round(export_s, 2),
        "export_events_per_s_no_breakdown": round(n / bare_s),
        "bytes_per_event": round(size / n, 1),
        "export_peak_rss_bytes": int(rss),
        "sample_events": naive_events,
        "interned_bytes_per_event": round(st.bytes / st.events, 1),
        "naive_bytes_per_event": round(naive / naive_events, 1),
        "interned_over_naive": round(st.bytes / naive, 3),
        "export_peak_rss_bytes_no_breakdown": int(bare_rss),
        "cpus": os.cpu_count(),
        "load_avg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "load_avg_1m_around_exports": LOADS,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

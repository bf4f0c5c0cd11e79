"""Ingest benchmark: write, read and ingest a synthetic trace; compare with per-message decode.

Figures (last line, JSON):
- write_events_per_s: synthetic generation + Recorder encoding + file write;
- file_bytes_per_event;
- read_events_per_s: file -> validated numpy columns (TraceReader), file in page cache;
- ingest_events_per_s: file -> committed, queryable DuckDB tables (`scprof ingest`'s path),
  in a child process whose peak RSS is reported, against raw_column_bytes of the events;
- duckdb_alone_events_per_s: DuckDB inserting the same events from in-memory Arrow into
  a fresh store file (the ceiling for the ingest figure), in a child process;
- duckdb_4col_events_per_s: DuckDB inserting only the four columns no event can do
  without (track, name, start_ps, dur_ps) into a bare table: the ceiling of any
  DuckDB-native store on this machine, whatever its schema;
- per_message_decode_events_per_s: the same events encoded one protobuf message per
  event (XSpace style: XPlane > XLine > XEvent with XStat arguments) and decoded with
  the standard protobuf runtime into columns; and the ratios of read and ingest to it.

Usage: python benchmarks/ingest.py [--events 10000000] [--per-message-events 300000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profiler.reader import TraceReader
from profiler.synthetic import write_synthetic_trace
from profiler.trace_fields import TYPED_NAMES

CHILD_INGEST = """
import resource, sys, time
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
t = time.perf_counter()
with Store.open(sys.argv[1]) as store:
    n = ingest_trace(store, sys.argv[2]).events
    store.query("SELECT count(*) FROM events")  # queryable
dt = time.perf_counter() - t
print(n, dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

CHILD_DUCKDB_ALONE = """
import sys, time
import duckdb, numpy as np, pyarrow as pa
from profiler.reader import TraceReader, concat_batches
from profiler.schema import ddl
from profiler.trace_fields import TYPED_NAMES
batches = [b for b in TraceReader(sys.argv[2]).batches() if b.kind == "events"]
cols = concat_batches("events", batches)
cols["tbl"] = cols.pop("table")
n = len(cols["track"])
arrow_events = pa.table({"event_id": np.arange(n), **cols})
con = duckdb.connect(sys.argv[1])
con.execute("SET enable_progress_bar = false")
for stmt in ddl():
    con.execute(stmt)
t = time.perf_counter()
typed = ", ".join("tbl" if f == "table" else f if f in cols else "NULL" for f in TYPED_NAMES)
con.execute(f"INSERT INTO events SELECT 1, event_id, track, name, start_ps, dur_ps, {typed} FROM arrow_events")
con.close()
print(n, time.perf_counter() - t)
"""


CHILD_DUCKDB_4COL = """
import sys, time
import duckdb, numpy as np, pyarrow as pa
from profiler.reader import TraceReader, concat_batches
batches = [b for b in TraceReader(sys.argv[2]).batches() if b.kind == "events"]
cols = concat_batches("events", batches)
arrow_events = pa.table({k: cols[k] for k in ("track", "name", "start_ps", "dur_ps")})
con = duckdb.connect(sys.argv[1])
con.execute("SET enable_progress_bar = false")
con.execute("CREATE TABLE events (track INTEGER, name INTEGER, start_ps BIGINT, dur_ps BIGINT)")
t = time.perf_counter()
con.execute("INSERT INTO events SELECT * FROM arrow_events")
con.close()
print(len(arrow_events), time.perf_counter() - t)
"""


def run_child(code: str, *args: str) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return [float(x) for x in out.stdout.split()]


def xspace_like_classes():
    """Message classes shaped like XProf's XPlane/XLine/XEvent/XStat (built at run time)."""
    f = descriptor_pb2.FileDescriptorProto(name="bench_xspace.proto", package="bench", syntax="proto3")
    LABEL_REP = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name, fields):
        m = f.message_type.add(name=name)
        for num, (fname, ftype, label, tname) in enumerate(fields, 1):
            fd = m.field.add(name=fname, number=num, type=ftype)
            if label:
                fd.label = label
            if tname:
                fd.type_name = tname

    msg("XStat", [("metadata_id", T.TYPE_INT64, 0, None), ("int64_value", T.TYPE_INT64, 0, None)])
    msg(
        "XEvent",
        [
            ("metadata_id", T.TYPE_INT64, 0, None),
            ("offset_ps", T.TYPE_INT64, 0, None),
            ("duration_ps", T.TYPE_INT64, 0, None),
            ("stats", T.TYPE_MESSAGE, LABEL_REP, ".bench.XStat"),
        ],
    )
    msg(
        "XLine",
        [
            ("id", T.TYPE_INT64, 0, None),
            ("timestamp_ns", T.TYPE_INT64, 0, None),
            ("events", T.TYPE_MESSAGE, LABEL_REP, ".bench.XEvent"),
        ],
    )
    msg("XPlane", [("id", T.TYPE_INT64, 0, None), ("lines", T.TYPE_MESSAGE, LABEL_REP, ".bench.XLine")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.XPlane"))


def per_message_rate(path: str, limit: int) -> float:
    """Encode the first `limit` events one message each, decode them back into columns."""
    XPlane = xspace_like_classes()
    cols: dict[str, list[np.ndarray]] = {}
    got = 0
    for b in TraceReader(path).batches():
        if b.kind != "events" or got >= limit:
            continue
        for k, v in b.columns.items():
            cols.setdefault(k, []).append(v[: limit - got])
        got += min(b.rows, limit - got)
    ev = {k: np.concatenate(v) for k, v in cols.items()}
    plane = XPlane(id=1)
    line = plane.lines.add(id=1, timestamp_ns=0)
    args = [a for a in TYPED_NAMES if a in ev]
    for i in range(got):
        e = line.events.add(
            metadata_id=int(ev["name"][i]), offset_ps=int(ev["start_ps"][i]), duration_ps=int(ev["dur_ps"][i])
        )
        for j, a in enumerate(args):
            e.stats.add(metadata_id=j + 1, int64_value=int(ev[a][i]))
    data = plane.SerializeToString()
    t = time.perf_counter()
    parsed = XPlane.FromString(data)
    out = {k: np.empty(got, np.int64) for k in ("name", "start_ps", "dur_ps", *args)}
    for i, e in enumerate(parsed.lines[0].events):
        out["name"][i] = e.metadata_id
        out["start_ps"][i] = e.offset_ps
        out["dur_ps"][i] = e.duration_ps
        for s in e.stats:
            out[args[s.metadata_id - 1]][i] = s.int64_value
    dt = time.perf_counter() - t
    assert np.array_equal(out["start_ps"], ev["start_ps"])
    return got / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--per-message-events", type=int, default=300_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "synthetic.sctrace")
        t = time.perf_counter()
        n = write_synthetic_trace(trace, args.events)
        write_s = time.perf_counter() - t
        size = os.path.getsize(trace)
        print(f"wrote {n:,} events, {size / 1e6:.0f} MB in {write_s:.1f} s", file=sys.stderr)

        t = time.perf_counter()
        rows, raw_bytes = 0, 0
        for b in TraceReader(trace).batches():
            if b.kind == "events":
                rows += b.rows
                raw_bytes += sum(c.nbytes for c in b.columns.values())
        read_s = time.perf_counter() - t
        assert rows == n

        n_ing, ingest_s, rss = run_child(CHILD_INGEST, os.path.join(tmp, "a.duckdb"), trace)
        assert int(n_ing) == n
        print(f"ingest {ingest_s:.1f} s, peak RSS {rss / 1e6:.0f} MB", file=sys.stderr)
        _, alone_s = run_child(CHILD_DUCKDB_ALONE, os.path.join(tmp, "b.duckdb"), trace)
        _, floor_s = run_child(CHILD_DUCKDB_4COL, os.path.join(tmp, "c.duckdb"), trace)
        per_msg = per_message_rate(trace, args.per_message_events)

    result = {
        "benchmark": "ingest",
        "events": n,
        "write_events_per_s": round(n / write_s),
        "file_bytes_per_event": round(size / n, 2),
        "read_events_per_s": round(n / read_s),
        "ingest_events_per_s": round(n / ingest_s),
        "ingest_peak_rss_bytes": int(rss),
        "raw_column_bytes": raw_bytes,
        "ingest_peak_rss_over_raw": round(rss / raw_bytes, 2),
        "duckdb_alone_events_per_s": round(n / alone_s),
        "ingest_share_of_duckdb_alone": round(alone_s / ingest_s, 2),
        "duckdb_4col_events_per_s": round(n / floor_s),
        "per_message_decode_events_per_s": round(per_msg),
        "read_over_per_message": round(n / read_s / per_msg, 1),
        "ingest_over_per_message": round(n / ingest_s / per_msg, 1),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Shared helpers of the Perfetto exporter tests: build a store, compare store and export."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

from exporters.perfetto import ARGS_PREFIX, BREAKDOWN_CATEGORY, EXACT_ARGS, STEP_CATEGORY, TYPED_ARGS
from exporters.perfetto.validate import Readback, read_trace
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_fields import BY_NAME
from profiler.trace_to_store import ingest_trace


def make_store(tmp_path, record: Callable[[Recorder], None], name: str = "run") -> str:
    """Record a trace with `record(rec)`, ingest it into a fresh store; returns the store path."""
    trace = os.path.join(tmp_path, f"{name}.sctrace")
    with Recorder(trace, run_name=name, start_time_unix_ns=0) as rec:
        record(rec)
    db = os.path.join(tmp_path, f"{name}.duckdb")
    with Store.open(db) as store:
        ingest_trace(store, trace)
    return db


def ingest_file(tmp_path, trace: str, db_name: str = "store.duckdb") -> str:
    db = os.path.join(tmp_path, db_name)
    with Store.open(db) as store:
        ingest_trace(store, trace)
    return db


def expected(store: Store, run_id: int, steps: tuple[int, int] | None = None):
    """(slices, markers, counters) of a run as multisets, straight from the store."""
    ev_filter, mk_filter, ct_filter, params = "TRUE", "TRUE", "TRUE", [run_id]
    if steps is not None:
        a, b = steps
        span = store.rows(
            """SELECT min(s) AS lo, max(e) AS hi FROM (
            SELECT start_ps s, start_ps + dur_ps e FROM events WHERE run_id = ? AND step >= ? AND step < ?
            UNION ALL SELECT start_ps, start_ps + dur_ps FROM steps WHERE run_id = ? AND step >= ? AND step < ?)""",
            [run_id, a, b, run_id, a, b],
        )[0]
        ev_filter = (
            f"((step >= {a} AND step < {b}) OR (step IS NULL AND start_ps >= {span['lo']} AND start_ps < {span['hi']}))"
        )
        mk_filter = f"(step >= {a} AND step < {b})"
        ct_filter = f"(ts_ps >= {span['lo']} AND ts_ps <= {span['hi']})"
    rows = store.rows(f"SELECT * FROM slices WHERE run_id = ? AND {ev_filter}", params)
    args: dict[int, dict] = {}
    for r in store.rows("SELECT * FROM event_args WHERE run_id = ?", [run_id]):
        v = (
            r["int_value"]
            if r["int_value"] is not None
            else (r["double_value"] if r["double_value"] is not None else r["string_value"])
        )
        key = r["key"]
        if key in TYPED_ARGS or key in EXACT_ARGS:
            key = ARGS_PREFIX + key
        args.setdefault(r["event_id"], {})[key] = v
    slices = Counter()
    for r in rows:
        a = {k: r[BY_NAME[k].value_column] for k in TYPED_ARGS}
        a = {k: v for k, v in a.items() if v is not None}
        a.update(args.get(r["event_id"], {}))
        slices[(r["plane"], r["line"], r["name"], r["start_ps"], r["dur_ps"], frozenset(a.items()))] += 1
    markers = Counter(
        (r["plane"], r["line"], f"Step {r['step']}", r["start_ps"], r["dur_ps"], frozenset({("step", r["step"])}))
        for r in store.rows(
            f"""SELECT t.plane, t.line, s.step, s.start_ps, s.dur_ps FROM steps s
                                JOIN tracks t USING (run_id, track_id) WHERE run_id = ? AND {mk_filter}""",
            params,
        )
    )
    counters = Counter(
        (r["plane"], r["counter"], r["unit"], r["ts_ps"], r["value"])
        for r in store.rows(f"SELECT * FROM counter_samples WHERE run_id = ? AND {ct_filter}", params)
    )
    return slices, markers, counters


def actual(rb: Readback):
    """(slices, markers, counters) of an exported trace, mapped back to store terms.

    The "Step breakdown" slices are derived, not stored: tests/exporters/test_perfetto_breakdown.py
    checks them.
    """
    slices, markers = Counter(), Counter()
    for s in rb.slices:
        if BREAKDOWN_CATEGORY in s.categories:
            continue
        path = rb.path(s.track_uuid)
        plane, line = path[1], path[-1]
        a = dict(s.args)
        start = a.pop("start_ps", s.ts * 1000)
        dur = (s.end_ts - s.ts) * 1000 if s.end_ts is not None else 0
        dur = a.pop("dur_ps", dur)
        key = (plane, line, s.name, start, dur, frozenset(a.items()))
        (markers if STEP_CATEGORY in s.categories else slices)[key] += 1
    counters = Counter()
    units = {3: "bytes", 2: "count", 1: "ns"}
    for uuid, ts, value, a in rb.counters:
        d = rb.tracks[uuid]
        unit = units.get(d.counter.unit, d.counter.unit_name)
        path = rb.path(uuid)
        counters[(path[1], path[-1], unit, a.get("ts_ps", ts * 1000), value)] += 1
    return slices, markers, counters


def assert_round_trip(db: str, out: str, steps: tuple[int, int] | None = None, run: int = 1) -> Readback:
    rb = read_trace(out)
    assert rb.problems == []
    with Store.open(db, read_only=True) as store:
        want = expected(store, run, steps)
    got = actual(rb)
    for w, g, what in zip(want, got, ("slices", "markers", "counters"), strict=True):
        missing, extra = w - g, g - w
        assert not missing and not extra, f"{what}: missing {list(missing)[:3]}, extra {list(extra)[:3]}"
    return rb

"""Round trip: what the Recorder records is exactly what the reader, the official
protobuf classes and the store give back.

Random recordings (tracks, events with random subsets of optional columns and nulls,
unicode strings, generic int/float/str arguments, counters, steps, partition stats,
tiny chunk sizes) are compared against a plain-Python model built here, independently
of profiler/.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import scprof_trace_pb2 as pb
from profiler.reader import read_trace
from profiler.recorder import TRACK_KINDS, Recorder
from profiler.store import Store
from profiler.trace_file import MAGIC_VALUE
from profiler.trace_to_store import ingest_trace
from tests.tracekit import PROPERTY, crc_ok

I32 = st.integers(-(2**31) + 1, 2**31 - 1)  # -2^31 is the null sentinel
I64 = st.integers(-(2**63) + 1, 2**63 - 1)  # -2^63 is the null sentinel
TIME = st.integers(-(2**62), 2**62)
# Durations and the ID counts are summed by the store (per step and timeline bin), so the reader
# refuses a trace whose totals reach int64: any one value may be large, their sum may not.
SUMMED = st.integers(-(2**50), 2**50)
DUR = st.integers(0, 2**50)  # start + dur stays within int64 (the store computes end_ps)
TEXT = st.text(max_size=6)  # any unicode, incl. "" and NUL
FLOAT = st.floats(allow_nan=False)  # NaN means "no value" for generic args
SMALL = st.integers(-1, 8)

KIND_NAMES = {  # what the store calls each recorder track kind
    "host": "host",
    "tensorcore": "tensorcore",
    "sparsecore": "sparsecore",
    "sc_tile": "sc_tile",
    "counter": "counter",
}
# Optional event columns and their value strategies.
EVENT_OPTIONAL = {
    "step": I32,
    "category": TEXT,
    "table": TEXT,
    "sc": I32,
    "minibatch": I32,
    "ids": SUMMED,
    "unique_ids": SUMMED,
    "dropped_ids": SUMMED,
    "bytes": I64,
    "flops": I64,
}
PARTITION_OPTIONAL = {
    "max_ids_per_partition": I64,
    "max_unique_ids_per_partition": I64,
    "minibatches": I32,
    "dropped_ids": I64,
}
ARG_VALUES = {"int": I64, "float": FLOAT, "str": TEXT}


def nullable(strategy):
    return st.one_of(st.none(), strategy)


@st.composite
def event_op(draw, n_tracks):
    n = draw(st.integers(0, 7))
    col = lambda s: draw(st.lists(s, min_size=n, max_size=n))  # noqa: E731
    op = {
        "track": col(st.integers(0, n_tracks - 1)),
        "name": col(TEXT),
        "start_ps": col(TIME),
        "dur_ps": col(DUR),
    }
    for name in draw(st.sets(st.sampled_from(sorted(EVENT_OPTIONAL)))):
        op[name] = col(nullable(EVENT_OPTIONAL[name]))
    args = {}
    for key in draw(st.lists(TEXT, unique=True, max_size=3)):
        kind = draw(st.sampled_from(sorted(ARG_VALUES)))
        args[key] = (kind, col(nullable(ARG_VALUES[kind])))
    return ("events", op, args)


@st.composite
def rows_op(draw, kind, n_tracks):
    n = draw(st.integers(0, 5))
    col = lambda s: draw(st.lists(s, min_size=n, max_size=n))  # noqa: E731
    track = st.integers(0, n_tracks - 1)
    if kind == "counters":
        op = {"track": col(track), "ts_ps": col(TIME), "value": col(FLOAT)}
    elif kind == "steps":
        op = {
            "track": col(track),
            "step": col(st.integers(-(2**31), 2**31 - 1)),
            "start_ps": col(TIME),
            "dur_ps": col(DUR),
        }
    else:
        op = {
            "step": col(I32),
            "chip": col(SMALL),
            "sc": col(SMALL),
            "table": col(TEXT),
            "ids": col(I64),
            "unique_ids": col(I64),
        }
        for name in draw(st.sets(st.sampled_from(sorted(PARTITION_OPTIONAL)))):
            op[name] = col(nullable(PARTITION_OPTIONAL[name]))
    return (kind, op, None)


@st.composite
def recordings(draw):
    keys = draw(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=4, unique=True))
    tracks = [
        {
            "plane": p,
            "line": ln,
            "kind": draw(st.sampled_from(sorted(TRACK_KINDS))),
            "chip": draw(SMALL),
            "core": draw(SMALL),
            "tile": draw(SMALL),
            "unit": draw(TEXT),
        }
        for p, ln in keys
    ]
    n = len(tracks)
    ops = draw(
        st.lists(
            st.one_of(event_op(n), *(rows_op(k, n) for k in ("counters", "steps", "partition_stats"))),
            min_size=1,
            max_size=6,
        )
    )
    return {
        "tracks": tracks,
        "ops": ops,
        "chunk_rows": draw(st.sampled_from([1, 2, 3, 5, 65536])),
        "run_name": draw(st.text(min_size=1, max_size=8)),
    }


# -- the model: what a user expects back, in plain Python ---------------------------


def cell(op, i, column):
    """Value `i` of an optional column of a recorded op, None when the column was left out."""
    return op[column][i] if column in op else None


def expected_rows(rec_plan):
    """Rows the store should return, built from the plan alone."""
    tracks = rec_plan["tracks"]
    out = {"slices": [], "args": [], "counters": [], "steps": [], "partition_stats": []}
    for kind, op, args in rec_plan["ops"]:
        if kind == "events":
            n = len(op["name"])
            for i in range(n):
                event_id = len(out["slices"])
                t = tracks[op["track"][i]]
                get = partial(cell, op, i)
                start, dur = op["start_ps"][i], op["dur_ps"][i]
                out["slices"].append(
                    (
                        event_id,
                        t["plane"],
                        t["line"],
                        KIND_NAMES[t["kind"]],
                        t["chip"],
                        t["core"],
                        t["tile"],
                        op["name"][i],
                        start,
                        dur,
                        start + dur,
                        get("step"),
                        get("table") or None,
                        get("category") or None,  # "" and None both mean none
                        get("sc"),
                        get("minibatch"),
                        get("ids"),
                        get("unique_ids"),
                        get("dropped_ids"),
                        get("bytes"),
                        get("flops"),
                    )
                )
                for key, (arg_kind, values) in args.items():
                    v = values[i]
                    if v is not None:
                        out["args"].append(
                            (
                                event_id,
                                key,
                                v if arg_kind == "int" else None,
                                v if arg_kind == "float" else None,
                                v if arg_kind == "str" else None,
                            )
                        )
        elif kind == "counters":
            for t, ts, v in zip(op["track"], op["ts_ps"], op["value"], strict=True):
                tr = tracks[t]
                out["counters"].append((tr["plane"], tr["line"], tr["chip"], tr["unit"], ts, v))
        elif kind == "steps":
            for t, s, start, dur in zip(op["track"], op["step"], op["start_ps"], op["dur_ps"], strict=True):
                tr = tracks[t]
                out["steps"].append((tr["plane"], tr["chip"], s, start, dur, start + dur))
        else:
            for i in range(len(op["step"])):
                get = partial(cell, op, i)
                out["partition_stats"].append(
                    (
                        op["step"][i],
                        op["chip"][i],
                        op["sc"][i],
                        op["table"][i],
                        op["ids"][i],
                        op["unique_ids"][i],
                        get("max_ids_per_partition"),
                        get("max_unique_ids_per_partition"),
                        get("minibatches"),
                        get("dropped_ids"),
                    )
                )
    return out


def record(path: Path, plan) -> list[int]:
    """Record the plan with the Recorder; returns the track ids it handed out."""
    with Recorder(
        str(path), run_name=plan["run_name"], run_id="rt-run", start_time_unix_ns=42, chunk_rows=plan["chunk_rows"]
    ) as rec:
        ids = [
            rec.track(t["plane"], t["line"], t["kind"], t["chip"], t["core"], t["tile"], t["unit"])
            for t in plan["tracks"]
        ]
        for kind, op, args in plan["ops"]:
            cols = dict(op)
            if "track" in cols:
                cols["track"] = [ids[i] for i in cols["track"]]
            if kind == "events":
                rec.emit(args={k: v for k, (_, v) in args.items()} or None, **cols)
            else:
                getattr(rec, kind)(**cols)
    return ids


# -- reading back without the store --------------------------------------------------

NULLS = {np.dtype("<i4"): -(2**31), np.dtype("<i8"): -(2**63)}


def resolve(strings, tracks, kind, cols, n):
    """Rows of one kind from raw columns (lists of numbers), nulls and ids resolved."""
    by_id = {t.id: t for t in tracks}

    def opt(name, i, sentinel):
        if name not in cols:
            return None
        v = cols[name][i]
        return None if v == sentinel else v

    def text(name, i):
        sid = cols[name][i] if name in cols else 0
        return strings[sid] or None

    rows = []
    for i in range(n):
        if kind == "events":
            t = by_id[cols["track"][i]]
            start, dur = cols["start_ps"][i], cols["dur_ps"][i]
            rows.append(
                (
                    i,
                    t.plane,
                    t.line,
                    KIND_NAMES[_KIND_OF[t.kind]],
                    t.chip,
                    t.core,
                    t.tile,
                    strings[cols["name"][i]],
                    start,
                    dur,
                    start + dur,
                    opt("step", i, -(2**31)),
                    text("table", i),
                    text("category", i),
                    opt("sc", i, -(2**31)),
                    opt("minibatch", i, -(2**31)),
                    *(opt(c, i, -(2**63)) for c in ("ids", "unique_ids", "dropped_ids", "bytes", "flops")),
                )
            )
        elif kind == "counters":
            t = by_id[cols["track"][i]]
            rows.append((t.plane, t.line, t.chip, t.unit, cols["ts_ps"][i], cols["value"][i]))
        elif kind == "steps":
            t = by_id[cols["track"][i]]
            start, dur = cols["start_ps"][i], cols["dur_ps"][i]
            rows.append((t.plane, t.chip, cols["step"][i], start, dur, start + dur))
        else:
            rows.append(
                (
                    cols["step"][i],
                    cols["chip"][i],
                    cols["sc"][i],
                    strings[cols["table"][i]],
                    cols["ids"][i],
                    cols["unique_ids"][i],
                    opt("max_ids_per_partition", i, -(2**63)),
                    opt("max_unique_ids_per_partition", i, -(2**63)),
                    opt("minibatches", i, -(2**31)),
                    opt("dropped_ids", i, -(2**63)),
                )
            )
    return rows


_KIND_OF = {v: k for k, v in TRACK_KINDS.items()}


def arg_rows(strings, cols, offset=0):
    rows = []
    for i in range(len(cols.get("arg_event", []))):
        kind = cols["arg_kind"][i]
        rows.append(
            (
                int(cols["arg_event"][i]) + offset,
                strings[cols["arg_key"][i]],
                int(cols["arg_int"][i]) if kind == 1 else None,
                float(cols["arg_double"][i]) if kind == 2 else None,
                strings[cols["arg_string"][i]] if kind == 3 else None,
            )
        )
    return rows


def official_rows(data: bytes):
    """Everything in the file, parsed by the official generated classes alone."""
    f = pb.TraceFile.FromString(data)
    assert f.magic == MAGIC_VALUE
    strings, tracks, footer = [""], [], None
    out = {"slices": [], "args": [], "counters": [], "steps": [], "partition_stats": []}
    kinds = []
    for c in f.chunk:
        assert crc_ok(c), "chunk crc32 is not the CRC of its payload field"
        kind = c.WhichOneof("payload")
        kinds.append(kind)
        msg = getattr(c, kind)
        if kind == "strings":
            assert msg.first_id == len(strings)
            strings += list(msg.value)
        elif kind == "tracks":
            tracks += list(msg.track)
        elif kind == "footer":
            footer = msg
        elif kind != "header":
            cols = {fd.name: list(getattr(msg, fd.name)) for fd in msg.DESCRIPTOR.fields if len(getattr(msg, fd.name))}
            n = len(cols.get("track", cols.get("step", [])))
            key = "slices" if kind == "events" else kind
            rows = resolve(strings, tracks, kind, cols, n)
            if kind == "events":
                offset = len(out["slices"])
                rows = [(r[0] + offset, *r[1:]) for r in rows]
                out["args"] += arg_rows(strings, cols, offset)
            out[key] += rows
    return f, out, footer, kinds


def store_rows(store: Store, run_id: int):
    q = lambda sql: [tuple(r.values()) for r in store.rows(sql, [run_id])]  # noqa: E731
    return {
        "slices": q("""SELECT event_id, plane, line, track_kind, chip, core, tile, name, start_ps, dur_ps, end_ps,
                              step, table_name, category, sc, minibatch, ids, unique_ids, dropped_ids, bytes, flops
                       FROM slices WHERE run_id = ? ORDER BY event_id"""),
        "args": q("""SELECT event_id, key, int_value, double_value, string_value FROM event_args
                     WHERE run_id = ? ORDER BY event_id, key"""),
        "counters": q("SELECT plane, counter, chip, unit, ts_ps, value FROM counter_samples WHERE run_id = ?"),
        "steps": q("SELECT plane, chip, step, start_ps, dur_ps, end_ps FROM step_markers WHERE run_id = ?"),
        "partition_stats": q("""SELECT step, chip, sc, table_name, ids, unique_ids, max_ids_per_partition,
                                       max_unique_ids_per_partition, minibatches, dropped_ids
                                FROM sc_partition_stats WHERE run_id = ?"""),
    }


def assert_same(kind, got, want):
    """Ordered kinds compare as lists; counters/steps/stats (no row id) as multisets."""
    if kind == "slices":
        assert got == want
    elif kind == "args":  # (event_id, key) is unique
        assert sorted(got, key=lambda r: r[:2]) == sorted(want, key=lambda r: r[:2])
    else:
        assert Counter(got) == Counter(want), f"{kind}: got {got}, want {want}"


@settings(PROPERTY, max_examples=30)
@given(recordings())
def test_recorded_equals_read_equals_stored(plan):
    want = expected_rows(plan)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "rt.sctrace"
        record(path, plan)
        data = path.read_bytes()

        # 1. The official protobuf classes parse the whole file to the recorded values.
        f, official, footer, kinds = official_rows(data)
        assert kinds[0] == "header" and kinds[-1] == "footer"
        assert f.chunk[0].header.run_name == plan["run_name"]
        for kind in want:
            assert_same(kind, official[kind], want[kind])
        assert (footer.events, footer.counters, footer.steps, footer.partition_stats) == (
            len(want["slices"]),
            len(want["counters"]),
            len(want["steps"]),
            len(want["partition_stats"]),
        )
        assert footer.chunks == len(f.chunk) - 1
        if plan["chunk_rows"] < 65536:  # bounded chunks, even for events with arguments
            for c in f.chunk:
                kind = c.WhichOneof("payload")
                if kind in ("events", "counters", "steps", "partition_stats"):
                    msg = getattr(c, kind)
                    assert len(msg.step if kind == "partition_stats" else msg.track) <= plan["chunk_rows"]

        # 2. profiler.reader gives the same rows.
        tr = read_trace(str(path))
        assert tr.cut is None
        for kind, key in (
            ("events", "slices"),
            ("counters", "counters"),
            ("steps", "steps"),
            ("partition_stats", "partition_stats"),
        ):
            cols = {k: v.tolist() for k, v in tr.data[kind].items()}
            n = len(cols.get("track", cols.get("step", [])))
            assert_same(key, resolve(tr.strings, tr.tracks, kind, cols, n), want[key])
        assert_same("args", arg_rows(tr.strings, {k: v.tolist() for k, v in tr.data["events"].items()}), want["args"])

        # 3. The store returns exactly what was recorded.
        with Store.open(str(Path(d) / "s.duckdb")) as store:
            result = ingest_trace(store, str(path))
            assert (result.events, result.status, result.name) == (len(want["slices"]), "ok", plan["run_name"])
            got = store_rows(store, result.run_id)
            for kind in want:
                assert_same(kind, got[kind], want[kind])
            run = store.rows("SELECT * FROM runs WHERE run_id = ?", [result.run_id])[0]
        starts = [r[8] for r in want["slices"]]
        steps = {r[11] for r in want["slices"]} - {None}
        assert run["events"] == len(starts)
        assert run["first_ps"] == (min(starts) if starts else None)
        assert run["last_ps"] == (max(r[10] for r in want["slices"]) if starts else None)
        assert run["steps"] == len(steps)
        assert (run["uuid"], run["status"], run["start_time_unix_ns"]) == ("rt-run", "ok", 42)


def test_header_round_trip(small_trace, tmp_path):
    """Header facts (hardware, config, tags) reach the runs table."""
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        ingest_trace(store, str(small_trace))
        run = store.rows("""SELECT name, uuid, producer, format_version, generation, num_chips,
                                   hbm_bytes, hardware_extra::VARCHAR AS extra, config::VARCHAR AS config,
                                   tags::VARCHAR AS tags, start_time_unix_ns, source, source_path
                            FROM runs""")[0]
    assert run == {
        "name": "small",
        "uuid": "uuid-small",
        "producer": "scprof",
        "format_version": 1,
        "generation": "v5p",
        "num_chips": 2,
        "hbm_bytes": None,
        "extra": '{"vendor_note": "x"}',
        "config": '{"max_ids_per_partition": 256}',
        "tags": '{"team": "emb"}',
        "start_time_unix_ns": 1_700_000_000_000_000_000,
        "source": "scprof-trace",
        "source_path": str(small_trace),
    }


def test_small_trace_golden_rows(store_path):
    """A hand-written trace and the rows a user gets from the views (golden values)."""
    with Store.open(str(store_path), read_only=True) as store:
        slices = [
            tuple(r.values())
            for r in store.rows(
                "SELECT name, start_ps, end_ps, step, table_name, ids, flops FROM slices ORDER BY event_id"
            )
        ]
        args = [
            tuple(r.values())
            for r in store.rows(
                "SELECT event_id, key, double_value, string_value FROM event_args ORDER BY event_id, key"
            )
        ]
    assert slices == [
        ("fusion.1", 0, 1_500_000, 0, None, None, 1000),
        ("dot.2", 2_000_000, 2_900_000, 0, None, None, None),
        ("gather", 100, 4_100, 0, "table_a", 64, None),
        ("gather", 5_000, 9_000, 1, "table_b", 80, None),
    ]
    assert args == [(2, "note", None, "first"), (2, "ratio", 0.5, None), (3, "ratio", 1.25, None)]

"""The Recorder: spans on the wall clock, validated bulk emits, reproducible files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from profiler import scprof_trace_pb2 as pb
from profiler.reader import read_header, read_trace
from profiler.recorder import Recorder
from tests.tracekit import REPO, chunk_kinds


def events_of(path):
    """Events as dicts with names resolved, read back through profiler.reader."""
    tr = read_trace(str(path))
    ev = {k: v.tolist() for k, v in tr.data["events"].items()}
    rows = []
    for i in range(len(ev.get("track", []))):
        rows.append(
            {
                "name": tr.strings[ev["name"][i]],
                "track": ev["track"][i],
                "start_ps": ev["start_ps"][i],
                "dur_ps": ev["dur_ps"][i],
                "step": ev["step"][i] if "step" in ev else None,
                "ids": ev["ids"][i] if "ids" in ev else None,
            }
        )
    args = {}
    for i in range(len(ev.get("arg_event", []))):
        args[(ev["arg_event"][i], tr.strings[ev["arg_key"][i]])] = (
            ev["arg_int"][i],
            ev["arg_double"][i],
            tr.strings[ev["arg_string"][i]],
        )
    return rows, args


def test_span_records_wall_clock_events(tmp_path):
    path = tmp_path / "spans.sctrace"
    with Recorder(str(path), run_name="host") as rec:
        main = rec.track("/host:CPU", "python", "host", chip=-1)
        other = rec.track("/host:CPU", "input", "host", chip=-1)
        with rec.span("outer", main, step=7), rec.span("inner", main, step=7, ids=12, note="hi"):
            sum(range(1000))
        with rec.span("no-step", other):
            pass
    rows, args = events_of(path)
    by_name = {r["name"]: r for r in rows}
    assert sorted(by_name) == ["inner", "no-step", "outer"]
    assert by_name["outer"]["track"] == by_name["inner"]["track"] == main
    assert by_name["no-step"]["track"] == other
    assert by_name["outer"]["step"] == by_name["inner"]["step"] == 7
    assert by_name["no-step"]["step"] == -(2**31)  # the null sentinel
    assert by_name["inner"]["ids"] == 12
    for r in rows:
        assert r["dur_ps"] >= 0 and r["start_ps"] >= 0
    outer, inner = by_name["outer"], by_name["inner"]
    assert outer["start_ps"] <= inner["start_ps"]  # nesting survives on one monotonic clock
    assert inner["start_ps"] + inner["dur_ps"] <= outer["start_ps"] + outer["dur_ps"]
    inner_index = [r["name"] for r in rows].index("inner")
    assert args == {(inner_index, "note"): (0, 0.0, "hi")}


def test_spans_flush_in_chunks(tmp_path):
    path = tmp_path / "many.sctrace"
    with Recorder(str(path), run_name="host", chunk_rows=4) as rec:
        t = rec.track("/host:CPU", "python", "host")
        for i in range(10):
            with rec.span(f"s{i % 3}", t, step=i):
                pass
    rows, _ = events_of(path)
    assert sorted(r["step"] for r in rows) == list(range(10))
    assert chunk_kinds(path.read_bytes()).count("events") == 3  # 4 + 4 + 2


@pytest.mark.parametrize(
    "columns, match",
    [
        ({"track": [1], "name": ["a"], "start_ps": [0], "dur_ps": [-1]}, "dur_ps"),
        ({"track": [1, 1], "name": ["a"], "start_ps": [0, 1], "dur_ps": [1, 1]}, "differ in length"),
        ({"track": [1], "name": ["a"], "start_ps": [0], "dur_ps": [1], "step": [1, 2]}, "differ in length"),
        ({"track": [2], "name": ["a"], "start_ps": [0], "dur_ps": [1]}, "track"),
        ({"track": [0], "name": ["a"], "start_ps": [0], "dur_ps": [1]}, "track"),
        ({"track": [1], "name": ["a"], "start_ps": [0]}, "dur_ps"),
        ({"track": [1], "name": ["a"], "start_ps": [0], "dur_ps": [1], "colour": [1]}, "colour"),
        ({"track": [1], "name": ["a"], "start_ps": [0], "dur_ps": [1], "args": {"k": [1, 2]}}, "'k'"),
        ({"track": [1], "name": np.array([99]), "start_ps": [0], "dur_ps": [1]}, "string id"),
    ],
    ids=[
        "negative-dur",
        "ragged",
        "ragged-optional",
        "undeclared-track",
        "track-zero",
        "missing-column",
        "unknown-column",
        "ragged-args",
        "unknown-string-id",
    ],
)
def test_emit_rejects_bad_columns_and_keeps_the_file_valid(tmp_path, columns, match):
    path = tmp_path / "bad.sctrace"
    with Recorder(str(path), run_name="bad") as rec:
        t = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", chip=0, core=0)
        assert t == 1
        with pytest.raises(ValueError, match=match):
            rec.emit(**columns)
        rec.emit(track=[t], name=["good"], start_ps=[5], dur_ps=[6])
    rows, _ = events_of(path)
    assert [(r["name"], r["start_ps"], r["dur_ps"]) for r in rows] == [("good", 5, 6)]


def test_undeclared_track_rejected_for_counters_and_steps(tmp_path):
    with Recorder(str(tmp_path / "t.sctrace"), run_name="x") as rec:
        with pytest.raises(ValueError, match="track"):
            rec.counters(track=[1], ts_ps=[0], value=[1.0])
        with pytest.raises(ValueError, match="track"):
            rec.steps(track=[3], step=[0], start_ps=[0], dur_ps=[1])
        with pytest.raises(ValueError, match="kind"):
            rec.track("/host:CPU", "x", "gpu")


def test_names_as_strings_or_interned_ids(tmp_path):
    """`name` takes strings or ids from intern(), as lists or arrays; strings keep every character."""
    path = tmp_path / "names.sctrace"
    with Recorder(str(path), run_name="x") as rec:
        t = rec.track("/host:CPU", "main", "host")
        hello = rec.intern("hello")
        rec.emit(track=[t], name=[hello], start_ps=[0], dur_ps=[1])
        rec.emit(track=np.array([t]), name=np.array([hello], np.uint32), start_ps=[1], dur_ps=[1])
        rec.emit(track=[t, t], name=["tail\x00", "ünï 😀"], start_ps=[2, 3], dur_ps=[1, 1], args={"s": ["v\x00", ""]})
    rows, args = events_of(path)
    assert [r["name"] for r in rows] == ["hello", "hello", "tail\x00", "ünï 😀"]
    assert args == {(2, "s"): (0, 0.0, "v\x00"), (3, "s"): (0, 0.0, "")}


def test_chunks_respect_chunk_rows(tmp_path):
    path = tmp_path / "chunks.sctrace"
    with Recorder(str(path), run_name="x", chunk_rows=3) as rec:
        t = rec.track("/host:CPU", "main", "host")
        rec.emit(track=[t] * 7, name=["a"] * 7, start_ps=range(7), dur_ps=[1] * 7)
        rec.emit(track=[t] * 5, name=["b"] * 5, start_ps=range(5), dur_ps=[1] * 5, args={"i": list(range(5))})
        rec.counters(track=[t] * 4, ts_ps=range(4), value=[1.0] * 4)
    f = pb.TraceFile.FromString(path.read_bytes())
    sizes = {}
    for c in f.chunk:
        kind = c.WhichOneof("payload")
        if kind in ("events", "counters"):
            sizes.setdefault(kind, []).append(len(getattr(c, kind).track))
    assert sizes == {"events": [3, 3, 1, 3, 2], "counters": [3, 1]}
    _, args = events_of(path)
    assert {k: v[0] for k, v in args.items()} == {(7 + i, "i"): i for i in range(5)}


def test_footer_totals_and_close_is_idempotent(tmp_path):
    path = tmp_path / "f.sctrace"
    rec = Recorder(str(path), run_name="x", start_time_unix_ns=1000)
    t = rec.track("/host:CPU", "main", "host")
    rec.emit(track=[t, t], name=["a", "b"], start_ps=[0, 1], dur_ps=[1, 1])
    rec.steps(track=[t], step=[0], start_ps=[0], dur_ps=[2])
    rec.close()
    rec.close()
    f = pb.TraceFile.FromString(path.read_bytes())
    footer = f.chunk[-1].footer
    assert (footer.events, footer.counters, footer.steps, footer.partition_stats) == (2, 0, 1, 0)
    assert footer.chunks == len(f.chunk) - 1
    assert [c.WhichOneof("payload") for c in f.chunk].count("footer") == 1


def test_crash_inside_the_context_leaves_a_file_without_footer(tmp_path):
    path = tmp_path / "crash.sctrace"
    with pytest.raises(RuntimeError), Recorder(str(path), run_name="x") as rec:
        t = rec.track("/host:CPU", "main", "host")
        rec.emit(track=[t], name=["a"], start_ps=[0], dur_ps=[1])
        raise RuntimeError("simulated crash")
    kinds = chunk_kinds(path.read_bytes())
    assert "footer" not in kinds and "events" in kinds  # what was recorded is kept
    trace = read_trace(str(path), allow_truncated=True)
    assert trace.cut is not None and "footer" in trace.cut.reason
    assert trace.data["events"]["start_ps"].tolist() == [0]


def test_header_fields(tmp_path):
    path = tmp_path / "h.sctrace"
    with Recorder(
        str(path),
        run_name="base",
        producer="scprof-sim 0.1.0",
        run_id="r-1",
        start_time_unix_ns=7,
        hardware={"generation": "v6e", "num_chips": 4, "hbm_bytes": 32 << 30, "board": "b1"},
        config={"b": 1, "a": [1, 2]},
        tags={"z": "1", "a": "2"},
    ):
        pass
    h = read_header(str(path))
    assert (h.format_version, h.run_id, h.run_name, h.producer, h.clock_unit, h.start_time_unix_ns) == (
        1,
        "r-1",
        "base",
        "scprof-sim 0.1.0",
        "ps",
        7,
    )
    assert (h.hardware.generation, h.hardware.num_chips, h.hardware.hbm_bytes) == ("v6e", 4, 32 << 30)
    assert h.hardware.extra_json == '{"board": "b1"}'
    assert h.config_json == '{"a": [1, 2], "b": 1}'
    assert dict(h.tags) == {"z": "1", "a": "2"}


RECORD_SCRIPT = """
import sys
import numpy as np
from profiler.recorder import Recorder
with Recorder(sys.argv[1], run_name="det", run_id="fixed-id", start_time_unix_ns=123, chunk_rows=3,
              hardware={"generation": "v5p", "num_chips": 2, "zeta": 1, "alpha": 2},
              config={"b": 2, "a": 1}, tags={f"tag{i}": str(i) for i in range(12)}) as rec:
    tc = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", 0, 0)
    heap = rec.track("/device:TPU:0", "HBM heap", "counter", 0, unit="bytes")
    rec.emit(track=[tc] * 5, name=["b", "a", "c", "a", "é"], start_ps=np.arange(5) * 10, dur_ps=[3] * 5,
             step=[0, 0, 1, 1, None], table=["t1", None, "t2", "t1", "t3"], ids=[1, 2, 3, 4, 5],
             args={"y": [1, None, 3, 4, 5], "x": ["p", "q", None, "r", "s"], "w": [0.5] * 5})
    rec.counters(track=[heap] * 4, ts_ps=[0, 1, 2, 3], value=[1.0, 2.0, 3.0, 4.0])
    rec.steps(track=[tc, tc], step=[0, 1], start_ps=[0, 20], dur_ps=[20, 30])
    rec.partition_stats(step=[0, 1], chip=[0, 0], sc=[1, 2], table=["t1", "t2"], ids=[5, 6], unique_ids=[4, 5])
"""


def test_same_inputs_give_byte_identical_files(tmp_path):
    """Fixed run id and start time: the file is reproducible, in this process and in others."""
    paths = [tmp_path / f"det{i}.sctrace" for i in range(3)]
    namespace: dict = {}
    code = compile(RECORD_SCRIPT, "record", "exec")
    for p in paths[:1]:
        sys_argv, sys.argv = sys.argv, ["x", str(p)]
        try:
            exec(code, namespace)
        finally:
            sys.argv = sys_argv
    for i, p in enumerate(paths[1:]):  # other processes: other hash seeds, other allocations
        env = {"PYTHONHASHSEED": str(i + 1), "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-c", RECORD_SCRIPT, str(p)], check=True, cwd=REPO, env=env)
    data = [p.read_bytes() for p in paths]
    assert data[0] == data[1] == data[2]

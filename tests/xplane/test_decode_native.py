"""The native XSpace event decoder (profiler/xspace/decode_native.py, profiler/xspace/_events.c) inside the import.

Value for value against the official classes: tests/xplane/test_decoders.py. Here: it finds each
line's events where protobuf does, it takes every line of the usual captures (no silent fallback),
what it does not take (a group in a plane, a malformed event) goes to the Python decoder with the
same outcome, and its stat columns map to the store rows the Python decoder's stat rows map to,
also where a stat name has two ids or a line has more stat columns than it keeps.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from profiler.wire import encode_varint
from profiler.xspace import decode as decode_module
from profiler.xspace import decode_native as native
from profiler.xspace import wire as w
from profiler.xspace import xplane_pb2 as xp
from profiler.xspace.decode import decode_files
from tests.tracekit import assert_one_error, cli
from tests.xplane.helpers import JAX_RUN_DIR, JAX_SMALL
from tests.xplane.synth import PlaneBuilder, tpu_space

JAX_HOST = os.path.join(JAX_RUN_DIR, "jaxhost.xplane.pb")


def _field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _space_bytes(planes: list[bytes], hosts=("tpu-host-0",)) -> bytes:
    """An XSpace from serialized planes (which the official classes may not accept event by event)."""
    return b"".join(_field(1, p) for p in planes) + b"".join(_field(4, h.encode()) for h in hosts)


def _lite(space: xp.XSpace) -> list:
    return [w.XPlaneLite.FromString(p.SerializeToString()) for p in space.planes]


def _write(tmp_path, data: bytes, name: str = "c.xplane.pb") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _same(a, b) -> None:
    """Two Decoded give the same store rows (event_args compared as sets of rows: their order differs)."""
    assert a.strings.values == b.strings.values and a.tracks.rows == b.tracks.rows
    assert a.events.keys() == b.events.keys()
    for k in a.events:
        assert np.array_equal(a.events[k], b.events[k]), k

    def args(d):
        if not d.args:
            return []
        cols = {k: np.concatenate(v) for k, v in d.args.items()}
        dbl = np.nan_to_num(cols["double_value"], nan=-0.5).tolist()
        return sorted(zip(*(cols[k].tolist() for k in ("event_id", "key", "int_value", "string_id")), dbl, strict=True))

    assert args(a) == args(b)


@pytest.mark.parametrize("path", [JAX_SMALL, JAX_HOST, "tpu"])
def test_planes_split_as_protobuf_reads_them(path):
    """The native split of each plane gives protobuf's lines: their fields, and their events' bytes."""
    if path == "tpu":
        data = tpu_space(steps=3).SerializeToString()
    else:
        with open(path, "rb") as f:
            data = f.read()
    planes, _ = w.split_space(data, "x")
    for raw in planes:
        whole, split = w.XPlaneLite.FromString(raw), native.parse_plane(raw)
        assert split.spans is not None and len(split.lines) == len(whole.lines)
        for name in ("name", "id", "stats", "stat_metadata", "event_metadata"):
            assert getattr(split.msg, name) == getattr(whole, name), name
        for i, line in enumerate(whole.lines):
            assert split.event_bytes(i) == list(line.events) and split.events(i) == len(line.events)
            line.ClearField("events")
            assert split.lines[i] == line


def test_the_usual_captures_decode_natively(tmp_path, monkeypatch):
    """Every line of the committed captures, a synthetic TPU capture and an exported run goes to the
    native decoder: the Python decoder is not called."""
    from exporters.xspace import export_run
    from profiler.store import Store
    from profiler.synthetic import write_synthetic_trace
    from profiler.trace_to_store import ingest_traces

    trace, exported = str(tmp_path / "run.sctrace"), str(tmp_path / "run.xplane.pb")
    write_synthetic_trace(trace, 3000, chips=2, scs=2)
    with Store.open(str(tmp_path / "s.duckdb")) as st:
        (r,) = ingest_traces(st, [trace])
        export_run(st, r.run_id, exported, None, False)
    tpu = _write(tmp_path, tpu_space(steps=3).SerializeToString(), "tpu.xplane.pb")

    def refuse(*_a, **_k):
        raise AssertionError("a line went to the Python decoder")

    monkeypatch.setattr(decode_module, "decode_events", refuse)
    for path in (JAX_SMALL, JAX_HOST, tpu, exported):
        assert decode_files([path]).n_events > 0


def test_a_group_in_a_plane_falls_back_to_the_python_decoder(tmp_path):
    """An unknown group field (which protobuf skips) stops the native walk of the plane; the plane's
    lines then decode as before, with the same result."""
    space = tpu_space(steps=2)
    planes = [p.SerializeToString() for p in space.planes]
    group = encode_varint(15 << 3 | 3) + encode_varint(1 << 3) + b"\x05" + encode_varint(15 << 3 | 4)
    extra = xp.XLine(id=99, name="extra", timestamp_ns=space.planes[0].lines[0].timestamp_ns)
    extra.events.add(metadata_id=1, offset_ps=5, duration_ps=1)
    planes[0] += _field(3, extra.SerializeToString() + group)
    raw = planes[0]
    assert len(w.XPlaneLite.FromString(raw).lines) == 3  # protobuf reads the plane
    plane = native.parse_plane(raw)
    assert plane.spans is None and len(plane.lines) == 3
    path = _write(tmp_path, _space_bytes(planes))
    _same(decode_files([path]), decode_files([path], native=False))


def test_a_stat_name_with_two_ids_maps_as_the_python_decoder_maps_it(tmp_path):
    """group_id under a second metadata id: the import reads a name's lowest id (the second one's
    values are arguments), the same whether the events decode natively or through stat rows."""
    space = xp.XSpace(hostnames=["h"])
    tc = PlaneBuilder(space, 0, "/device:TPU:0")
    ops = tc.line(1, "XLA Ops")
    for i in range(6):
        tc.event(ops, f"op{i % 2}", i * 1000, 500, group_id=i // 3)
    dup = max(tc.p.stat_metadata) + 5
    tc.p.stat_metadata[dup].id, tc.p.stat_metadata[dup].name = dup, "group_id"
    for ev in list(ops.events)[3:]:
        ev.stats.add(metadata_id=dup, int64_value=77)
    path = _write(tmp_path, space.SerializeToString())
    got = decode_files([path])
    _same(got, decode_files([path], native=False))
    assert got.events["step"].tolist() == [0, 0, 0, 1, 1, 1]  # the first id's values, not 77


def test_more_stat_columns_than_a_line_keeps_become_rows(tmp_path):
    """Events whose stats would need more than MAX_COLUMNS columns decode as stat rows: same store rows."""
    space = xp.XSpace(hostnames=["h"])
    host = PlaneBuilder(space, 0, "/host:CPU")
    line = host.line(1, "main")
    n = native.MAX_COLUMNS + 40
    for i in range(n):
        host.event(line, "op", i * 10, 5, **{f"s{i}": i, "common": 1})
    path = _write(tmp_path, space.SerializeToString())
    raw = space.planes[0].SerializeToString()
    (spans,) = native.parse_plane(raw).spans
    ev = native.decode_line(np.frombuffer(raw, np.uint8), spans, np.zeros(0, np.int64))
    assert len(ev.columns) == native.MAX_COLUMNS and len(ev.stat_event) > 0  # both kinds present
    _same(decode_files([path]), decode_files([path], native=False))


def test_an_event_that_does_not_decode_is_reported_before_a_bad_value_of_an_earlier_line(tmp_path, capsys):
    """Each line is decoded, then mapped, in turn; a malformed event in a later plane is still the
    error reported (as when every line was decoded before any was mapped)."""
    space = tpu_space(steps=2)
    tc = space.planes[0]
    gid = next(k for k, v in tc.stat_metadata.items() if v.name == "group_id")
    ops = next(ln for ln in tc.lines if ln.name == "XLA Ops")
    next(s for s in ops.events[2].stats if s.metadata_id == gid).int64_value = 1 << 40  # refused when mapped
    lite = _lite(space)
    sc1 = next(p for p in lite if p.name.endswith("SparseCore 1"))
    sc1.lines[0].events[1] = b"\x08\x01\x0f"  # metadata_id 1, then a key of wire type 7
    path = _write(tmp_path, _space_bytes([p.SerializeToString() for p in lite]))
    line = assert_one_error(cli(capsys, "ingest", path, "--db", tmp_path / "s.duckdb"), path, "wire type 7")
    assert "group_id" not in line


def test_an_event_with_a_million_stats_imports_in_one_pass(tmp_path, capsys):
    """One event holding 10^6 stats (empty ones, 2 bytes each: a 2 MB file): every stat is an argument.
    A numpy layout decoder this import once had spent a quadratic time on it."""
    from profiler.store import Store
    from tests.fuzzkit import time_limit

    space = xp.XSpace(hostnames=["h"])
    host = PlaneBuilder(space, 0, "/host:CPU")
    host.event(host.line(1, "main"), "op", 0, 5, a=1)
    lite = _lite(space)
    lite[0].lines[0].events[0] = bytes(lite[0].lines[0].events[0]) + _field(4, b"") * 1_000_000
    path = _write(tmp_path, _space_bytes([p.SerializeToString() for p in lite]))
    db = str(tmp_path / "s.duckdb")
    with time_limit(60):
        assert cli(capsys, "ingest", path, "--db", db).code == 0
    with Store.open(db, read_only=True) as st:
        assert st.rows("SELECT count(*) n, count(DISTINCT key) k FROM event_args") == [{"n": 1_000_001, "k": 2}]

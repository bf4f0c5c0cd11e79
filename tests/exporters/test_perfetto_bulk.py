"""The bulk (shape-grouped) TracePacket encoder against the scalar varint and the official Perfetto classes.

References: profiler.wire.encode_varint (the project's scalar varint, one value at a
time) for the vectorised varint functions, and the official Perfetto protobuf classes
(perfetto_trace_pb2) both serializing the same packets and decoding ours.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.rowwire import Rows, encode_rows
from profiler.wire import encode_varint, encode_varints, varint_sizes, varint_words, write_varints

EDGES_U64 = [0, 1, 127, 128, 16383, 16384, (1 << 35) - 1, 1 << 35, (1 << 56) - 1, 1 << 56, (1 << 63) - 1, 1 << 63,
             (1 << 64) - 1]
EDGES_I64 = [0, 1, 127, 128, (1 << 63) - 1, -1, -128, -(1 << 63)]
u64 = st.one_of(st.sampled_from(EDGES_U64), st.integers(0, (1 << 64) - 1), st.integers(0, 300))
i64 = st.one_of(st.sampled_from(EDGES_I64), st.integers(-(1 << 63), (1 << 63) - 1), st.integers(0, 20000))


# -- the vectorised varint against the scalar one ------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(values=st.lists(i64, min_size=0, max_size=60))
def test_encode_varints_int64_match_scalar(values):
    """Negative int64 are their 64-bit two's complement (10 bytes), as encode_varint writes them."""
    data, offsets = encode_varints(np.array(values, np.int64))
    want = [encode_varint(v) for v in values]
    assert data.tobytes() == b"".join(want)
    assert np.diff(offsets).tolist() == [len(w) for w in want]
    assert varint_sizes(np.array(values, np.int64)).tolist() == [len(w) for w in want]


@settings(max_examples=150, deadline=None)
@given(values=st.lists(u64, min_size=1, max_size=60))
def test_encode_varints_uint64_match_scalar(values):
    data, _ = encode_varints(np.array(values, np.uint64))
    assert data.tobytes() == b"".join(encode_varint(v) for v in values)


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1, 10), raw=st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=40))
def test_fixed_size_writers_match_scalar(size, raw):
    """write_varints (and varint_words below 9 bytes) of values that all take `size` bytes."""
    lo = 0 if size == 1 else 1 << (7 * (size - 1))
    hi = (1 << 64) - 1 if size == 10 else (1 << (7 * size)) - 1
    values = np.array([lo + v % (hi - lo + 1) for v in raw], np.uint64)
    out = np.full((len(values), size + 3), 0xEE, np.uint8)  # a strided view, like a field inside a row
    write_varints(out[:, 1:1 + size], values, size)
    for row, v in zip(out, values.tolist(), strict=True):
        assert row[1:1 + size].tobytes() == encode_varint(v)
        assert row[0] == 0xEE and row[1 + size:].tolist() == [0xEE] * 2
    if size <= 8:
        words = varint_words(values, size)
        assert [int(w).to_bytes(8, "little")[:size] for w in words] == [encode_varint(v) for v in values.tolist()]


# -- TracePackets in bulk against the official classes --------------------------------------------

packet = st.fixed_dictionaries({
    "ts": u64,
    "uuid": st.one_of(st.none(), u64),
    "name_iid": st.one_of(st.none(), st.integers(1, 300)),  # name_iid and name are one oneof: iid used when no name
    "name": st.one_of(st.none(), st.text(max_size=12)),
    "ints": st.lists(st.tuples(st.integers(1, 200), i64), max_size=3),
    "str_arg": st.one_of(st.none(), st.text(max_size=8)),
    "counter": st.one_of(st.none(), st.floats(allow_nan=False)),
    "flow": st.one_of(st.none(), u64),
    "needs": st.booleans(),
})  # fmt: skip


def _strings(values: list[str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(utf-8 bytes back to back, n + 1 offsets, presence) of optional strings."""
    enc = [(v or "").encode() for v in values]
    offs = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=offs[1:])
    return np.frombuffer(b"".join(enc) or b"\0", np.uint8), offs, np.array([v is not None for v in values])


def _bulk(pkts: list[dict]) -> Rows:
    """The packets declared column-wise, as exporters/perfetto.py declares its BEGIN packets."""
    n = len(pkts)
    col = {k: [p[k] for p in pkts] for k in pkts[0]}
    ev = Rows(n)
    for slot in range(3):  # up to 3 int annotations per packet: slot-th present where the list is long enough
        has = np.array([len(x) > slot for x in col["ints"]])
        key = np.array([x[slot][0] if len(x) > slot else 0 for x in col["ints"]], np.uint64)
        val = np.array([x[slot][1] if len(x) > slot else 0 for x in col["ints"]], np.int64)
        ev.message(4, Rows(n).varint(1, key).varint(4, val), has)
    data, offs, has_str = _strings(col["str_arg"])  # a string annotation: a hole two messages deep
    ev.message(4, Rows(n).const(b"\x08\x07").bytes(6, data, offs, has_str), has_str)
    ev.varint(9, np.full(n, pt.TrackEvent.TYPE_INSTANT))
    has_iid = np.array([v is not None and s is None for v, s in zip(col["name_iid"], col["name"], strict=True)])
    ev.varint(10, np.array([v or 0 for v in col["name_iid"]], np.uint64), has_iid)
    has_uuid = np.array([v is not None for v in col["uuid"]])
    ev.varint(11, np.array([v or 0 for v in col["uuid"]], np.uint64), has_uuid)
    data, offs, has_name = _strings(col["name"])
    ev.bytes(23, data, offs, has_name)
    has_ctr = np.array([v is not None for v in col["counter"]])
    ev.fixed64(44, np.array([0.0 if v is None else v for v in col["counter"]], np.float64), has_ctr)
    has_flow = np.array([v is not None for v in col["flow"]])
    ev.fixed64(47, np.array([v or 0 for v in col["flow"]], np.uint64), has_flow)
    pkt = Rows(n).varint(8, np.array(col["ts"], np.uint64)).const(b"\x50\x01").message(11, ev)
    pkt.const(b"\x68\x02", np.array(col["needs"]))
    return Rows(n).message(1, pkt)


def _official(pkts: list[dict]) -> pt.Trace:
    """The same packets built with the official classes."""
    trace = pt.Trace()
    for p in pkts:
        tp = trace.packet.add(timestamp=p["ts"], trusted_packet_sequence_id=1)
        te = tp.track_event
        for key, val in p["ints"]:
            te.debug_annotations.add(name_iid=key, int_value=val)
        if p["str_arg"] is not None:
            te.debug_annotations.add(name_iid=7, string_value=p["str_arg"])
        te.type = pt.TrackEvent.TYPE_INSTANT
        if p["name_iid"] is not None and p["name"] is None:
            te.name_iid = p["name_iid"]
        if p["uuid"] is not None:
            te.track_uuid = p["uuid"]
        if p["name"] is not None:
            te.name = p["name"]
        if p["counter"] is not None:
            te.double_counter_value = p["counter"]
        if p["flow"] is not None:
            te.flow_ids.append(p["flow"])
        if p["needs"]:
            tp.sequence_flags = pt.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    return trace


@settings(max_examples=120, deadline=None)
@given(pkts=st.lists(packet, min_size=1, max_size=40))
def test_bulk_packets_are_what_the_official_classes_write_and_read(pkts):
    """Byte-identical to SerializeToString, and decoded by the official classes to the input values."""
    buf, offsets = _bulk(pkts).encode()
    want = _official(pkts)
    assert buf.tobytes() == want.SerializeToString()
    got = pt.Trace.FromString(buf.tobytes())
    assert len(got.packet) == len(pkts) == len(offsets) - 1
    for p, g in zip(pkts, got.packet, strict=True):
        te = g.track_event
        assert g.timestamp == p["ts"]
        ints = [(a.name_iid, a.int_value) for a in te.debug_annotations if a.HasField("int_value")]
        assert ints == p["ints"]  # negative int64 come back negative
        assert te.track_uuid == (p["uuid"] or 0) and te.HasField("track_uuid") == (p["uuid"] is not None)
        assert te.name == (p["name"] or "")
        assert te.name_iid == (p["name_iid"] or 0 if p["name"] is None else 0)
        assert list(te.flow_ids) == ([] if p["flow"] is None else [p["flow"]])
        if p["counter"] is not None:
            assert te.double_counter_value == p["counter"]


@settings(max_examples=60, deadline=None)
@given(pkts=st.lists(packet, min_size=1, max_size=25), ends=st.lists(st.tuples(u64, u64), min_size=0, max_size=25),
       seed=st.integers(0, 10_000))
def test_interleaved_begin_and_end_packets(pkts, ends, seed):
    """BEGIN-like and END-like packets of many shapes interleaved in a random order, as the exporter merges them."""
    n, m = len(pkts), len(ends)
    end_rows = Rows(m)
    ev = Rows(m).const(b"\x48\x02").varint(11, np.array([u for _, u in ends], np.uint64))
    end_rows.message(1, Rows(m).varint(8, np.array([t for t, _ in ends], np.uint64)).const(b"\x50\x01").message(11, ev))
    order = np.random.default_rng(seed).permutation(n + m)
    buf = encode_rows([(_bulk(pkts), order[:n]), (end_rows, order[n:])])
    begins = _official(pkts).packet
    rows: list = [None] * (n + m)
    for i in range(n):
        rows[order[i]] = begins[i]
    for j, (t, u) in enumerate(ends):
        p = pt.TracePacket(timestamp=t, trusted_packet_sequence_id=1)
        p.track_event.type = pt.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = u
        rows[order[n + j]] = p
    want = pt.Trace()
    want.packet.extend(rows)
    assert buf.tobytes() == want.SerializeToString()


def test_one_chunk_with_many_shapes():
    """Thousands of rows whose varint sizes and presence vary independently: every row still exact."""
    rng = np.random.default_rng(7)
    n = 5000
    ts = rng.integers(0, 1 << 62, n).astype(np.uint64) >> rng.integers(0, 62, n).astype(np.uint64)
    val = rng.integers(-(1 << 40), 1 << 40, n) >> rng.integers(0, 40, n)
    has = rng.random(n) < 0.7
    names = [None if rng.random() < 0.3 else "x" * int(rng.integers(0, 200)) for _ in range(n)]
    pkts = [{"ts": int(ts[i]), "uuid": int(ts[i] >> np.uint64(3)), "name_iid": None, "name": names[i],
             "ints": [(3, int(val[i]))] if has[i] else [], "str_arg": names[-1 - i], "counter": None,
             "flow": None, "needs": bool(has[i])} for i in range(n)]  # fmt: skip
    buf, offsets = _bulk(pkts).encode()
    assert buf.tobytes() == _official(pkts).SerializeToString()
    assert offsets[-1] == len(buf)


def test_empty_and_all_absent():
    assert encode_rows([(Rows(0).varint(1, np.zeros(0, np.uint64)), np.arange(0))]).tobytes() == b""
    r = Rows(3).varint(1, np.array([5, 6, 7]), np.zeros(3, bool)).message(2, Rows(3), np.zeros(3, bool))
    buf, offsets = r.encode()
    assert buf.tobytes() == b"" and offsets.tolist() == [0, 0, 0, 0]
    # an empty nested message is still written (tag, length 0), as protobuf does for a set sub-message
    buf, _ = Rows(2).message(3, Rows(2)).encode()
    assert buf.tobytes() == b"\x1a\x00\x1a\x00"

"""The compiled packet encoder (exporters/_perfetto_wire.c) against the official Perfetto classes.

Reference: a plain-Python encoder below builds every packet with perfetto_trace_pb2 (one
object per packet, SerializeToString) and merges the END packets by sorting them, not with
a heap; the C encoder must write exactly its bytes, batch after batch, for random rows of
every kind (events with nulls, negative and huge arguments, event_args, flows, step markers,
counters, breakdown slices, exact picoseconds).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters import _perfetto_wire as wire
from exporters.perfetto import STREAM_COLUMNS, STREAM_SCHEMA, TYPED_ARGS
from exporters.perfetto.encoding import STRING_MASK, _column

NEEDS = pt.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
ANN_IIDS = list(range(1, len(TYPED_ARGS) + 4))  # TYPED_ARGS then start_ps, dur_ps, ts_ps
N_TYPED = len(TYPED_ARGS)
CAT_OF_TRACK = [0, 1, 2, 3, 200]
NAME_IID = [0, 1, 2, 300, 5]
TABLE_IID = [0, 7, 130, 1]
STEP_CAT, BD_CAT, DEFAULT_UUID = 7, 8, 3
I64 = st.one_of(st.integers(0, 300), st.integers(-(1 << 63), (1 << 63) - 1), st.sampled_from([-1, 127, 128]))

row = st.fixed_dictionaries(
    {
        "kind": st.integers(0, 3),
        "id": st.integers(0, 12),
        "track_id": st.integers(0, 4),
        "name_id": st.integers(0, 4),
        "start_ps": st.integers(0, 40_000),
        "dur_ps": st.one_of(st.integers(0, 20_000), st.sampled_from([0, 1000, 999])),
        "args": st.lists(st.one_of(st.none(), I64), min_size=N_TYPED, max_size=N_TYPED),
        "value": st.floats(allow_nan=False),
        "uuid": st.one_of(st.just(DEFAULT_UUID), st.integers(1, 40), st.integers(0, (1 << 64) - 1)),
    }
)

# event_args per event id: (key iid, int | float | str | None); key iids follow ANN_IIDS
K = len(ANN_IIDS) + 1
ARGS = {3: [(K, 5), (K + 1, -2.5), (K + 2, "x" * 200)], 7: [(K + 3, None)], 11: [(K, -1)]}
FLOWS_OUT = {2: 1, 7: 2}
FLOWS_IN = {5: 1, 11: 2, 7: 3}


def _stream(rows: list[dict]) -> list[dict]:
    """Rows in the exporter's stream order; the table argument is a valid table id or null."""
    for r in rows:
        if r["kind"] == 2:  # counters: no typed arguments
            r["args"] = [None] * N_TYPED
        if r["args"][1] is not None:
            r["args"][1] %= len(TABLE_IID)
        if r["kind"] == 1 and r["args"][0] is None:
            r["args"][0] = 0  # markers have a step
        if r["kind"] == 3:
            r["name_id"] += 1  # breakdown slices carry their name iid
    return sorted(rows, key=lambda r: (r["start_ps"] // 1000, -((r["start_ps"] + r["dur_ps"]) // 1000), r["kind"]))


def _batch(rows: list[dict]) -> pa.RecordBatch:
    cols = {c: [r[c] for r in rows] for c in ("kind", "id", "track_id", "name_id", "start_ps", "dur_ps", "value")}
    for k, name in enumerate(STREAM_COLUMNS[6:-1]):  # the typed columns
        cols[name] = [r["args"][k] for r in rows]
    return pa.RecordBatch.from_pydict({c: cols[c] for c in STREAM_COLUMNS}, schema=STREAM_SCHEMA)


def _encoded_args() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eids, keys, kinds, ints, dbls, strs = [], [], [], [], [], []
    for eid in sorted(ARGS):
        for key, v in ARGS[eid]:
            eids.append(eid)
            keys.append(key)
            kinds.append(0 if v is None else 1 if isinstance(v, int) else 2 if isinstance(v, float) else 3)
            ints.append(v if isinstance(v, int) else 0)
            dbls.append(v if isinstance(v, float) else 0.0)
            strs.append(v.encode() if isinstance(v, str) else b"")
    offs = np.cumsum([0] + [len(s) for s in strs]).astype(np.int64)
    blob, aoffs = wire.encode_args(
        np.array(keys, np.uint64),
        np.array(kinds, np.uint8),
        np.array(ints, np.int64),
        np.array(dbls, np.float64),
        offs,
        b"".join(strs),
    )
    return np.array(eids, np.int64), np.frombuffer(blob, np.uint8), np.frombuffer(aoffs, np.int64)


def _c_encode(rows: list[dict], chunk: int) -> bytes:
    """The rows encoded by the C encoder, `chunk` rows per call, then the ENDs left open."""
    src, dst = sorted(FLOWS_OUT), sorted(FLOWS_IN)
    ends = np.array(src + dst, np.int64)
    bits = np.zeros(int(ends.max()) + 1, bool)
    bits[ends] = True
    a_eid, a_blob, a_offs = _encoded_args()
    tables = (
        np.array(CAT_OF_TRACK, np.uint64),
        np.array(NAME_IID, np.uint64),
        np.array(TABLE_IID, np.uint64),
        np.array(ANN_IIDS, np.uint64),
        np.array(src, np.int64),
        np.array([FLOWS_OUT[s] for s in src], np.uint64),
        np.array(dst, np.int64),
        np.array([FLOWS_IN[d] for d in dst], np.uint64),
        np.packbits(bits, bitorder="little"),
        a_eid,
        a_offs,
        a_blob,
    )
    cap = len(rows) + 1
    heap = (np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.uint64))
    heap_n, out = 0, []
    for lo in range(0, len(rows), chunk):
        part = rows[lo : lo + chunk]
        batch = _batch(part)
        buf = np.empty(
            len(part) * wire.MAX_ROW_BYTES + (heap_n + len(part)) * wire.MAX_END_BYTES + len(a_blob), np.uint8
        )
        n, heap_n = wire.encode_chunk(
            tuple(_column(batch, c) for c in STREAM_COLUMNS),
            np.array([r["uuid"] for r in part], np.uint64),
            tables,
            0,
            DEFAULT_UUID,
            STEP_CAT,
            BD_CAT,
            STRING_MASK,
            (*heap, heap_n),
            lo,
            buf,
        )
        out.append(buf[:n].tobytes())
    out.append(wire.encode_ends((*heap, heap_n)))
    return b"".join(out)


def _begin(r: dict) -> pt.TracePacket:
    """The BEGIN / INSTANT / COUNTER packet of a row, with the official classes."""
    kind, s, d = r["kind"], r["start_ps"], r["dur_ps"]
    s_ns, e_ns = s // 1000, (s + d) // 1000
    p = pt.TracePacket(timestamp=s_ns, trusted_packet_sequence_id=1)
    te = p.track_event
    slice_ = kind != 2
    if slice_:
        te.category_iids.append({1: STEP_CAT, 3: BD_CAT}.get(kind, CAT_OF_TRACK[r["track_id"]]))
        for k, v in enumerate(r["args"]):
            if v is None:
                continue
            if STRING_MASK >> k & 1:  # a string id (the table)
                te.debug_annotations.add(name_iid=ANN_IIDS[k], string_value_iid=TABLE_IID[v])
            else:
                te.debug_annotations.add(name_iid=ANN_IIDS[k], int_value=v)
        if s % 1000:
            te.debug_annotations.add(name_iid=ANN_IIDS[N_TYPED], int_value=s)
        if s % 1000 or d % 1000:
            te.debug_annotations.add(name_iid=ANN_IIDS[N_TYPED + 1], int_value=d)
    elif s % 1000:
        te.debug_annotations.add(name_iid=ANN_IIDS[N_TYPED + 2], int_value=s)
    if kind == 0:
        for key, v in ARGS.get(r["id"], []):
            a = te.debug_annotations.add(name_iid=key)
            if isinstance(v, int):
                a.int_value = v
            elif isinstance(v, float):
                a.double_value = v
            elif isinstance(v, str):
                a.string_value = v
    te.type = (
        pt.TrackEvent.TYPE_COUNTER
        if not slice_
        else (pt.TrackEvent.TYPE_SLICE_BEGIN if e_ns > s_ns else pt.TrackEvent.TYPE_INSTANT)
    )
    if kind == 0:
        te.name_iid = NAME_IID[r["name_id"]]
    if kind == 3:
        te.name_iid = r["name_id"]
    if r["uuid"] != DEFAULT_UUID:
        te.track_uuid = r["uuid"]
    if kind == 1:
        te.name = f"Step {r['args'][0]}"
    if kind == 2:
        te.double_counter_value = r["value"]
    if kind == 0 and r["id"] in FLOWS_OUT:
        te.flow_ids.append(FLOWS_OUT[r["id"]])
    if kind == 0 and r["id"] in FLOWS_IN:
        te.terminating_flow_ids.append(FLOWS_IN[r["id"]])
    if slice_ or s % 1000:
        p.sequence_flags = NEEDS
    return p


def _reference(rows: list[dict]) -> bytes:
    """All packets with the official classes; each END before the first row starting at or after it."""
    ends = []  # (end ns, -seq, uuid)
    for seq, r in enumerate(rows):
        s_ns, e_ns = r["start_ps"] // 1000, (r["start_ps"] + r["dur_ps"]) // 1000
        if r["kind"] != 2 and e_ns > s_ns:
            ends.append((e_ns, -seq, r["uuid"]))
    trace = pt.Trace()
    order = []  # (position key, packet)
    for seq, r in enumerate(rows):
        order.append(((r["start_ps"] // 1000, 1, seq, 0), _begin(r)))
    for e_ns, neg_seq, uuid in ends:
        p = pt.TracePacket(timestamp=e_ns, trusted_packet_sequence_id=1)
        p.track_event.type = pt.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = uuid
        # after its own BEGIN, before rows that start at or after its end
        order.append(((e_ns, 0, neg_seq, 1), p))
    order.sort(key=lambda x: x[0])
    trace.packet.extend(p for _, p in order)
    return trace.SerializeToString()


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=40), chunk=st.integers(1, 41))
def test_c_encoder_writes_what_the_official_classes_write(rows, chunk):
    rows = _stream(rows)
    assert _c_encode(rows, chunk) == _reference(rows)


def test_bytes_decode_to_the_rows():
    """Decoded with the official classes, the packets give back the rows' values (negative int64 too)."""
    rows = _stream(
        [
            {
                "kind": 0,
                "id": 3,
                "track_id": 1,
                "name_id": 3,
                "start_ps": 1500,
                "dur_ps": 2000,
                "args": [-(1 << 63), 2, None, 4, (1 << 63) - 1, None, None, -1, 9] + [None] * (N_TYPED - 9),
                "value": 0.0,
                "uuid": 9,
            }
        ]
    )
    got = pt.Trace.FromString(_c_encode(rows, 1))
    begin, end = got.packet
    anns = {a.name_iid: a for a in begin.track_event.debug_annotations}
    assert anns[1].int_value == -(1 << 63) and anns[5].int_value == (1 << 63) - 1 and anns[8].int_value == -1
    assert anns[2].string_value_iid == TABLE_IID[2]
    assert anns[ANN_IIDS[N_TYPED]].int_value == 1500 and anns[ANN_IIDS[N_TYPED + 1]].int_value == 2000
    assert [a.string_value for a in begin.track_event.debug_annotations if a.name_iid == K + 2] == ["x" * 200]
    assert begin.timestamp == 1 and end.timestamp == 3 and end.track_event.track_uuid == 9


def test_errors_are_raised_not_written():
    rows = _stream(
        [
            {
                "kind": 0,
                "id": 0,
                "track_id": 0,
                "name_id": 0,
                "start_ps": 0,
                "dur_ps": 0,
                "args": [None] * N_TYPED,
                "value": 0.0,
                "uuid": 1,
            }
        ]
    )
    rows[0]["name_id"] = 99  # not interned
    with pytest.raises(ValueError, match="not interned"):
        _c_encode(rows, 1)
    rows[0]["name_id"], rows[0]["kind"] = 0, 9
    with pytest.raises(ValueError, match="unknown row kind"):
        _c_encode(rows, 1)
    heap = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
    with pytest.raises(ValueError, match="capacity"):
        wire.encode_ends((*heap, 1))


def test_threads_encode_at_once_as_alone():
    """encode_chunk runs without the GIL: several threads encoding at once each write the reference bytes."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(7)
    streams = []
    for _ in range(4):
        rows = [
            {
                "kind": int(rng.integers(0, 4)),
                "id": int(rng.integers(0, 13)),
                "track_id": int(rng.integers(0, 5)),
                "name_id": int(rng.integers(0, 5)),
                "start_ps": int(rng.integers(0, 400_000)),
                "dur_ps": int(rng.integers(0, 20_000)),
                "args": [int(x) for x in rng.integers(-5, 300, N_TYPED)],
                "value": float(rng.random()),
                "uuid": int(rng.integers(1, 40)),
            }
            for _ in range(3_000)
        ]
        streams.append(_stream(rows))
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda rows: _c_encode(rows, 500), streams))
    assert got == [_reference(rows) for rows in streams]


def test_output_buffer_too_small_is_raised():
    rows = _stream(
        [
            {
                "kind": 0,
                "id": 0,
                "track_id": 0,
                "name_id": 0,
                "start_ps": 0,
                "dur_ps": 5000,
                "args": [None] * N_TYPED,
                "value": 0.0,
                "uuid": 1,
            }
        ]
    )
    batch = _batch(rows)
    empty = np.zeros(0, np.int64)
    tables = (
        np.array(CAT_OF_TRACK, np.uint64),
        np.array(NAME_IID, np.uint64),
        np.array(TABLE_IID, np.uint64),
        np.array(ANN_IIDS, np.uint64),
        empty,
        np.zeros(0, np.uint64),
        empty,
        np.zeros(0, np.uint64),
        np.zeros(0, np.uint8),
        empty,
        np.zeros(1, np.int64),
        np.zeros(0, np.uint8),
    )
    heap = (np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="output buffer too small"):
        wire.encode_chunk(
            tuple(_column(batch, c) for c in STREAM_COLUMNS),
            np.array([1], np.uint64),
            tables,
            0,
            DEFAULT_UUID,
            STEP_CAT,
            BD_CAT,
            STRING_MASK,
            (*heap, 0),
            0,
            np.empty(4, np.uint8),
        )

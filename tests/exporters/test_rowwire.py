"""The vectorised encoder writes the bytes the official protobuf classes write."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.rowwire import Rows, encode_rows, varint_sizes

u64 = st.integers(0, (1 << 64) - 1)


def _packets(ts, ival, has_ann, name, has_name, dbl, has_dbl) -> Rows:
    n = len(ts)
    ev = Rows(n)
    ann = Rows(n).varint(1, np.full(n, 3, np.uint64)).varint(4, np.array(ival, np.int64))
    ev.message(4, ann, has_ann)
    ev.varint(9, np.full(n, 1))
    enc = [s.encode() for s in name]
    offs = np.cumsum([0] + [len(b) for b in enc])
    ev.bytes(23, np.frombuffer(b"".join(enc), np.uint8), offs, has_name)
    ev.fixed64(44, np.array(dbl, np.float64), has_dbl)
    pkt = Rows(n).varint(8, np.array(ts, np.uint64)).const(b"\x50\x01").message(11, ev)
    return Rows(n).message(1, pkt)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(u64, st.integers(-(1 << 63), (1 << 63) - 1), st.booleans(), st.text(max_size=20),
                               st.booleans(), st.floats(allow_nan=False), st.booleans()), min_size=1, max_size=30))
def test_rows_match_official_serialization(rows):
    ts, ival, has_ann, name, has_name, dbl, has_dbl = (list(c) for c in zip(*rows, strict=True))
    n = len(rows)
    has_ann, has_name, has_dbl = (np.array(x, bool) for x in (has_ann, has_name, has_dbl))
    buf, offsets = _packets(ts, ival, has_ann, name, has_name, dbl, has_dbl).encode()

    want = pt.Trace()
    for i in range(n):
        p = want.packet.add(timestamp=ts[i], trusted_packet_sequence_id=1)
        if has_ann[i]:
            p.track_event.debug_annotations.add(name_iid=3, int_value=ival[i])
        p.track_event.type = 1
        if has_name[i]:
            p.track_event.name = name[i]
        if has_dbl[i]:
            p.track_event.double_counter_value = dbl[i]
    assert buf.tobytes() == want.SerializeToString()
    assert len(offsets) == n + 1 and offsets[-1] == len(buf)


@settings(max_examples=60, deadline=None)
@given(ts=st.lists(u64, min_size=1, max_size=25), short=st.lists(st.integers(0, 300), min_size=1, max_size=25),
       seed=st.integers(0, 1000))
def test_interleaved_parts_keep_each_row_intact(ts, short, seed):
    """Rows of two message types in a random order: each row's bytes are its own encoding.

    Short rows (under 8 bytes) next to long ones exercise the spill repair.
    """
    n, m = len(ts), len(short)
    longs = _packets(ts, [0] * n, np.zeros(n, bool), [""] * n, np.zeros(n, bool), [0.0] * n, np.zeros(n, bool))
    shorts = Rows(m).varint(1, np.array(short, np.uint64))
    order = np.random.default_rng(seed).permutation(n + m)
    got = encode_rows([(longs, order[:n]), (shorts, order[n:])])
    lb, lo = longs.encode()
    sb, so = shorts.encode()
    rows = [b""] * (n + m)
    for i in range(n):
        rows[order[i]] = lb[lo[i]:lo[i + 1]].tobytes()
    for i in range(m):
        rows[order[n + i]] = sb[so[i]:so[i + 1]].tobytes()
    assert got.tobytes() == b"".join(rows)
    assert sb.tobytes() == b"".join(b"\x08" + _varint(v) for v in short)


def _varint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def test_varint_sizes_at_boundaries():
    v = np.array([0, 127, 128, 16383, 16384, (1 << 63), (1 << 64) - 1], np.uint64)
    assert varint_sizes(v).tolist() == [1, 1, 2, 2, 3, 10, 10]

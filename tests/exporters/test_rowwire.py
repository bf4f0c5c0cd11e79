"""The vectorised encoder writes the bytes the official protobuf classes write."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.rowwire import Rows, varint_sizes

u64 = st.integers(0, (1 << 64) - 1)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(u64, st.integers(-(1 << 63), (1 << 63) - 1), st.booleans(), st.text(max_size=20),
                               st.booleans(), st.floats(allow_nan=False), st.booleans()), min_size=1, max_size=30))
def test_rows_match_official_serialization(rows):
    ts, ival, has_ann, name, has_name, dbl, has_dbl = (list(c) for c in zip(*rows, strict=True))
    n = len(rows)
    has_ann, has_name, has_dbl = (np.array(x, bool) for x in (has_ann, has_name, has_dbl))
    ev = Rows(n)
    ann = Rows(int(has_ann.sum())).varint(1, np.full(int(has_ann.sum()), 3, np.uint64))
    ann.varint(4, np.array(ival, np.int64)[has_ann])
    ev.message(4, ann, has_ann)
    ev.varint(9, np.full(n, 1))
    enc = [s.encode() for s in name]
    offs = np.cumsum([0] + [len(b) for b in enc])
    ev.bytes(23, np.frombuffer(b"".join(enc), np.uint8), offs, has_name)
    ev.fixed64(44, np.array(dbl, np.float64), has_dbl)
    pkt = Rows(n).varint(8, np.array(ts, np.uint64)).const(b"\x50\x01").message(11, ev)
    buf, offsets = Rows(n).message(1, pkt).encode()

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


def test_varint_sizes_at_boundaries():
    v = np.array([0, 127, 128, 16383, 16384, (1 << 63), (1 << 64) - 1], np.uint64)
    assert varint_sizes(v).tolist() == [1, 1, 2, 2, 3, 10, 10]

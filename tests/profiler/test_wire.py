"""The numpy wire fast path against the official protobuf runtime, byte for byte."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler import scprof_trace_pb2 as pb
from profiler.reader import read_trace
from profiler.trace_file import frame_chunk
from profiler.wire import (
    WireError,
    columns_of,
    decode_batch,
    decode_batch_with_protobuf,
    encode_batch,
    encode_varint,
    read_varint,
)
from tests.tracekit import PROPERTY, crafted_trace

MESSAGES = (pb.EventBatch, pb.CounterBatch, pb.StepBatch, pb.PartitionStatsBatch)

VALUES = {  # value strategies per protobuf field type
    pb.EventBatch.DESCRIPTOR.fields_by_name["track"].type: st.integers(0, 2**32 - 1),  # fixed32
    pb.EventBatch.DESCRIPTOR.fields_by_name["step"].type: st.integers(-(2**31), 2**31 - 1),  # sfixed32
    pb.EventBatch.DESCRIPTOR.fields_by_name["start_ps"].type: st.integers(-(2**63), 2**63 - 1),  # sfixed64
    pb.CounterBatch.DESCRIPTOR.fields_by_name["value"].type: st.floats(allow_nan=False),  # double
}


@st.composite
def batches(draw):
    """A batch message type and random values for a random subset of its fields."""
    msg_cls = draw(st.sampled_from(MESSAGES))
    values = {}
    for f in msg_cls.DESCRIPTOR.fields:
        if draw(st.booleans()):
            values[f.name] = draw(st.lists(VALUES[f.type], max_size=6))
    return msg_cls, values


def as_lists(cols: dict[str, np.ndarray]) -> dict[str, list]:
    return {k: v.tolist() for k, v in cols.items() if len(v)}


def fields_of(msg) -> dict[str, list]:
    return {f.name: list(getattr(msg, f.name)) for f in msg.DESCRIPTOR.fields if len(getattr(msg, f.name))}


@PROPERTY
@given(batches())
def test_decode_batch_reads_official_encoding(batch):
    msg_cls, values = batch
    data = msg_cls(**values).SerializeToString()
    cols = decode_batch(columns_of(msg_cls.DESCRIPTOR), data)
    assert cols is not None
    assert as_lists(cols) == fields_of(msg_cls.FromString(data)) == {k: v for k, v in values.items() if v}


@PROPERTY
@given(batches())
def test_encode_batch_is_what_protobuf_writes(batch):
    msg_cls, values = batch
    spec = columns_of(msg_cls.DESCRIPTOR)
    arrays = {k: np.array(v, dtype=spec[k].dtype) for k, v in values.items()}
    data = encode_batch(spec, arrays)
    assert fields_of(msg_cls.FromString(data)) == {k: v for k, v in values.items() if v}
    assert data == msg_cls(**values).SerializeToString()


@PROPERTY
@given(st.integers(1, 2**64 - 1))  # proto3 does not write 0; its varint is b"\x00"
def test_varint_matches_protobuf(value):
    official = pb.Footer(events=value).SerializeToString()  # field 1, uint64 varint
    assert official[1:] == encode_varint(value)
    assert read_varint(official, 1, len(official)) == (value, len(official))
    assert encode_varint(0) == b"\x00"


def unpacked_events() -> bytes:
    """EventBatch columns in the unpacked encoding another writer may use (one tag per value)."""
    out = b""
    for v in (1, 1):
        out += b"\x0d" + struct.pack("<I", v)  # track, field 1 fixed32
    for v in (1, 1):
        out += b"\x15" + struct.pack("<I", v)  # name, field 2
    for v in (10, 20):
        out += b"\x19" + struct.pack("<q", v)  # start_ps, field 3 sfixed64
    for v in (5, 7):
        out += b"\x21" + struct.pack("<q", v)  # dur_ps, field 4
    return out


def test_unpacked_encoding_falls_back_to_protobuf(tmp_path):
    spec = columns_of(pb.EventBatch.DESCRIPTOR)
    data = unpacked_events()
    official = pb.EventBatch.FromString(data)
    assert list(official.start_ps) == [10, 20]  # valid protobuf ...
    assert decode_batch(spec, data) is None  # ... that the fast path declines
    cols = decode_batch_with_protobuf(spec, pb.EventBatch, data)
    assert as_lists(cols) == {"track": [1, 1], "name": [1, 1], "start_ps": [10, 20], "dur_ps": [5, 7]}

    trace = read_trace(str(crafted_trace(tmp_path / "unpacked.sctrace", data, footer_events=2)))
    ev = as_lists(trace.data["events"])
    assert (ev["start_ps"], ev["dur_ps"], [trace.strings[i] for i in ev["name"]]) == ([10, 20], [5, 7], ["op", "op"])


def test_unknown_fields_are_skipped_and_repeats_concatenate():
    spec = columns_of(pb.CounterBatch.DESCRIPTOR)
    part1 = pb.CounterBatch(track=[1], ts_ps=[5], value=[0.5]).SerializeToString()
    part2 = pb.CounterBatch(track=[2], ts_ps=[6], value=[1.5]).SerializeToString()
    unknown = b"\xa0\x06\x07" + b"\xaa\x06\x03abc" + b"\xad\x06\x00\x00\x00\x00"  # fields 100 (varint), 101, 101
    data = part1 + unknown + part2  # protobuf merges: repeated fields concatenate
    official = pb.CounterBatch.FromString(data)
    assert (
        as_lists(decode_batch(spec, data))
        == fields_of(official)
        == {"track": [1, 2], "ts_ps": [5, 6], "value": [0.5, 1.5]}
    )


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x08" + b"\x01\x00\x00\x00",  # packed track says 8 bytes, has 4
        b"\x0a\x03\x01\x00\x00",  # 3 bytes is not a whole fixed32
        b"\x0a",  # tag without length
    ],
    ids=["runs-past-end", "partial-element", "no-length"],
)
def test_malformed_bytes_raise(data):
    with pytest.raises(WireError):
        decode_batch(columns_of(pb.EventBatch.DESCRIPTOR), data)


def test_frame_chunk_is_a_chunk_message():
    body = pb.StepBatch(track=[1], step=[3], start_ps=[0], dur_ps=[9]).SerializeToString()
    framed = frame_chunk("steps", body)
    f = pb.TraceFile.FromString(framed)  # a TraceFile.chunk field on its own
    assert list(f.chunk[0].steps.step) == [3]

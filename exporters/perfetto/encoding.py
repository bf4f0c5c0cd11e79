"""Packets on the wire: the glue around the C encoder (exporters/_perfetto_wire.c) and the few packets
written with the official classes (the sequence's first packet, track descriptors).

The C encoder reads each batch's Arrow columns in place and writes every row's packet with the ENDs
due before it; this module owns its lookup tables, its heap of open slices and its output buffer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters import _perfetto_wire as wire
from exporters.perfetto.flows import Flows
from exporters.perfetto.interning import ANNOTATED, Interning
from exporters.perfetto.tracks import TrackLayout
from profiler.wire import encode_varint

SEQ_ID = 1
CLEARED = pt.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pt.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE

# The stream's columns, in the order exporters/_perfetto_wire.c reads them (all 8 bytes wide).
STREAM_COLUMNS = ("kind", "id", "track_id", "name_id", "start_ps", "dur_ps", *(f.column for f in ANNOTATED), "value")
# Which typed columns hold string ids (bit k: the k-th typed column), for the encoder.
STRING_MASK = sum(1 << k for k, f in enumerate(ANNOTATED) if f.is_string)
STREAM_SCHEMA = pa.schema([(c, pa.float64() if c == "value" else pa.int64()) for c in STREAM_COLUMNS])
_NO_ARGS = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(1, np.int64))


def _trace_packet(pkt: pt.TracePacket) -> bytes:
    """A TracePacket as one `Trace.packet` field (key 0x0A: field 1, length-delimited)."""
    body = pkt.SerializeToString()
    return b"\x0a" + encode_varint(len(body)) + body


def descriptor_packets(ts_ns: int, descriptors: list[pt.TrackDescriptor]) -> bytes:
    """Track descriptors as packets at `ts_ns` on the sequence."""
    return b"".join(
        _trace_packet(pt.TracePacket(timestamp=ts_ns, trusted_packet_sequence_id=SEQ_ID, track_descriptor=d))
        for d in descriptors
    )


def head_packets(
    first_ns: int, interned: pt.InternedData, default_uuid: int, descriptors: list[pt.TrackDescriptor]
) -> bytes:
    """The sequence's first packet (clears incremental state, interns every string, sets the default
    track) and the track descriptors known before the first event."""
    first = pt.TracePacket(
        timestamp=first_ns,
        trusted_packet_sequence_id=SEQ_ID,
        sequence_flags=CLEARED | NEEDS,
        first_packet_on_sequence=True,
        interned_data=interned,
    )
    if default_uuid:
        first.trace_packet_defaults.track_event_defaults.track_uuid = default_uuid
    return _trace_packet(first) + descriptor_packets(first_ns, descriptors)


def encode_event_args(t: pa.Table, arg_key_iid: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """event_args rows (event_id, key, int/double/string value; sorted by event id) as DebugAnnotation
    fields: (event_ids, blob, offsets of each row's fields in the blob)."""
    eid = t.column("event_id").to_numpy().astype(np.int64)
    keys = t.column("key").to_pylist()
    key_iid = np.array([arg_key_iid[x] for x in keys], np.uint64)
    ints, dbls, strs = t.column("int_value"), t.column("double_value"), t.column("string_value")
    is_int = pc.is_valid(ints).to_numpy(zero_copy_only=False)
    is_dbl = pc.is_valid(dbls).to_numpy(zero_copy_only=False) & ~is_int
    is_str = pc.is_valid(strs).to_numpy(zero_copy_only=False) & ~is_int & ~is_dbl
    value_kind = np.select([is_int, is_dbl, is_str], [1, 2, 3], 0).astype(np.uint8)
    sarr = pc.fill_null(strs, "").combine_chunks().cast(pa.large_string())
    offs = np.frombuffer(sarr.buffers()[1], np.int64, len(sarr) + 1, sarr.offset * 8)
    data = sarr.buffers()[2] if sarr.buffers()[2] is not None else b""
    blob, aoffs = wire.encode_args(
        key_iid,
        value_kind,
        pc.fill_null(ints, 0).to_numpy(zero_copy_only=False).astype(np.int64),
        pc.fill_null(dbls, 0.0).to_numpy(zero_copy_only=False).astype(np.float64),
        offs,
        data,
    )
    return eid, np.frombuffer(blob, np.uint8), np.frombuffer(aoffs, np.int64)


def _column(batch: pa.RecordBatch, name: str) -> tuple:
    """(values buffer, validity bitmap or None, offset) of an 8-byte Arrow column, for the C encoder."""
    arr = batch.column(name)
    validity, data = arr.buffers()[:2]
    return data, validity if arr.null_count else None, arr.offset


class Encoder:
    """The C encoder's state between batches: its lookup tables, the heap of open slices' ENDs and the
    output buffer (both reused), and the number of rows encoded (the order in which slices began)."""

    def __init__(self, layout: TrackLayout, interning: Interning, flows: Flows, chunk_rows: int):
        self.tables = (
            layout.category_of_track,
            interning.name_iid,
            interning.table_iid,
            interning.ann_iids,
            flows.src,
            flows.src_id,
            flows.dst,
            flows.dst_id,
            flows.bits,
        )
        self.flow_lo, self.default_uuid = flows.lo, layout.default_uuid
        self.step_cat, self.bd_cat = interning.step_cat, interning.bd_cat
        self.seq = 0  # rows encoded so far: the order in which slices began
        # ENDs of the open slices, a min-heap on (end ns, -seq) kept by the C encoder: (end, seq, uuid), size
        self.heap = (np.zeros(chunk_rows, np.int64), np.zeros(chunk_rows, np.int64), np.zeros(chunk_rows, np.uint64))
        self.heap_n = 0
        self.out = np.empty(0, np.uint8)  # the encoder's output buffer, reused across batches

    def encode(self, batch: pa.RecordBatch, uuid: np.ndarray, args) -> memoryview:
        """The batch's packets (BEGIN / INSTANT / COUNTER per row, the ENDs due before each) on the wire.

        `args`: the window's event_args from encode_args, or None. The view is valid until the next call.
        """
        n = batch.num_rows
        if len(self.heap[0]) < self.heap_n + n:  # room for every row's END
            cap = 2 * (self.heap_n + n)
            self.heap = tuple(
                np.concatenate([h[: self.heap_n], np.zeros(cap - self.heap_n, h.dtype)]) for h in self.heap
            )
        a_eid, a_blob, a_offs = args if args is not None else _NO_ARGS
        need = n * wire.MAX_ROW_BYTES + (self.heap_n + n) * wire.MAX_END_BYTES + len(a_blob)
        if len(self.out) < need:  # np.empty: pages are touched only as far as packets are written
            self.out = np.empty(need + need // 4, np.uint8)
        cols = tuple(_column(batch, c) for c in STREAM_COLUMNS)
        length, self.heap_n = wire.encode_chunk(
            cols,
            uuid,
            (*self.tables, a_eid, a_offs, a_blob),
            self.flow_lo,
            self.default_uuid,
            self.step_cat,
            self.bd_cat,
            STRING_MASK,
            (*self.heap, self.heap_n),
            self.seq,
            self.out,
        )
        self.seq += n
        return memoryview(self.out)[:length]

    def flush_ends(self) -> bytes:
        """The ENDs of the slices still open, after the last row."""
        out = wire.encode_ends((*self.heap, self.heap_n))
        self.heap_n = 0
        return out

"""XSpace (`.xplane.pb`) at the protobuf wire level, vectorised with numpy.

XSpace stores one nested message per event and per stat, which the standard
runtime turns into one Python object each (about 3 µs per event with stats).
Here the plane "shell" (names, metadata maps, plane stats) goes through the
official classes, but each line's events and their stats are decoded
*level-synchronously*: all events of a line advance one field per numpy step,
then all stats do, so Python runs per field *kind*, not per event. Encoding
(used by the XSpace exporter and the benchmark) is the mirror image: rows of
"pieces" (constant bytes, varints, fixed64, nested blobs) laid out with numpy.

Field numbers come from the generated descriptors of proto/xplane.proto.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profiler import xplane_pb2 as xp

_U8 = np.uint8
_MAX_VARINT = 10


class XSpaceWireError(ValueError):
    """Bytes that are not a valid XSpace encoding (message says where)."""


def _num(msg, name: str) -> int:
    return msg.DESCRIPTOR.fields_by_name[name].number


# Field numbers (from the generated descriptors, so the .proto stays the only source).
SPACE_PLANES, SPACE_HOSTNAMES = _num(xp.XSpace, "planes"), _num(xp.XSpace, "hostnames")
PLANE_LINES = _num(xp.XPlane, "lines")
LINE_EVENTS = _num(xp.XLine, "events")
EV_METADATA_ID, EV_OFFSET_PS = _num(xp.XEvent, "metadata_id"), _num(xp.XEvent, "offset_ps")
EV_DURATION_PS, EV_NUM_OCC = _num(xp.XEvent, "duration_ps"), _num(xp.XEvent, "num_occurrences")
EV_STATS = _num(xp.XEvent, "stats")
ST_METADATA_ID = _num(xp.XStat, "metadata_id")
ST_DOUBLE, ST_UINT64, ST_INT64 = (
    _num(xp.XStat, "double_value"),
    _num(xp.XStat, "uint64_value"),
    _num(xp.XStat, "int64_value"),
)
ST_STR, ST_BYTES, ST_REF = _num(xp.XStat, "str_value"), _num(xp.XStat, "bytes_value"), _num(xp.XStat, "ref_value")

# Stat value kinds in decoded columns.
KIND_INT, KIND_UINT, KIND_DOUBLE, KIND_STR, KIND_BYTES, KIND_REF = 1, 2, 3, 4, 5, 6
_KIND_OF_FIELD = {ST_INT64: KIND_INT, ST_UINT64: KIND_UINT, ST_DOUBLE: KIND_DOUBLE,
                  ST_STR: KIND_STR, ST_BYTES: KIND_BYTES, ST_REF: KIND_REF}  # fmt: skip


def _lite_classes():
    """XPlane/XLine look-alikes whose `events` and `lines` stay raw bytes (same field numbers)."""
    fdp = descriptor_pb2.FileDescriptorProto()
    xp.DESCRIPTOR.CopyToProto(fdp)
    lite = descriptor_pb2.FileDescriptorProto(
        name="scprof_xplane_lite.proto", package="scprof.xplane_lite", syntax="proto3", dependency=[fdp.name]
    )
    by_name = {m.name: m for m in fdp.message_type}
    line = lite.message_type.add()
    line.CopyFrom(by_name["XLine"])
    line.name = "XLineLite"
    for f in line.field:
        if f.name == "events":
            f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            f.ClearField("type_name")
    plane = lite.message_type.add()
    plane.CopyFrom(by_name["XPlane"])
    plane.name = "XPlaneLite"
    del plane.nested_type[:]  # map entries: rebuilt below, pointing at the real messages
    for nested in by_name["XPlane"].nested_type:
        entry = plane.nested_type.add()
        entry.CopyFrom(nested)
        for f in entry.field:
            if f.type_name:
                f.type_name = ".tensorflow.profiler." + f.type_name.rsplit(".", 1)[-1]
    for f in plane.field:
        if f.name == "lines":
            f.type_name = ".scprof.xplane_lite.XLineLite"
        elif f.type_name.startswith(".tensorflow.profiler.XPlane."):
            f.type_name = ".scprof.xplane_lite.XPlaneLite." + f.type_name.rsplit(".", 1)[-1]
        elif f.type_name:
            f.type_name = ".tensorflow.profiler." + f.type_name.rsplit(".", 1)[-1]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    pool.Add(lite)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("scprof.xplane_lite.XPlaneLite")), pool


XPlaneLite, _POOL = _lite_classes()
# Real message classes from the same pool, for the metadata inside XPlaneLite.
XSpaceInPool = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.profiler.XSpace"))


# --------------------------------------------------------------------------- decoding


def read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position of `buf` (padded with >= 10 zero bytes).

    Returns (values as uint64, positions after each varint). One-byte varints (the
    common case for keys, ids and small values) take a single gather.
    """
    b = buf[pos]
    val = (b & 0x7F).astype(np.uint64)
    more = np.flatnonzero(b >= 0x80)
    if not more.size:
        return val, pos + 1
    end = pos + 1
    active = more
    for k in range(1, _MAX_VARINT):
        b = buf[end[active]]
        val[active] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        end[active] += 1
        active = active[b >= 0x80]
        if not active.size:
            return val, end
    raise XSpaceWireError("varint longer than 10 bytes")


@dataclass
class Fields:
    """Fields of many messages decoded in parallel: one row per field occurrence."""

    msg: np.ndarray  # index of the message the field belongs to
    number: np.ndarray  # field number
    wire: np.ndarray  # wire type
    value: np.ndarray  # uint64: varint value, fixed64 bits, or LEN length
    start: np.ndarray  # byte position of the payload (LEN fields, fixed64)


def decode_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, where: str) -> Fields:
    """Walk every message [starts[i], ends[i]) of `buf` one field per round, all at once."""
    parts: list[tuple[np.ndarray, ...]] = []
    pos = starts.astype(np.int64).copy()
    active = np.flatnonzero(pos < ends)
    while active.size:
        key, p = read_varints(buf, pos[active])
        number, wire = (key >> np.uint64(3)).astype(np.int64), (key & np.uint64(7)).astype(np.int64)
        value = np.zeros(len(active), np.uint64)
        payload = p.copy()
        is_var, is_len = wire == 0, wire == 2
        if is_var.any() or is_len.any():
            vl = is_var | is_len
            v, after = read_varints(buf, np.where(vl, p, len(buf) - 1))  # others read the zero pad
            value = np.where(vl, v, value)
            payload = np.where(vl, after, payload)
            p = np.where(is_len, after + v.astype(np.int64), np.where(is_var, after, p))
        fixed64, fixed32 = wire == 1, wire == 5
        if fixed64.any():
            idx = np.flatnonzero(fixed64)
            raw = buf[(p[idx, None] + np.arange(8)).ravel()].reshape(-1, 8)
            value[idx] = raw.copy().view("<u8").ravel()
            p[idx] += 8
        p[fixed32] += 4
        bad = ~(is_var | is_len | fixed64 | fixed32) | (number == 0)
        if bad.any():
            raise XSpaceWireError(f"{where}: invalid field key (wire type {int(wire[bad][0])})")
        if (p > ends[active]).any():
            raise XSpaceWireError(f"{where}: a field runs past the end of its message (cut short or corrupt)")
        parts.append((active, number, wire, value, payload))
        pos[active] = p
        active = active[p < ends[active]]
    if not parts:
        e = np.zeros(0, np.int64)
        return Fields(e, e, e, np.zeros(0, np.uint64), e)
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return Fields(*cols)


@dataclass
class LineEvents:
    """Events of one line (or several lines' events concatenated) as columns."""

    metadata_id: np.ndarray  # int64
    offset_ps: np.ndarray  # int64
    duration_ps: np.ndarray  # int64
    num_occurrences: np.ndarray  # int64 (0 when the event has an offset)
    # Stats, one row each:
    stat_event: np.ndarray  # index of the event
    stat_metadata_id: np.ndarray  # int64
    stat_kind: np.ndarray  # KIND_*
    stat_int: np.ndarray  # int64 value (int64/uint64/ref; uint64 reinterpreted)
    stat_double: np.ndarray  # float64 value
    stat_bytes: list[bytes | None]  # str/bytes payloads, parallel to rows (None elsewhere)


def decode_events(events: list[bytes], where: str) -> LineEvents:
    """Decode a line's events (each one serialized XEvent) into columns."""
    n = len(events)
    lens = np.fromiter(map(len, events), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(b"".join(events) + bytes(_MAX_VARINT + 8), _U8)
    f = decode_fields(buf, starts, ends, where)
    mid = np.zeros(n, np.int64)
    off = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    occ = np.zeros(n, np.int64)
    for number, col in ((EV_METADATA_ID, mid), (EV_OFFSET_PS, off), (EV_DURATION_PS, dur), (EV_NUM_OCC, occ)):
        sel = (f.number == number) & (f.wire == 0)
        col[f.msg[sel]] = f.value[sel].view(np.int64)  # last occurrence wins, as in protobuf
    sel = (f.number == EV_STATS) & (f.wire == 2)
    s_event, s_start = f.msg[sel], f.start[sel]
    s_end = s_start + f.value[sel].astype(np.int64)
    m = len(s_event)
    smid = np.zeros(m, np.int64)
    kind = np.zeros(m, np.int8)
    ival = np.zeros(m, np.int64)
    dval = np.full(m, np.nan)
    sbytes: list[bytes | None] = [None] * m
    slow = _fast_stats(buf, s_start, s_end, smid, kind, ival, dval)
    g = decode_fields(buf, s_start[slow], s_end[slow], where)
    g.msg = slow[g.msg]
    sel = (g.number == ST_METADATA_ID) & (g.wire == 0)
    smid[g.msg[sel]] = g.value[sel].view(np.int64)
    for number, k in _KIND_OF_FIELD.items():
        wire = 1 if k == KIND_DOUBLE else 2 if k in (KIND_STR, KIND_BYTES) else 0
        sel = (g.number == number) & (g.wire == wire)
        if not sel.any():
            continue
        rows = g.msg[sel]
        kind[rows] = k
        if k == KIND_DOUBLE:
            dval[rows] = g.value[sel].view(np.float64)
        elif wire == 0:
            ival[rows] = g.value[sel].view(np.int64)
        else:
            raw = buf.data
            for r, a, ln in zip(rows.tolist(), g.start[sel].tolist(), g.value[sel].tolist(), strict=True):
                sbytes[r] = bytes(raw[a : a + ln])
    return LineEvents(mid, off, dur, occ, s_event, smid, kind, ival, dval, sbytes)


_SCALAR_TAGS = {(ST_INT64 << 3): KIND_INT, (ST_UINT64 << 3): KIND_UINT, (ST_REF << 3): KIND_REF}
_DOUBLE_TAG = ST_DOUBLE << 3 | 1


def _fast_stats(buf, start, end, smid, kind, ival, dval) -> np.ndarray:
    """Decode the common stat layout (1-byte metadata id, then one scalar value) in one pass.

    Fills the outputs for those rows; returns the indices of the other rows, for the
    general decoder.
    """
    simple = (buf[start] == (ST_METADATA_ID << 3)) & (buf[start + 1] < 0x80)
    tag = buf[start + 2]
    out = np.zeros(len(start), bool)
    for t, k in _SCALAR_TAGS.items():
        rows = np.flatnonzero(simple & (tag == t))
        if rows.size:
            v, after = read_varints(buf, start[rows] + 3)
            ok = after == end[rows]
            rows, v = rows[ok], v[ok]
            smid[rows], kind[rows], ival[rows] = buf[start[rows] + 1], k, v.view(np.int64)
            out[rows] = True
    rows = np.flatnonzero(simple & (tag == _DOUBLE_TAG) & (end - start == 11))
    if rows.size:
        raw = buf[(start[rows, None] + 3 + np.arange(8)).ravel()].reshape(-1, 8)
        smid[rows], kind[rows], dval[rows] = buf[start[rows] + 1], KIND_DOUBLE, raw.copy().view("<f8").ravel()
        out[rows] = True
    return np.flatnonzero(~out)


def split_space(data: bytes | memoryview, where: str) -> tuple[list[memoryview], list[str]]:
    """Top level of an XSpace: the plane payloads (as views) and the hostnames."""
    buf = np.frombuffer(bytes(data) if not isinstance(data, bytes) else data, _U8)
    padded = np.concatenate([buf, np.zeros(_MAX_VARINT + 8, _U8)])
    f = decode_fields(padded, np.array([0]), np.array([len(buf)]), where)
    mv = memoryview(data)
    planes, hosts = [], []
    for number, wire, value, start in zip(
        f.number.tolist(), f.wire.tolist(), f.value.tolist(), f.start.tolist(), strict=True
    ):
        if wire != 2:
            continue
        if number == SPACE_PLANES:
            planes.append(mv[start : start + value])
        elif number == SPACE_HOSTNAMES:
            try:
                hosts.append(bytes(mv[start : start + value]).decode())
            except UnicodeDecodeError:
                raise XSpaceWireError(f"{where}: hostname is not UTF-8") from None
    return planes, hosts


# --------------------------------------------------------------------------- encoding


def varint_len(v: np.ndarray) -> np.ndarray:
    """Bytes of the varint encoding of each uint64 value."""
    v = v.astype(np.uint64)
    n = np.ones(len(v), np.int64)
    for k in range(1, _MAX_VARINT):
        n += v >= np.uint64(1) << np.uint64(7 * k)
    return n


def encode_rows(n: int, pieces: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """Lay out `n` rows, each the concatenation of `pieces`; returns (bytes as uint8, row offsets).

    A piece is ("const", bytes, mask|None), ("varint", values, mask|None),
    ("fixed64", float64 or int64 values, mask|None) or ("blob", uint8 buffer, offsets (n+1)).
    A masked-out piece contributes no bytes to that row.
    """
    sizes = []
    for p in pieces:
        kind, data = p[0], p[1]
        if kind == "blob":
            size = np.diff(data[1]).astype(np.int64)
        elif kind == "const":
            size = np.full(n, len(data), np.int64)
        elif kind == "varint":
            size = varint_len(data.astype(np.int64).view(np.uint64) if data.dtype.kind == "i" else data)
        else:
            size = np.full(n, 8, np.int64)
        if kind != "blob" and p[2] is not None:
            size = np.where(p[2], size, 0)
        sizes.append(size)
    row_len = np.sum(sizes, axis=0) if sizes else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(row_len, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), _U8)
    at = offsets[:-1].copy()
    for p, size in zip(pieces, sizes, strict=True):
        kind, data = p[0], p[1]
        rows = np.flatnonzero(size)
        pos = at[rows]
        if kind == "const":
            for j, byte in enumerate(data):
                out[pos + j] = byte
        elif kind == "varint":
            v = (data.astype(np.int64).view(np.uint64) if data.dtype.kind == "i" else data.astype(np.uint64))[rows]
            k = 0
            live = np.arange(len(rows))
            while live.size:
                byte = (v[live] & np.uint64(0x7F)).astype(_U8)
                v[live] >>= np.uint64(7)
                more = v[live] > 0
                out[pos[live] + k] = byte | np.where(more, 0x80, 0).astype(_U8)
                live = live[more]
                k += 1
        elif kind == "fixed64":
            raw = np.ascontiguousarray(data[rows]).view(_U8).reshape(-1, 8)
            out[(pos[:, None] + np.arange(8)).ravel()] = raw.ravel()
        else:  # blob: copy each row's slice of the source buffer
            src, src_off = data
            total = int(size.sum())
            if total:
                starts = src_off[:-1][rows]
                lens = size[rows]
                rep = np.repeat(np.arange(len(rows)), lens)
                within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
                out[pos[rep] + within] = src[starts[rep] + within]
        at += size
    return out, offsets


def key(number: int, wire: int) -> bytes:
    """Encoded field key."""
    return encode_varint(number << 3 | wire)


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def message_pieces(number: int, blob: tuple[np.ndarray, np.ndarray]) -> list[tuple]:
    """Pieces writing a nested message field (key, length, payload) from encoded rows."""
    return [("const", key(number, 2), None), ("varint", np.diff(blob[1]).astype(np.uint64), None), ("blob", blob)]

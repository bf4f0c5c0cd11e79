"""XSpace's protobuf wire format as the numpy decoders and the encoder see it.

Field numbers (from the generated descriptors of proto/xplane.proto, so the .proto stays the
only source), the kinds of stat values in decoded columns, and the level-synchronous field
walker: many messages decoded in parallel, one field of each per numpy step. Shared by the
decoders (profiler/xplane_layout.py, xplane_general.py, xplane_wire.py) and the XSpace
exporter (exporters/xspace.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler import xplane_pb2 as xp

MAX_VARINT = 10  # bytes of the longest varint


class XSpaceWireError(ValueError):
    """Bytes that are not a valid XSpace encoding (message says where)."""


def _num(msg, name: str) -> int:
    return msg.DESCRIPTOR.fields_by_name[name].number


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
KIND_OF_FIELD = {ST_INT64: KIND_INT, ST_UINT64: KIND_UINT, ST_DOUBLE: KIND_DOUBLE,
                 ST_STR: KIND_STR, ST_BYTES: KIND_BYTES, ST_REF: KIND_REF}  # fmt: skip


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
    for k in range(1, MAX_VARINT):
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

"""XSpace's protobuf wire format: field numbers, the field walker, the top level of a file.

The one place the XSpace import reads the wire format in Python (varints: profiler/wire.py's
`read_varints`). Field numbers come from the generated descriptors of proto/xplane.proto, so the
.proto stays the only source (the C walks' copies in _wire.h are checked against them at import).
`decode_fields` walks many messages in parallel, one field of each per numpy step; `split_space`
reads a file's top level (planes, hostnames); `XPlaneLite`/`XLineLite` parse a plane's own fields
with protobuf while its lines' events stay raw bytes. Used by both decoders (decode_native.py,
decode_python.py), the encoder (encode.py) and the XSpace exporters (exporters/xspace*.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profiler.wire import MAX_VARINT, WireError, read_varints
from profiler.xspace import xplane_pb2 as xp

_U8 = np.uint8
PAD = MAX_VARINT + 8  # zero bytes the numpy walks may read past a buffer's end


class XSpaceWireError(WireError):
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
KIND_OF_FIELD = {
    ST_INT64: KIND_INT,
    ST_UINT64: KIND_UINT,
    ST_DOUBLE: KIND_DOUBLE,
    ST_STR: KIND_STR,
    ST_BYTES: KIND_BYTES,
    ST_REF: KIND_REF,
}


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


def _lite_classes():
    """XPlane/XLine look-alikes whose lines' `events` stay raw bytes (same field numbers)."""
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
    return tuple(get(pool.FindMessageTypeByName(f"scprof.xplane_lite.{m}")) for m in ("XPlaneLite", "XLineLite")) + (
        pool,
    )


# The pool stays referenced: its descriptors back the classes.
XPlaneLite, XLineLite, _POOL = _lite_classes()


def split_space(
    data: bytes | memoryview, where: str, padded: np.ndarray | None = None
) -> tuple[list[memoryview], list[str]]:
    """Top level of an XSpace: the plane payloads (as views of `data`) and the hostnames.

    `padded`: the same bytes followed by PAD zero bytes, when the caller has them (else copied).
    """
    buf = np.frombuffer(data, _U8)
    if padded is None:
        padded = np.concatenate([buf, np.zeros(PAD, _U8)])
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

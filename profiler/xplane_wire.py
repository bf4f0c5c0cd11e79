"""XSpace (`.xplane.pb`) decoding at the protobuf wire level: the import's entry point.

XSpace stores one nested message per event and per stat, which the standard runtime turns
into one Python object each (about 3 µs per event with stats). Here the plane "shell" (names,
metadata maps, plane stats) goes through generated classes whose `events` stay raw bytes
(`XPlaneLite`), and each line's events are decoded into numpy columns (`LineEvents`). Most lines
go to the native decoder (profiler/xplane_native.py, in C), straight from the plane's bytes; the
lines it leaves (a group in the plane, malformed bytes) are decoded here, two ways:

- the *layout* decoder (profiler/xplane_layout.py): events matched, all at once, against the
  field layout of a first event and read column by column;
- the *general* decoder (profiler/xplane_general.py), for the events no layout fits, which
  names what is wrong with a malformed event.

Python runs per layout and per field kind, never per event or per stat. The encoder, the
mirror image, is profiler/xplane_encode.py; field numbers are in profiler/xplane_fields.py.
"""

from __future__ import annotations

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profiler import xplane_pb2 as xp
from profiler.xplane_columns import ColumnSink, LineEvents, concat
from profiler.xplane_fields import MAX_VARINT, SPACE_HOSTNAMES, SPACE_PLANES, XSpaceWireError, decode_fields
from profiler.xplane_general import decode_general
from profiler.xplane_layout import decode_templates

_U8 = np.uint8
_CHUNK_EVENTS = 1 << 18  # events decoded together (bounds the index matrices' memory)
PAD = MAX_VARINT + 8  # zero bytes the numpy decoders may read past a buffer's end


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


def decode_events(events, where: str, fast: bool = True) -> LineEvents:
    """Decode a line's events (a sequence of serialized XEvents) into columns.

    `fast=False` uses only the level-synchronous general decoder (the reference the
    tests and the benchmark compare the fast path with).
    """
    evs = list(events)
    parts = [_decode_chunk(evs[i : i + _CHUNK_EVENTS], where, fast) for i in range(0, len(evs), _CHUNK_EVENTS)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        parts = [_decode_chunk([], where, fast)]
    return concat(parts)


def _decode_chunk(evs: list[bytes], where: str, fast: bool) -> LineEvents:
    n = len(evs)
    lens = np.fromiter(map(len, evs), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(b"".join(evs) + bytes(PAD), _U8)
    out = ColumnSink(n)
    todo = decode_templates(buf, starts, ends, out) if fast and n else np.arange(n)
    if todo.size:
        decode_general(buf, starts, ends, todo, out, where)
    return out.finish(buf)


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

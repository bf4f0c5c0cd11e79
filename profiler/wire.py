"""Protobuf wire encoding of columnar batches straight from and into numpy.

Every repeated field of a batch message (EventBatch, CounterBatch, ...) is packed
and fixed-width, so its wire payload *is* the little-endian array: encoding is
`tobytes()` behind a tag and a length, decoding is `np.frombuffer`. The field
layout is read from the generated message descriptors, so the `.proto` stays the
only definition. The official protobuf classes read and write the same bytes
(tested); they are the fallback for encodings this fast path does not take.

Every varint the Python code reads or writes goes through here: `read_varint`/`encode_varint`
for one value, `read_varints`/`varint_len`/`write_varints` for numpy arrays of them (the XSpace
import's field walker, profiler/xspace/wire.py, and its encoder, profiler/xspace/encode.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor

NULL_I32 = np.iinfo(np.int32).min
NULL_I64 = np.iinfo(np.int64).min

_DTYPES = {
    FieldDescriptor.TYPE_FIXED32: np.dtype("<u4"),
    FieldDescriptor.TYPE_SFIXED32: np.dtype("<i4"),
    FieldDescriptor.TYPE_FIXED64: np.dtype("<u8"),
    FieldDescriptor.TYPE_SFIXED64: np.dtype("<i8"),
    FieldDescriptor.TYPE_DOUBLE: np.dtype("<f8"),
    FieldDescriptor.TYPE_FLOAT: np.dtype("<f4"),
}
_WIRETYPE_LEN = 2
MAX_VARINT = 10  # bytes of the longest varint


class WireError(ValueError):
    """Bytes that are not the protobuf encoding they claim to be."""


@dataclass(frozen=True)
class Column:
    """One packed column of a batch message."""

    name: str
    number: int
    dtype: np.dtype
    tag: bytes  # encoded key of the packed (length-delimited) field


def columns_of(descriptor: Descriptor) -> dict[str, Column]:
    """The packed fixed-width columns of a batch message, by field name."""
    out = {}
    for f in descriptor.fields:
        if f.type not in _DTYPES or not f.is_repeated:
            raise TypeError(f"{descriptor.full_name}.{f.name} is not a packed fixed-width column")
        out[f.name] = Column(f.name, f.number, _DTYPES[f.type], encode_varint(f.number << 3 | 2))
    return out


def encode_varint(value: int) -> bytes:
    """Base-128 varint of an int; negative values as their 64-bit two's complement (int64 fields)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a varint at buf[pos]; returns (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


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
    raise WireError("varint longer than 10 bytes")


def varint_len(v: np.ndarray) -> np.ndarray:
    """Bytes of the varint encoding of each uint64 value."""
    v = v.astype(np.uint64)
    n = np.ones(len(v), np.int64)
    for k in range(1, MAX_VARINT):
        n += v >= np.uint64(1) << np.uint64(7 * k)
    return n


def write_varints(out: np.ndarray, pos: np.ndarray, v: np.ndarray) -> None:
    """Write the varint of each uint64 `v[i]` into the uint8 array `out` from `pos[i]` (room made
    with varint_len); `v` is consumed."""
    k = 0
    live = np.arange(len(v))
    while live.size:
        byte = (v[live] & np.uint64(0x7F)).astype(np.uint8)
        v[live] >>= np.uint64(7)
        more = v[live] > 0
        out[pos[live] + k] = byte | np.where(more, 0x80, 0).astype(np.uint8)
        live = live[more]
        k += 1


def encode_batch(columns: dict[str, Column], values: dict[str, np.ndarray]) -> bytes:
    """Serialize numpy columns as the batch message (absent or empty columns are skipped)."""
    parts = []
    for name, col in columns.items():
        arr = values.get(name)
        if arr is None or len(arr) == 0:
            continue
        data = np.ascontiguousarray(arr, dtype=col.dtype).tobytes()
        parts += [col.tag, encode_varint(len(data)), data]
    return b"".join(parts)


def decode_batch(
    columns: dict[str, Column], buf: bytes | memoryview, start: int = 0, end: int | None = None
) -> dict[str, np.ndarray] | None:
    """Decode a batch message into numpy columns (views on `buf` where possible).

    Returns None when the bytes use an encoding this fast path does not handle
    (e.g. unpacked repeated fields from another writer); the caller then falls
    back to the official protobuf classes. Unknown fields are skipped, as
    protobuf requires.
    """
    end = len(buf) if end is None else end
    by_number = {c.number: c for c in columns.values()}
    found: dict[str, list[np.ndarray]] = {}
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        col = by_number.get(number)
        if wire_type == _WIRETYPE_LEN:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError(f"field {number} runs past the end of its message")
            if col is not None:
                if length % col.dtype.itemsize:
                    raise WireError(
                        f"packed field {col.name} has {length} bytes, not a multiple of {col.dtype.itemsize}"
                    )
                found.setdefault(col.name, []).append(np.frombuffer(buf, col.dtype, length // col.dtype.itemsize, pos))
            pos += length
        elif col is not None:
            return None  # unpacked encoding of a known column: let protobuf decode it
        elif wire_type == 0:
            _, pos = read_varint(buf, pos, end)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire_type} for field {number}")
    if pos != end:
        raise WireError("message ends inside a field")
    return {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in found.items()}


def decode_batch_with_protobuf(columns: dict[str, Column], message_cls, data: bytes) -> dict[str, np.ndarray]:
    """Slow but general path: parse with the official classes, then convert to numpy."""
    msg = message_cls.FromString(bytes(data))
    out = {}
    for name, col in columns.items():
        field = getattr(msg, name)
        if len(field):
            out[name] = np.array(field, dtype=col.dtype)
    return out

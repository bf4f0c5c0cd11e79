"""Protobuf messages encoded one per row, straight from numpy columns.

Exporters that write millions of small messages (Perfetto's TracePacket: one
per slice begin, end and counter sample) cannot afford a Python object per
message. A `Rows` declares the fields of one message type for n rows at once,
each field a column with an optional presence mask; `encode()` computes every
row's size bottom-up, then writes all fields of all rows with vectorised numpy
scatters into one buffer. Declared in field-number order, the bytes are exactly
what the official protobuf classes serialize (tests/exporters/test_rowwire.py).

    pkt = Rows(n)
    pkt.varint(8, timestamps)                 # TracePacket.timestamp
    ev = Rows(n)
    ev.varint(9, types)                       # TrackEvent.type
    pkt.message(11, ev)                       # TracePacket.track_event
    data, offsets = Rows(n).message(1, pkt).encode()   # Trace.packet, n times

Only the encodings exporters need are here: varint (uint64, and int64 as two's
complement), fixed64 (double/fixed64), constant pre-encoded bytes, per-row bytes
(strings, pre-encoded field runs) and nested messages.
"""

from __future__ import annotations

import numpy as np

_U64 = np.uint64


def encode_varint(value: int) -> bytes:
    """Base-128 varint of a non-negative int below 2**64."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    """Encoded key of a field."""
    return encode_varint(field << 3 | wire_type)


def varint_sizes(v: np.ndarray) -> np.ndarray:
    """Encoded size in bytes (1..10) of each uint64 value."""
    n = np.ones(len(v), np.int64)
    if len(v) == 0:
        return n
    vmax = int(v.max())
    for k in range(1, 10):
        t = 1 << (7 * k)
        if t > vmax:
            break
        n += v >= _U64(t)
    return n


def put_varints(buf: np.ndarray, pos: np.ndarray, v: np.ndarray, sizes: np.ndarray) -> None:
    """Write varints of uint64 `v` (with precomputed `sizes`) at byte offsets `pos`."""
    if len(v) == 0:
        return
    lo, hi = int(sizes.min()), int(sizes.max())
    if hi == 1:  # the common case of small ids: one byte, no continuation bit
        buf[pos] = v.astype(np.uint8)
        return
    x = v.copy()
    for k in range(hi):
        byte = (x & _U64(0x7F)).astype(np.uint8)
        if k < lo - 1:  # every value continues
            buf[pos + k] = byte | 0x80
        elif k == hi - 1 and lo == hi:  # every value ends here
            buf[pos + k] = byte
        elif k < lo:  # every value has this byte; some end here
            buf[pos + k] = byte | ((sizes > k + 1).astype(np.uint8) << 7)
        else:
            sel = sizes > k
            buf[pos[sel] + k] = byte[sel] | ((sizes[sel] > k + 1).astype(np.uint8) << 7)
        x >>= _U64(7)


def put_const(buf: np.ndarray, pos: np.ndarray, data: bytes) -> None:
    """Write the same bytes at every offset in `pos`."""
    for j, b in enumerate(data):
        buf[pos + j] = b


def as_u64(values: np.ndarray) -> np.ndarray:
    """Column as uint64 for varint encoding; negative int64 become two's complement (10 bytes)."""
    a = np.asarray(values)
    if a.dtype == _U64:
        return a
    if a.dtype.kind == "i":
        return a.astype(np.int64, copy=False).view(_U64)
    return a.astype(_U64)


class _Part:
    """One field (or run of fields) of a message, for the rows where it is present."""

    __slots__ = ("idx", "sizes")

    idx: np.ndarray | None  # rows that have it; None = all rows
    sizes: np.ndarray  # bytes per present row

    def write(self, buf: np.ndarray, pos: np.ndarray) -> None:  # pos: offsets of the present rows
        raise NotImplementedError


class _Varint(_Part):
    __slots__ = ("key", "v", "vs")

    def __init__(self, key: bytes, v: np.ndarray, idx: np.ndarray | None):
        self.key, self.v, self.idx = key, v, idx
        self.vs = varint_sizes(v)
        self.sizes = self.vs + len(key)

    def write(self, buf, pos):
        put_const(buf, pos, self.key)
        put_varints(buf, pos + len(self.key), self.v, self.vs)


class _Fixed64(_Part):
    __slots__ = ("key", "v")

    def __init__(self, key: bytes, v: np.ndarray, idx: np.ndarray | None):
        self.key, self.idx = key, idx
        self.v = np.ascontiguousarray(v).view(np.uint8).reshape(-1, 8)
        self.sizes = np.full(len(v), len(key) + 8, np.int64)

    def write(self, buf, pos):
        put_const(buf, pos, self.key)
        p = pos + len(self.key)
        buf[(p[:, None] + np.arange(8)).ravel()] = self.v.ravel()


class _Const(_Part):
    __slots__ = ("data",)

    def __init__(self, data: bytes, n: int, idx: np.ndarray | None):
        self.data, self.idx = data, idx
        self.sizes = np.full(n, len(data), np.int64)

    def write(self, buf, pos):
        put_const(buf, pos, self.data)


class _Blob(_Part):
    """Per-row bytes: row i is data[starts[i]:starts[i] + lens[i]] (optionally behind a key and length)."""

    __slots__ = ("key", "data", "starts", "lens", "ls")

    def __init__(self, key: bytes | None, data: np.ndarray, starts: np.ndarray, lens: np.ndarray,
                 idx: np.ndarray | None):
        self.key, self.data, self.idx = key, data, idx
        self.starts = starts.astype(np.int64, copy=False)
        self.lens = lens.astype(np.int64, copy=False)
        if key is None:
            self.ls = None
            self.sizes = self.lens
        else:
            self.ls = varint_sizes(self.lens.astype(_U64))
            self.sizes = len(key) + self.ls + self.lens

    def write(self, buf, pos):
        if self.key is not None:
            put_const(buf, pos, self.key)
            put_varints(buf, pos + len(self.key), self.lens.astype(_U64), self.ls)
            pos = pos + len(self.key) + self.ls
        total = int(self.lens.sum())
        if total == 0:
            return
        t = np.arange(total) - np.repeat(np.cumsum(self.lens) - self.lens, self.lens)
        buf[np.repeat(pos, self.lens) + t] = self.data[np.repeat(self.starts, self.lens) + t]


class _Message(_Part):
    __slots__ = ("key", "sub", "inner", "ls")

    def __init__(self, key: bytes, sub: Rows, idx: np.ndarray | None):
        self.key, self.sub, self.idx = key, sub, idx
        self.inner = sub.sizes()
        self.ls = varint_sizes(self.inner.astype(_U64))
        self.sizes = len(key) + self.ls + self.inner

    def write(self, buf, pos):
        put_const(buf, pos, self.key)
        put_varints(buf, pos + len(self.key), self.inner.astype(_U64), self.ls)
        self.sub.write_into(buf, pos + len(self.key) + self.ls)


def _select(present: np.ndarray | None) -> np.ndarray | None:
    if present is None:
        return None
    present = np.asarray(present, dtype=bool)
    return None if present.all() else np.flatnonzero(present)


class Rows:
    """n messages of one type, declared field by field in wire order."""

    def __init__(self, n: int):
        self.n = n
        self._parts: list[_Part] = []
        self._sizes: np.ndarray | None = None

    def _pick(self, values: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
        if len(values) != self.n:
            raise ValueError(f"column has {len(values)} values for {self.n} rows")
        return values if idx is None else values[idx]

    def varint(self, field: int, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """uint32/64, int32/64 (two's complement), enum or bool field."""
        idx = _select(present)
        self._parts.append(_Varint(tag(field, 0), self._pick(as_u64(values), idx), idx))
        return self

    def fixed64(self, field: int, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """double, fixed64 or sfixed64 field (values as float64 / uint64 / int64)."""
        idx = _select(present)
        v = np.asarray(values)
        if v.dtype.itemsize != 8:
            raise TypeError("fixed64 needs an 8-byte column")
        self._parts.append(_Fixed64(tag(field, 1), self._pick(v, idx), idx))
        return self

    def const(self, encoded: bytes, present: np.ndarray | None = None) -> Rows:
        """Pre-encoded field(s), the same for every present row."""
        idx = _select(present)
        self._parts.append(_Const(encoded, self.n if idx is None else len(idx), idx))
        return self

    def raw(self, data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> Rows:
        """Pre-encoded fields per row: row i gets data[starts[i]:starts[i] + lens[i]] (may be empty)."""
        if len(starts) != self.n or len(lens) != self.n:
            raise ValueError("raw(): need n starts and n lengths")
        self._parts.append(_Blob(None, data, starts, lens, None))
        return self

    def bytes(self, field: int, data: np.ndarray, offsets: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """string/bytes field: row i's value is data[offsets[i]:offsets[i+1]]."""
        idx = _select(present)
        if len(offsets) != self.n + 1:
            raise ValueError("bytes(): need n + 1 offsets")
        offsets = np.asarray(offsets, np.int64)
        starts, lens = offsets[:-1], np.diff(offsets)
        if idx is not None:
            starts, lens = starts[idx], lens[idx]
        self._parts.append(_Blob(tag(field, 2), data, starts, lens, idx))
        return self

    def message(self, field: int, sub: Rows, present: np.ndarray | None = None) -> Rows:
        """Nested message field; `sub` holds one message per present row, in row order."""
        idx = _select(present)
        if sub.n != (self.n if idx is None else len(idx)):
            raise ValueError("message(): sub-message rows differ from the present rows")
        self._parts.append(_Message(tag(field, 2), sub, idx))
        return self

    def sizes(self) -> np.ndarray:
        """Encoded size of each row's message."""
        if self._sizes is None:
            total = np.zeros(self.n, np.int64)
            for p in self._parts:
                if p.idx is None:
                    total += p.sizes
                else:
                    total[p.idx] += p.sizes
            self._sizes = total
        return self._sizes

    def write_into(self, buf: np.ndarray, pos: np.ndarray) -> None:
        """Write row i's message at offset pos[i]."""
        cur = pos.copy()
        for p in self._parts:
            if p.idx is None:
                p.write(buf, cur)
                cur += p.sizes
            else:
                at = cur[p.idx]
                p.write(buf, at)
                cur[p.idx] = at + p.sizes

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """All rows serialized back to back: (uint8 buffer, n + 1 offsets)."""
        sizes = self.sizes()
        offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        buf = np.zeros(int(offsets[-1]), np.uint8)
        self.write_into(buf, offsets[:-1])
        return buf, offsets

"""Protobuf messages encoded one per row, straight from numpy columns.

Exporters that write millions of small messages (Perfetto's TracePacket: one
per slice begin, end and counter sample) cannot afford a Python object per
message. A `Rows` declares the fields of one message type for n rows at once,
each field a column of n values with an optional presence mask; nested
messages are declared on a child `Rows` of the same n rows. Declared in
field-number order, the bytes are exactly what the official protobuf classes
serialize (tests/exporters/test_rowwire.py).

    pkt = Rows(n)
    pkt.varint(8, timestamps)                 # TracePacket.timestamp
    ev = Rows(n)
    ev.varint(9, types)                       # TrackEvent.type
    pkt.message(11, ev)                       # TracePacket.track_event
    data, offsets = Rows(n).message(1, pkt).encode()   # Trace.packet, n times

How it is fast: the fields of a row are cut into *slots* of at most 8 bytes
(consecutive constants and varints whose widest value in this batch fits share
a slot; constant bytes such as tags and interned ids cost nothing per row).
Each slot is one uint64 word per row, built with a few vectorised shifts, and
its size. Every row is then written with one scatter of 8-byte words at
unaligned byte offsets, in ascending offset order: a word spills up to 7 bytes
past its slot, into bytes that a later word of the same or the next row
overwrites. Per-row byte strings (`bytes`, `raw`) are holes in that layout,
filled exactly afterwards. `encode_rows` interleaves several message types
(e.g. slice BEGIN and END packets) in one given order with the same scatter.

Only the encodings exporters need are here: varint (uint64, and int64 as two's
complement), fixed64 (double/fixed64), constant pre-encoded bytes, per-row bytes
(strings, pre-encoded field runs) and nested messages.
"""

from __future__ import annotations

import numpy as np

from profiler.wire import encode_varint

_U64 = np.uint64
_SLACK = 8  # bytes past the end of a buffer that the last word may spill into
_MASK8 = np.array([(1 << (8 * s)) - 1 for s in range(9)], np.uint64)  # low s bytes set
# continuation bits of a varint of s bytes: bytes 0..s-2 have 0x80 (first 8 bytes / the 9th byte)
_CONT_LO = np.array([sum(0x80 << (8 * b) for b in range(min(s - 1, 8))) for s in range(1, 11)], np.uint64)
_CONT_HI = np.array([0x80 if s > 9 else 0 for s in range(1, 11)], np.uint64)


def tag(field: int, wire_type: int) -> bytes:
    """Encoded key of a field."""
    return encode_varint(field << 3 | wire_type)


def varint_size(v: int) -> int:
    return len(encode_varint(v))


def varint_sizes(v: np.ndarray, vmax: int | None = None) -> np.ndarray:
    """Encoded size in bytes (1..10) of each uint64 value (`vmax`: an upper bound, if known)."""
    n = np.ones(len(v), np.int64)
    if len(v) == 0:
        return n
    vmax = int(v.max()) if vmax is None else vmax
    for k in range(1, 10):
        t = 1 << (7 * k)
        if t > vmax:
            break
        n += v >= _U64(t)
    return n


def as_u64(values: np.ndarray) -> np.ndarray:
    """Column as uint64 for varint encoding; negative int64 become two's complement (10 bytes)."""
    a = np.asarray(values)
    if a.dtype == _U64:
        return a
    if a.dtype.kind == "i":
        return a.astype(np.int64, copy=False).view(_U64)
    return a.astype(_U64)


def _pack_varints(v: np.ndarray, vmax: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, int]:
    """Varints of `v` as little-endian words: (bytes 0-7, bytes 8-9 or None, sizes, max size)."""
    smax = varint_size(vmax)
    if smax == 1:
        return v, None, np.ones(len(v), np.int64), 1
    sizes = varint_sizes(v, vmax)
    lo = v & _U64(0x7F)
    t = np.empty_like(v)
    for k in range(1, min(smax, 8)):
        np.left_shift(v, _U64(k), out=t)
        t &= _U64(0x7F << (8 * k))
        lo |= t
    lo |= _CONT_LO[sizes - 1]
    hi = None
    if smax > 8:
        hi = (v >> _U64(56)) & _U64(0x7F)
        hi |= (v >> _U64(63)) << _U64(8)
        hi |= _CONT_HI[sizes - 1]
    return lo, hi, sizes, smax


class _Piece:
    """At most 8 bytes of a row: a word per row (or a constant) and its size per row (or a constant)."""

    __slots__ = ("word", "size", "width", "present")

    def __init__(self, word, size, width: int, present: np.ndarray | None):
        self.word, self.size, self.width, self.present = word, size, width, present


class _Hole:
    """Per-row bytes written exactly after the words: row i gets data[starts[i]:starts[i] + lens[i]]."""

    __slots__ = ("data", "starts", "lens", "present")

    def __init__(self, data: np.ndarray, starts: np.ndarray, lens: np.ndarray, present: np.ndarray | None):
        self.data, self.starts, self.lens, self.present = data, starts, lens, present


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


class Rows:
    """n messages of one type, declared field by field in wire order; columns have n values."""

    def __init__(self, n: int):
        self.n = n
        self._items: list[tuple] = []

    def _check(self, values, what: str) -> None:
        if len(values) != self.n:
            raise ValueError(f"{what}: column has {len(values)} values for {self.n} rows")

    def varint(self, field: int, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """uint32/64, int32/64 (two's complement), enum or bool field."""
        self._check(values, "varint()")
        self._items.append(("varint", tag(field, 0), as_u64(values), _mask(present)))
        return self

    def fixed64(self, field: int, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """double, fixed64 or sfixed64 field (values as float64 / uint64 / int64)."""
        self._check(values, "fixed64()")
        v = np.asarray(values)
        if v.dtype.itemsize != 8:
            raise TypeError("fixed64 needs an 8-byte column")
        self._items.append(("fixed64", tag(field, 1), np.ascontiguousarray(v).view(_U64), _mask(present)))
        return self

    def const(self, encoded: bytes, present: np.ndarray | None = None) -> Rows:
        """Pre-encoded field(s), the same for every present row."""
        self._items.append(("const", bytes(encoded), None, _mask(present)))
        return self

    def raw(self, data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> Rows:
        """Pre-encoded fields per row: row i gets data[starts[i]:starts[i] + lens[i]] (may be empty)."""
        if len(starts) != self.n or len(lens) != self.n:
            raise ValueError("raw(): need n starts and n lengths")
        self._items.append(("raw", None, (data, np.asarray(starts, np.int64), np.asarray(lens, np.int64)), None))
        return self

    def bytes(self, field: int, data: np.ndarray, offsets: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """string/bytes field: row i's value is data[offsets[i]:offsets[i+1]]."""
        if len(offsets) != self.n + 1:
            raise ValueError("bytes(): need n + 1 offsets")
        offsets = np.asarray(offsets, np.int64)
        present = _mask(present)
        lens = np.diff(offsets)
        self._items.append(("varint", tag(field, 2), lens.astype(_U64), present))
        self._items.append(("raw", None, (data, offsets[:-1], lens), present))
        return self

    def message(self, field: int, sub: Rows, present: np.ndarray | None = None) -> Rows:
        """Nested message field; `sub` declares it for the same n rows (absent rows are ignored)."""
        if sub.n != self.n:
            raise ValueError(f"message(): sub-message has {sub.n} rows for {self.n}")
        self._items.append(("message", tag(field, 2), sub, _mask(present)))
        return self

    # -- layout -----------------------------------------------------------------------------

    def _pieces(self, present: np.ndarray | None, out: list):
        """Append this message's pieces and holes to `out`; returns its size per row (int if constant).

        A piece's word and size are those of a present row (whatever they are elsewhere);
        `present` is applied once per slot. Sizes are exact where `present` holds.
        """
        total = 0
        for kind, key, data, own in self._items:
            pres = present if own is None else (own if present is None else present & own)
            if own is not None and not pres.any():
                continue
            if kind == "const":
                _const_pieces(key, pres, out)
                size = len(key)
            elif kind == "varint":
                size = _varint_pieces(key, data, pres, out)
            elif kind == "fixed64":
                _const_pieces(key, pres, out)
                out.append(_Piece(data, 8, 8, pres))
                size = len(key) + 8
            elif kind == "raw":
                d, starts, lens = data
                out.append(_Hole(d, starts, lens, pres))
                size = lens
            else:  # message: header (tag + length) before the content, whose size is known only after it
                at = len(out)
                inner = data._pieces(pres, out)
                head: list = []
                inner_v = np.full(self.n, inner, _U64) if isinstance(inner, int) else inner.astype(_U64)
                size = _varint_pieces(key, inner_v, pres, head) + inner
                out[at:at] = head
            total = total + (size if own is None else size * own)
        return total

    def sizes(self) -> np.ndarray:
        """Encoded size of each row's message."""
        return self._pieces(None, [])

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """All rows serialized back to back: (uint8 buffer, n + 1 offsets)."""
        return encode_rows([(self, np.arange(self.n))], with_offsets=True)


def _mask(present) -> np.ndarray | None:
    if present is None:
        return None
    present = np.asarray(present, dtype=bool)
    return None if present.all() else present


def _const_pieces(data: bytes, pres: np.ndarray | None, out: list) -> None:
    for i in range(0, len(data), 8):
        chunk = data[i:i + 8]
        out.append(_Piece(int.from_bytes(chunk, "little"), len(chunk), len(chunk), pres))


def _varint_pieces(key: bytes, v: np.ndarray, pres: np.ndarray | None, out: list):
    """Pieces of `key` + varint(v); returns the size per row."""
    vmax = int(v.max() if pres is None else v.max(where=pres, initial=0)) if len(v) else 0
    lo, hi, sizes, smax = _pack_varints(v, vmax)
    _const_pieces(key, pres, out)
    if hi is None:
        out.append(_Piece(lo, sizes if smax > 1 else 1, smax, pres))
    else:
        out.append(_Piece(lo, np.minimum(sizes, 8), 8, pres))
        out.append(_Piece(hi, np.maximum(sizes - 8, 0), smax - 8, pres))
    return (sizes if smax > 1 else 1) + len(key)


def _slots(pieces: list, n: int):
    """Pieces packed into slots of <= 8 bytes: (words (F, n) uint64, sizes (F, n) int64, holes by slot).

    A slot takes consecutive pieces under the same presence while their widest sizes fit in 8
    bytes; its size is zero in rows where it is absent.
    """
    words: list = []
    sizes: list = []
    holes: list[tuple[int, _Hole]] = []
    cur: list = []  # [word, size, width, pres]

    def close():
        if cur:
            w, sz, _, pres = cur
            words.append(w)
            sizes.append(sz if pres is None else sz * pres)
            cur.clear()

    for p in pieces:
        if isinstance(p, _Hole):
            close()
            holes.append((len(words), p))
            words.append(0)
            sizes.append(p.lens if p.present is None else p.lens * p.present)
        elif cur and cur[3] is p.present and cur[2] + p.width <= 8:
            w, sz, width, pres = cur
            if isinstance(sz, int) and isinstance(w, int) and isinstance(p.word, int):
                word = w | (p.word << (8 * sz))
            else:
                shift = _U64(8 * sz) if isinstance(sz, int) else (sz * 8).astype(_U64)
                pw = _U64(p.word) if isinstance(p.word, int) else p.word
                word = (_U64(w) if isinstance(w, int) else w) | (pw << shift)
            cur[:] = [word, sz + p.size, width + p.width, pres]
        else:
            close()
            cur[:] = [p.word, p.size, p.width, p.present]
    close()
    W = np.empty((len(words), n), _U64)
    S = np.empty((len(words), n), np.int64)
    for i, (w, s) in enumerate(zip(words, sizes, strict=True)):
        W[i] = w
        S[i] = s
    return W, S, holes


def encode_rows(parts: list[tuple[Rows, np.ndarray]], with_offsets: bool = False):
    """Rows of several messages interleaved: part (rows, order) puts its row i at output row order[i].

    The orders together must be a permutation of 0..R-1. Returns the uint8 buffer (and, with
    `with_offsets`, the R + 1 row offsets).

    Writes: (1) every part's slot words, slot after slot (so within a row in ascending
    offset order: a word's spill past its slot lands on a later slot of the row, rewritten
    after it, or on the start of the next row); (2) each row's first 8 bytes as one exact
    word (rows shorter than 8 bytes byte by byte), which repairs spills from the row
    before; (3) the holes, byte by byte.
    """
    R = sum(r.n for r, _ in parts)
    laid = []
    row_size = np.zeros(R, np.int64)
    for rows, order in parts:
        pieces: list = []
        rows._pieces(None, pieces)
        W, S, holes = _slots(pieces, rows.n)
        row_size[order] = S.sum(axis=0)
        laid.append((order, W, S, holes))
    offsets = np.zeros(R + 1, np.int64)
    np.cumsum(row_size, out=offsets[1:])
    total = int(offsets[-1])
    buf = np.empty(total + _SLACK, np.uint8)
    words = np.ndarray((total + 1,), _U64, buffer=buf, strides=(1,))
    heads = []
    for order, W, S, holes in laid:
        if not W.shape[0]:
            continue
        start = offsets[order]
        pos = np.empty_like(S)  # offset of each slot in its row (cumsum along axis 0 is slow)
        pos[0] = 0
        for k in range(1, len(S)):
            np.add(pos[k - 1], S[k - 1], out=pos[k])
        head = _head_words(W, S, pos)
        pos += start
        hole_pos = [(pos[slot], h) for slot, h in holes]
        for slot, _ in holes:
            S[slot] = 0
        keep = S > 0
        words[pos[keep]] = W[keep]
        heads.append((start, head, row_size[order], hole_pos))
    for start, head, size, _ in heads:
        long = size >= 8
        words[start[long]] = head[long]
        if not long.all():
            short = np.flatnonzero(~long)
            for j in range(7):
                sel = short[size[short] > j]
                buf[start[sel] + j] = (head[sel] >> _U64(8 * j)).astype(np.uint8)
    for *_, hole_pos in heads:
        for at, h in hole_pos:
            _fill_hole(buf, at, h)
    out = buf[:total]
    return (out, offsets) if with_offsets else out


def _head_words(W: np.ndarray, S: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each row from its slots (words, sizes, offsets in the row); holes read as 0."""
    head = np.zeros(W.shape[1], _U64)
    for k in range(W.shape[0]):
        off = pos[k]
        inside = off < 8
        if not inside.any():
            break
        part = W[k] & _MASK8[np.minimum(S[k], 8)]
        part <<= (np.minimum(off, 7) * 8).astype(_U64)
        head |= np.where(inside, part, _U64(0))
    return head


def _fill_hole(buf: np.ndarray, at: np.ndarray, h: _Hole) -> None:
    lens = h.lens if h.present is None else h.lens * h.present
    sel = np.flatnonzero(lens > 0)
    if not len(sel):
        return
    lens, at, starts = lens[sel], at[sel], h.starts[sel]
    total = int(lens.sum())
    t = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    buf[np.repeat(at, lens) + t] = h.data[np.repeat(starts, lens) + t]

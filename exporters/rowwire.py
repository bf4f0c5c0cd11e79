"""Protobuf messages encoded one per row, straight from numpy columns.

Exporters that write millions of small messages (Perfetto's TracePacket: one
per slice begin, end and counter sample) cannot afford a Python object per
message. A `Rows` declares the fields of one message type for n rows at once,
each field a column of n values with an optional presence mask; nested
messages are declared on a child `Rows` of the same n rows. Declared in
field-number order, the bytes are exactly what the official protobuf classes
serialize (tests/exporters/test_rowwire.py, test_perfetto_bulk.py).

    pkt = Rows(n)
    pkt.varint(8, timestamps)                 # TracePacket.timestamp
    ev = Rows(n)
    ev.varint(9, types)                       # TrackEvent.type
    pkt.message(11, ev)                       # TracePacket.track_event
    data, offsets = Rows(n).message(1, pkt).encode()   # Trace.packet, n times

How it is fast: rows are grouped by *shape*, i.e. which fields are present and
how many bytes each varint takes. Within a shape every field sits at the same
offset of the row, so the shape's rows are one (rows x bytes) uint8 matrix:
filled with the shape's template (tags, nested-message lengths, values that
are the same in every row, all encoded once), then each varying field written
as whole columns (byte k of every value at once, profiler.wire.write_varints),
and finally every row copied to its offset in the output with one scatter of
fixed-size records. Per-row byte strings (`bytes`, `raw`) split a row into
segments around them and are filled in after. A chunk has few shapes (tens),
so the Python work is per shape and field, and numpy's per row and byte.
`encode_rows` interleaves several message types (e.g. slice BEGIN and END
packets) in one given order.

Only the encodings exporters need are here: varint (uint64, and int64 as two's
complement), fixed64 (double/fixed64), constant pre-encoded bytes, per-row bytes
(strings, pre-encoded field runs) and nested messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiler.wire import as_varint_u64, encode_varint, varint_sizes, write_varints

__all__ = ["Rows", "encode_rows", "tag", "varint_size", "varint_sizes", "as_u64"]

_U64 = np.uint64
_DENSE_KEYS = 1 << 16  # shape keys below this are counted with bincount; larger ones are sorted

as_u64 = as_varint_u64  # column as uint64 for varint encoding (negative int64: two's complement)


def tag(field: int, wire_type: int) -> bytes:
    """Encoded key of a field."""
    return encode_varint(field << 3 | wire_type)


def varint_size(v: int) -> int:
    """Encoded size of one varint."""
    return len(encode_varint(v))


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

    def sizes(self) -> np.ndarray:
        """Encoded size of each row's message."""
        return _Plan(self).row_size

    def encode(self) -> tuple[np.ndarray, np.ndarray]:
        """All rows serialized back to back: (uint8 buffer, n + 1 offsets)."""
        return encode_rows([(self, np.arange(self.n))], with_offsets=True)


def _mask(present) -> np.ndarray | None:
    if present is None:
        return None
    present = np.asarray(present, dtype=bool)
    return None if present.all() else present


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


# -- the plan: a message tree flattened, its rows grouped by shape -------------------------------


@dataclass(eq=False)
class _Item:
    """One field (or a nested message's header) of the flattened message, in wire order."""

    kind: str  # "const" (key holds the bytes), "varint", "fixed", "hole" (per-row bytes), "head" (message)
    key: bytes  # tag, or the constant bytes
    data: object  # varint/fixed: uint64 column; hole: (data, starts, lens with absent rows 0)
    pres: np.ndarray | None  # rows where the item is present (None: all)
    parent: int  # index of the enclosing head, -1 at the top
    vsize: int | np.ndarray = 0  # varint: encoded size (scalar if the same in all present rows)
    holes: bool = False  # head: a hole lies inside (its length varies per row)
    hole_kids: list[int] = field(default_factory=list)  # head: direct children that are holes
    head_kids: list[int] = field(default_factory=list)  # head: direct children that are hole-holding heads
    length: np.ndarray | None = None  # hole-holding head: its content size per row


class _Plan:
    """A Rows tree's items and its rows' shapes: shape id per row, rows by shape, size per row."""

    def __init__(self, rows: Rows):
        self.n = rows.n
        self.items: list[_Item] = []
        self._flatten(rows, None, -1, [])
        if self.n == 0:
            self.inv = self.order = self.row_size = np.zeros(0, np.int64)
            self.bounds, self.layouts = np.zeros(1, np.int64), []
            return
        codes: list[tuple[np.ndarray, int]] = []
        seen: set[int] = set()
        for it in self.items:
            if it.kind == "varint":
                codes += self._varint_codes(it)
            if it.pres is not None and it.kind != "hole" and id(it.pres) not in seen:
                seen.add(id(it.pres))
                codes.append((it.pres, 2))
        inv = self._group(codes)
        heads = [i for i, it in enumerate(self.items) if it.holes]
        if heads:  # lengths of messages around holes vary per row: their varint sizes refine the shapes
            reps = self._reps(inv)
            static = np.array([self._static(int(r)) for r in reps], np.int64).reshape(len(reps), -1)
            codes = [(inv, int(inv.max()) + 1)]
            for h in reversed(heads):  # innermost first
                it = self.items[h]
                size = static[:, heads.index(h) + 1][inv]
                for j in it.hole_kids:
                    size = size + self.items[j].data[2]
                for g in it.head_kids:
                    size = size + self.items[g].vsize + self.items[g].length
                it.length = size.astype(_U64)
                it.vsize = varint_sizes(it.length)
                if it.pres is not None:
                    it.vsize = it.vsize * it.pres
                codes += self._size_codes(it.vsize)
            inv = self._group(codes)
        self.inv = inv
        self.order = np.argsort(inv, kind="stable")  # radix sort: inv is uint8/uint16 when shapes are few
        counts = np.bincount(inv)
        self.bounds = np.concatenate([[0], np.cumsum(counts)])
        self.layouts = [self._layout(int(self.order[b])) for b in self.bounds[:-1].tolist()]
        stat = np.array([sum(len(t) for t, _ in lay) for lay in self.layouts], np.int64)
        self.row_size = stat[inv]
        for it in self.items:  # the templates hold every byte but the holes'
            if it.kind == "hole":
                self.row_size = self.row_size + it.data[2]

    def _flatten(self, rows: Rows, pres: np.ndarray | None, parent: int, open_heads: list[int]) -> None:
        for kind, key, data, own in rows._items:
            p = _and(pres, own)
            if own is not None:
                if not p.any():
                    continue
                if p.all():
                    p = None
            i = len(self.items)
            if kind == "message":
                self.items.append(_Item("head", key, None, p, parent))
                self._flatten(data, p, i, [*open_heads, i])
            elif kind == "raw":
                d, starts, lens = data
                self.items.append(_Item("hole", b"", (d, starts, lens if p is None else lens * p), p, parent))
                for h in open_heads:
                    self.items[h].holes = True
            else:
                self.items.append(_Item("fixed" if kind == "fixed64" else kind, key, data, p, parent))
        if parent >= 0:  # this message's direct hole children, now that its subtree is flat
            head = self.items[parent]
            for j in range(parent + 1, len(self.items)):
                it = self.items[j]
                if it.parent == parent and it.kind == "hole":
                    head.hole_kids.append(j)
                elif it.parent == parent and it.holes:
                    head.head_kids.append(j)

    def _varint_codes(self, it: _Item) -> list[tuple[np.ndarray, int]]:
        """Shape codes of a varint column; a column with one value becomes a constant."""
        v = it.data
        if it.pres is not None:  # absent rows take a present row's value (reductions with where= are slow)
            v = np.where(it.pres, v, v[int(np.argmax(it.pres))])
        lo, hi = int(v.min()), int(v.max())
        if lo == hi:
            it.kind, it.key = "const", it.key + encode_varint(lo)
            return []
        s_lo, s_hi = varint_size(lo), varint_size(hi)
        if s_lo == s_hi:
            it.vsize = s_lo
            return []
        it.vsize = varint_sizes(v, hi)
        if it.pres is not None:
            it.vsize = it.vsize * it.pres
        return self._size_codes(it.vsize)

    @staticmethod
    def _size_codes(sizes: np.ndarray) -> list[tuple[np.ndarray, int]]:
        """Shape code of a per-row varint size (0 where absent): the size itself, radix max + 1."""
        lo, hi = int(sizes.min()), int(sizes.max())
        return [] if lo == hi else [(sizes, hi + 1)]

    def _group(self, codes: list[tuple[np.ndarray, int]]) -> np.ndarray:
        """Dense shape id per row (small unsigned dtype) from mixed-radix codes."""
        key = np.zeros(self.n, np.int64)
        radix = 1
        for code, r in codes:
            if radix * r > _DENSE_KEYS and radix > 1:  # renumber the shapes so far (few) before going on
                key, radix = _dense(key, radix)
            key = key * r + code
            radix *= r
        ids, _ = _dense(key, radix)
        dt = np.uint8 if ids.max(initial=0) < 256 else np.uint16 if ids.max(initial=0) < 65536 else np.int64
        return ids.astype(dt)

    def _reps(self, inv: np.ndarray) -> np.ndarray:
        """First row of each shape."""
        reps = np.zeros(int(inv.max()) + 1, np.int64)
        reps[inv[::-1]] = np.arange(self.n - 1, -1, -1)
        return reps

    def _present(self, it: _Item, r: int) -> bool:
        return it.pres is None or bool(it.pres[r])

    def _vsize(self, it: _Item, r: int) -> int:
        return it.vsize if isinstance(it.vsize, int) else int(it.vsize[r])

    def _sizes(self, r: int) -> tuple[list[int], list[int]]:
        """(size, content size) of each item in row r; holes and hole-holding heads' lengths left out."""
        items = self.items
        size = [0] * len(items)
        content = [0] * len(items)
        for i in range(len(items) - 1, -1, -1):
            it = items[i]
            if not self._present(it, r):
                continue
            if it.kind == "const":
                s = len(it.key)
            elif it.kind == "varint":
                s = len(it.key) + self._vsize(it, r)
            elif it.kind == "fixed":
                s = len(it.key) + 8
            elif it.kind == "hole":
                s = 0
            elif it.holes:
                s = len(it.key)
            else:
                s = len(it.key) + varint_size(content[i]) + content[i]
            size[i] = s
            if it.parent >= 0:
                content[it.parent] += s
        return size, content

    def _static(self, r: int) -> list[int]:
        """Row r's fixed bytes: total, then the fixed content of each hole-holding head."""
        size, content = self._sizes(r)
        top = sum(s for it, s in zip(self.items, size, strict=True) if it.parent < 0)
        return [top] + [content[i] for i, it in enumerate(self.items) if it.holes]

    def _layout(self, r: int) -> list[tuple[bytes, list]]:
        """Segments of the shape of row r: (template bytes, varying fields [(item, offset, size)]).

        A hole follows every segment but the last; its bytes are not in the template.
        """
        _, content = self._sizes(r)
        segs: list[tuple[bytes, list]] = []
        tmpl = bytearray()
        fields: list = []
        for i, it in enumerate(self.items):
            if it.kind == "hole":  # every hole ends a segment, present in this row or not
                segs.append((bytes(tmpl), fields))
                tmpl, fields = bytearray(), []
                continue
            if not self._present(it, r):
                continue
            if it.kind == "const":
                tmpl += it.key
            elif it.kind == "varint":
                tmpl += it.key
                s = self._vsize(it, r)
                fields.append((it, len(tmpl), s))
                tmpl += bytes(s)
            elif it.kind == "fixed":
                tmpl += it.key
                fields.append((it, len(tmpl), 8))
                tmpl += bytes(8)
            elif it.holes:
                tmpl += it.key
                s = self._vsize(it, r)
                fields.append((it, len(tmpl), s))
                tmpl += bytes(s)
            else:
                tmpl += it.key + encode_varint(content[i])
        segs.append((bytes(tmpl), fields))
        return segs

    def holes(self) -> list[_Item]:
        """The holes, in row order (the segment boundaries)."""
        return [it for it in self.items if it.kind == "hole"]


def _dense(key: np.ndarray, radix: int) -> tuple[np.ndarray, int]:
    """Keys renumbered 0..k-1 in key order; (ids, k)."""
    if radix <= _DENSE_KEYS:
        seen = np.bincount(key, minlength=radix) > 0
        lookup = np.cumsum(seen) - 1
        return lookup[key], int(seen.sum())
    uniq, ids = np.unique(key, return_inverse=True)
    return ids.reshape(-1), len(uniq)


# -- writing ------------------------------------------------------------------------------------


def encode_rows(parts: list[tuple[Rows, np.ndarray]], with_offsets: bool = False):
    """Rows of several messages interleaved: part (rows, order) puts its row i at output row order[i].

    The orders together must be a permutation of 0..R-1. Returns the uint8 buffer (and, with
    `with_offsets`, the R + 1 row offsets).
    """
    plans = [(_Plan(rows), np.asarray(order, np.int64)) for rows, order in parts]
    R = sum(p.n for p, _ in plans)
    row_size = np.zeros(R, np.int64)
    for plan, order in plans:
        row_size[order] = plan.row_size
    offsets = np.zeros(R + 1, np.int64)
    np.cumsum(row_size, out=offsets[1:])
    total = int(offsets[-1])
    buf = np.empty(total, np.uint8)
    for plan, order in plans:
        _write(buf, plan, offsets[order])
    return (buf, offsets) if with_offsets else buf


def _write(buf: np.ndarray, plan: _Plan, start: np.ndarray) -> None:
    """Write a plan's rows at their start offsets."""
    holes = plan.holes()
    hole_at = [np.empty(plan.n, np.int64) for _ in holes]
    views: dict[int, np.ndarray] = {}
    for s, segs in enumerate(plan.layouts):
        idx = plan.order[plan.bounds[s]:plan.bounds[s + 1]]
        at = start[idx]
        for k, (tmpl, fields) in enumerate(segs):
            width = len(tmpl)
            if width:
                block = np.empty((len(idx), width), np.uint8)
                block[:] = np.frombuffer(tmpl, np.uint8)
                for it, off, size in fields:
                    values = (it.length if it.kind == "head" else it.data)[idx]
                    if it.kind == "fixed":
                        block[:, off:off + 8] = values.view(np.uint8).reshape(-1, 8)
                    elif size == 1:
                        block[:, off] = values
                    else:
                        write_varints(block[:, off:off + size], values, size)
                view = views.get(width)
                if view is None:
                    view = views[width] = np.ndarray((len(buf) - width + 1,), f"V{width}", buffer=buf, strides=(1,))
                view[at] = block.view(f"V{width}")[:, 0]
                at = at + width
            if k < len(holes):
                hole_at[k][idx] = at
                at = at + holes[k].data[2][idx]
    for h, pos in zip(holes, hole_at, strict=True):
        _fill_hole(buf, pos, h.data)


def _fill_hole(buf: np.ndarray, at: np.ndarray, hole: tuple) -> None:
    """Per-row bytes: row i's data[starts[i]:starts[i] + lens[i]] at buf[at[i]:]."""
    data, starts, lens = hole
    sel = np.flatnonzero(lens > 0)
    if not len(sel):
        return
    lens, at, starts = lens[sel], at[sel], starts[sel]
    total = int(lens.sum())
    t = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    buf[np.repeat(at, lens) + t] = data[np.repeat(starts, lens) + t]

"""A line's decoded events as numpy columns: what the XSpace decoders produce.

`LineEvents` holds one line's events and their stats (as rows, plus as `StatColumn`s for
stats the native decoder (decode_native.py) found on events holding only integer stats);
`ColumnSink` collects one chunk's output from the Python decoder (decode_python.py) and orders
it by event at the end; `concat` joins chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


@dataclass
class StatColumn:
    """Stats of one metadata id and value kind on many events (events with a common layout)."""

    metadata_id: int
    kind: int  # KIND_INT, KIND_UINT or KIND_REF (0: no value)
    index: np.ndarray | slice  # event indices (not sorted), or slice(0, n): each of the line's n events, in order
    ints: np.ndarray  # int64 values (uint64 reinterpreted)
    ranks: np.ndarray | None  # position of the stat among its event's stats (None: not kept, see as_rows)

    @property
    def events(self) -> np.ndarray:
        """The event indices as an array (`index` is what to index a line's columns with)."""
        i = self.index
        return np.arange(i.start, i.stop) if isinstance(i, slice) else i


@dataclass
class LineEvents:
    """Events of one line as columns.

    Stats come two ways, disjoint: `columns` (one per metadata id and kind, from the native
    decoder) and rows (one per stat, ordered by event, then as in the file).
    `as_rows()` gives every stat as a row.
    """

    metadata_id: np.ndarray  # int64
    offset_ps: np.ndarray  # int64 (0 when the event carries num_occurrences instead)
    duration_ps: np.ndarray  # int64
    num_occurrences: np.ndarray  # int64 (0 when the event has an offset)
    # Stats, one row each:
    stat_event: np.ndarray  # index of the event
    stat_metadata_id: np.ndarray  # int64
    stat_kind: np.ndarray  # KIND_* (0: no value)
    stat_int: np.ndarray  # int64 value (int64/uint64/ref; uint64 reinterpreted), else 0
    stat_double: np.ndarray  # float64 value, else NaN
    stat_str_pos: np.ndarray  # str/bytes payload: byte position in `buf` (-1 for other kinds)
    stat_str_len: np.ndarray  # and its length
    buf: np.ndarray  # the line's event bytes (uint8), which stat_str_pos points into
    stat_rank: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # position among the event's stats
    columns: list[StatColumn] = field(default_factory=list)

    def as_rows(self) -> LineEvents:
        """The same events with every stat as a row, ordered by event, then as in the file (the
        columns must hold their ranks)."""
        if not self.columns:
            return self
        cs = self.columns
        assert all(c.ranks is not None for c in cs), "stat columns decoded without their ranks"
        cat = np.concatenate
        ev = cat([self.stat_event] + [c.events for c in cs])
        rank = cat([self.stat_rank] + [c.ranks for c in cs])
        order = np.lexsort((rank, ev))
        m = sum(len(c.events) for c in cs)
        cols = [
            ev,
            cat([self.stat_metadata_id] + [np.full(len(c.events), c.metadata_id, np.int64) for c in cs]),
            cat([self.stat_kind] + [np.full(len(c.events), c.kind, np.int8) for c in cs]),
            cat([self.stat_int] + [c.ints for c in cs]),
            cat([self.stat_double, np.full(m, np.nan)]),
            cat([self.stat_str_pos, np.full(m, -1, np.int64)]),
            cat([self.stat_str_len, np.zeros(m, np.int64)]),
        ]
        ev_cols = (self.metadata_id, self.offset_ps, self.duration_ps, self.num_occurrences)
        return LineEvents(*ev_cols, *(c[order] for c in cols), self.buf, rank[order])

    def stat_bytes(self, rows: np.ndarray) -> pa.Array:
        """The str/bytes payloads of stat rows `rows` as one Arrow binary array (null for other kinds)."""
        rows = np.asarray(rows, np.int64)
        pos, ln = self.stat_str_pos[rows], self.stat_str_len[rows]
        has = pos >= 0
        ln = np.where(has, ln, 0)
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(ln, out=offsets[1:])
        total = int(offsets[-1])
        within = np.arange(total) - np.repeat(offsets[:-1], ln)
        data = self.buf[np.repeat(pos, ln) + within]
        validity = pa.py_buffer(np.packbits(has, bitorder="little"))
        return pa.Array.from_buffers(
            pa.large_binary(), len(rows), [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        )


def concat(parts: list[LineEvents]) -> LineEvents:
    """The chunks of one line as one: event and byte positions shifted, stat columns merged."""
    ev_base = np.cumsum([0] + [len(p.metadata_id) for p in parts[:-1]])
    buf_base = np.cumsum([0] + [len(p.buf) for p in parts[:-1]])
    cat = np.concatenate
    return LineEvents(
        cat([p.metadata_id for p in parts]),
        cat([p.offset_ps for p in parts]),
        cat([p.duration_ps for p in parts]),
        cat([p.num_occurrences for p in parts]),
        cat([p.stat_event + b for p, b in zip(parts, ev_base, strict=True)]),
        cat([p.stat_metadata_id for p in parts]),
        cat([p.stat_kind for p in parts]),
        cat([p.stat_int for p in parts]),
        cat([p.stat_double for p in parts]),
        cat([np.where(p.stat_str_pos >= 0, p.stat_str_pos + b, -1) for p, b in zip(parts, buf_base, strict=True)]),
        cat([p.stat_str_len for p in parts]),
        cat([p.buf for p in parts]),
        cat([p.stat_rank for p in parts]),
        merge(
            [
                StatColumn(c.metadata_id, c.kind, c.events + b, c.ints, c.ranks)
                for p, b in zip(parts, ev_base, strict=True)
                for c in p.columns
            ]
        ),
    )


def merge(columns: list[StatColumn]) -> list[StatColumn]:
    """One column per (metadata id, kind)."""
    by: dict[tuple[int, int], list[StatColumn]] = {}
    for c in columns:
        by.setdefault((c.metadata_id, c.kind), []).append(c)
    return [
        cs[0]
        if len(cs) == 1
        else StatColumn(*key, *(np.concatenate([getattr(c, a) for c in cs]) for a in ("events", "ints", "ranks")))
        for key, cs in by.items()
    ]


class ColumnSink:
    """Decoded columns of one chunk; stats arrive in blocks and are ordered by event at the end."""

    def __init__(self, n: int):
        self.n = n
        self.mid, self.off, self.dur, self.occ = (np.zeros(n, np.uint64) for _ in range(4))
        self.blocks: list[tuple] = []  # stat rows: (event, row within event, rank, mid, kind, int, dbl, pos, len)
        self.n_stats = np.zeros(n, np.int64)  # stat rows per event

    def finish(self, buf: np.ndarray) -> LineEvents:
        """The chunk's events (whose bytes are `buf`), stats ordered by event."""
        off = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.n_stats, out=off[1:])
        m = int(off[-1])
        smid, ival = np.zeros(m, np.uint64), np.zeros(m, np.uint64)
        kind, dval = np.zeros(m, np.int8), np.full(m, np.nan)
        spos, slen = np.full(m, -1, np.int64), np.zeros(m, np.int64)
        srank = np.zeros(m, np.int64)
        for ev, row, rank, b_mid, b_kind, b_int, b_dbl, b_pos, b_len in self.blocks:
            dest = off[ev] + row
            smid[dest], kind[dest], ival[dest], srank[dest] = b_mid, b_kind, b_int, rank
            dval[dest], spos[dest], slen[dest] = b_dbl, b_pos, b_len
        event = np.repeat(np.arange(self.n), self.n_stats)
        i64 = np.int64
        return LineEvents(
            self.mid.view(i64),
            self.off.view(i64),
            self.dur.view(i64),
            self.occ.view(i64),
            event,
            smid.view(i64),
            kind,
            ival.view(i64),
            dval,
            spos,
            slen,
            buf,
            srank,
            [],
        )

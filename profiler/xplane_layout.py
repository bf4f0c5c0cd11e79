"""The layout decoder, the fast path of the XSpace event decoding (profiler/xplane_wire.py).

One vectorised pass finds every varint of a chunk of events: a byte below 0x80 ends one
(the last byte of each event is forced to end one, and events whose real last byte
does not are left to the general decoder). Tokens alternate key, value inside an
event when no stat carries a fixed64 or length-delimited payload other than the
stats themselves, whose `stats` header (key, length) is followed by the stat's own
key/value tokens. Events are then matched against *layouts*: the key sequence of a
first unmatched event, walked once in Python, says which token holds which field.
Every event with the same token count is checked against it at once (same key
bytes, each stat's length equal to the bytes of its tokens), so the walk is the
exact protobuf parse for all events that match; the others try the next layout.
Events with string or double stats, unknown fields or malformed bytes match no
layout and go to the general decoder (profiler/xplane_general.py).

Python runs per layout and per field kind, never per event or per stat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiler.xplane_columns import ColumnSink, StatColumn
from profiler.xplane_fields import (
    EV_DURATION_PS,
    EV_METADATA_ID,
    EV_NUM_OCC,
    EV_OFFSET_PS,
    EV_STATS,
    KIND_INT,
    KIND_REF,
    KIND_UINT,
    MAX_VARINT,
    ST_INT64,
    ST_METADATA_ID,
    ST_REF,
    ST_UINT64,
)

_U8 = np.uint8
_MAX_TEMPLATES = 32  # event layouts tried per chunk before the rest goes to the general decoder

_EV_ROLE = {key: r for key, r in ((EV_METADATA_ID << 3, "mid"), (EV_OFFSET_PS << 3, "off"),
                                 (EV_DURATION_PS << 3, "dur"), (EV_NUM_OCC << 3, "occ"),
                                 (EV_STATS << 3 | 2, "stat"))}  # fmt: skip
_ST_ROLE = {ST_METADATA_ID << 3: "mid", ST_UINT64 << 3: KIND_UINT, ST_INT64 << 3: KIND_INT, ST_REF << 3: KIND_REF}


@dataclass
class _Layout:
    keys: np.ndarray  # uint8: key byte of each key/value pair
    fields: dict[str, int]  # event field -> token holding its value (last occurrence, oneof applied)
    stats: list[tuple[int, int, int, int, int]]  # (length token, last token, mid token|-1, kind, value token|-1)
    read: list[int] = field(default_factory=list)  # value tokens some output keeps
    unread: list[int] = field(default_factory=list)  # value tokens overwritten by a later one

    def __post_init__(self) -> None:
        kept = set(self.fields.values()) | {t for st in self.stats for t in (st[2], st[4]) if t >= 0}
        self.read = sorted(kept)
        self.unread = [j for j in range(1, 2 * len(self.keys), 2) if j not in kept and j not in
                       {st[0] for st in self.stats}]  # fmt: skip


def _layout(code: np.ndarray, tok_end: np.ndarray, buf: np.ndarray, first: int, count: int,
            ev_start: int) -> _Layout | None:  # fmt: skip
    """The field layout of one event's tokens, or None when it is not a plain key/value layout."""
    if count % 2:
        return None
    tok = tok_end[first : first + count]
    keys = code[tok[0::2]]
    if (tok[1::2] - tok[0::2]).max() > MAX_VARINT:
        return None
    ks, te = keys.tolist(), tok.tolist()
    vals = [_varint_at(buf, a + 1, b) for a, b in zip(te[0::2], te[1::2], strict=True)]
    ev_end = te[-1] + 1
    fields: dict[str, int] = {}
    stats: list[tuple[int, int, int, int, int]] = []
    cur: list[int] | None = None  # [length token, stat end, mid token, kind, value token]
    for i, k in enumerate(ks):
        kt, vt = 2 * i, 2 * i + 1
        kstart = te[kt - 1] + 1 if kt else ev_start
        vend = te[vt] + 1
        if cur is not None and kstart >= cur[1]:
            stats.append((cur[0], kt - 1, cur[2], cur[3], cur[4]))
            cur = None
        if cur is not None:
            role = _ST_ROLE.get(k)
            if role is None or vend > cur[1]:
                return None
            if role == "mid":
                cur[2] = vt
            else:
                cur[3], cur[4] = role, vt
            continue
        role = _EV_ROLE.get(k)
        if role is None:
            return None
        if role == "stat":
            end = vend + vals[i]
            if end > ev_end:
                return None
            cur = [vt, end, -1, 0, -1]
        else:
            if role in ("off", "occ"):  # oneof: the last one set wins, the other reads 0
                fields.pop("off", None)
                fields.pop("occ", None)
            fields[role] = vt
    if cur is not None:
        stats.append((cur[0], count - 1, cur[2], cur[3], cur[4]))
    return _Layout(keys.copy(), fields, stats)


def decode_templates(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: ColumnSink) -> np.ndarray:
    """Decode the events that match a layout into `out`; returns the indices of the others."""
    n = len(starts)
    size = int(ends[-1])
    body = buf[:size]
    term = body < 0x80
    nonempty = np.flatnonzero(ends > starts)
    last = ends[nonempty] - 1
    bad = np.zeros(n, bool)
    bad[nonempty[~term[last]]] = True  # a varint cut by the event's end: malformed
    term[last] = True
    tok_end = np.flatnonzero(term)
    upto = np.searchsorted(tok_end, ends)  # tokens ending before each event's end
    first = np.zeros(n, np.int64)
    first[1:] = upto[:-1]
    count = upto - first
    # Key byte of each one-byte token, at its position (0xFF elsewhere): keys are one byte in layouts.
    alone = term.copy()
    alone[1:] &= term[:-1]
    code = body | (~alone).view(_U8) * _U8(0xFF)
    rd = _Reader(buf)
    tok_code = code[tok_end]  # per token: its byte if it is a one-byte token, else 0xFF
    pending = np.flatnonzero(~bad & (count > 0))
    fallback = [np.flatnonzero(bad)]
    matched = np.zeros(n, bool)
    misses = 0
    for _ in range(_MAX_TEMPLATES):
        if not pending.size:
            break
        t = int(pending[0])
        c = int(count[t])
        lay = _layout(code, tok_end, buf, int(first[t]), c, int(starts[t]))
        if lay is None:
            fallback.append(pending[:1])
            pending = pending[1:]
            misses += 1
            if misses >= _MAX_MISSES:  # e.g. a `_counters_` line, every event with a double
                break
            continue
        misses = 0
        same = pending[count[pending] == c]
        # Runs of consecutive events of this count hold their tokens contiguously: a (run, c) view of
        # tok_end, no copy. Short runs are gathered together.
        brk = np.flatnonzero(np.diff(same) != 1) + 1
        run_lo, run_hi = np.concatenate([[0], brk]), np.concatenate([brk, [len(same)]])
        long = (run_hi - run_lo) >= _MIN_RUN
        for lo, hi in zip(run_lo[long].tolist(), run_hi[long].tolist(), strict=True):
            a, b = int(first[same[lo]]), int(first[same[lo]]) + (hi - lo) * c
            _match(lay, tok_end[a:b].reshape(hi - lo, c), tok_code[a:b].reshape(hi - lo, c), same[lo:hi], rd, out,
                   matched)  # fmt: skip
        if not long.all():
            rest = same[np.repeat(~long, run_hi - run_lo)]
            step = max(1, _MAX_GATHER // c)  # bounds the (events, tokens) index matrix
            for i in range(0, len(rest), step):
                idx = first[rest[i : i + step]][:, None] + np.arange(c)
                _match(lay, tok_end[idx], tok_code[idx], rest[i : i + step], rd, out, matched)
        if not matched[t]:  # a layout matches its own event; guards progress all the same
            fallback.append(np.array([t]))
            matched[t] = True
        pending = pending[~matched[pending]]
    fallback.append(pending)
    return np.sort(np.concatenate(fallback))


_MIN_RUN = 256  # consecutive events decoded through a view rather than a gather
_MAX_GATHER = 1 << 22  # token positions gathered at once for events outside such runs
_MAX_MISSES = 4  # events in a row without a layout: the rest of the chunk goes to the general decoder


def _match(lay: _Layout, tok: np.ndarray, tcode: np.ndarray, events: np.ndarray, rd: _Reader, out: ColumnSink,
           matched: np.ndarray) -> None:  # fmt: skip
    """Decode the events (rows of `tok`: their tokens' end bytes; `tcode`: their one-byte values or 0xFF)
    that follow layout `lay`."""
    ok = (tcode[:, 0::2] == lay.keys).all(axis=1)
    for j in lay.unread:  # value tokens no field keeps (overwritten): still bounded like any varint
        ok &= tok[:, j] - tok[:, j - 1] <= MAX_VARINT
    if lay.stats:  # each stat's length equals the bytes of its tokens
        lt = [st[0] for st in lay.stats]
        length = rd.varint_block(tok, tcode, lt, ok)
        ok &= (length == (tok[:, [st[1] for st in lay.stats]] - tok[:, lt]).astype(np.uint64)).all(axis=1)
    block = rd.varint_block(tok, tcode, lay.read, ok)
    vals = {j: block[:, i] for i, j in enumerate(lay.read)}
    if not ok.all():
        events = events[ok]
        vals = {j: v[ok] for j, v in vals.items()}
    for name, col in lay.fields.items():
        getattr(out, name)[events] = vals[col]
    k = len(events)
    rows = []  # stats whose metadata id varies between these events: kept as rows
    for j, (_, _, mt, kind, vt) in enumerate(lay.stats):
        if not k:
            break
        mid = vals[mt] if mt >= 0 else np.zeros(k, np.uint64)
        ints = (vals[vt] if vt >= 0 else np.zeros(k, np.uint64)).view(np.int64)
        if (mid == mid[0]).all():
            out.columns.append(StatColumn(int(mid[0].view(np.int64)), kind, events, ints, np.full(k, j, np.int64)))
        else:
            rows.append((j, mid, kind, ints))
    if rows:
        r = len(rows)
        out.blocks.append((np.repeat(events, r), np.tile(np.arange(r), k), np.tile([j for j, *_ in rows], k),
                           np.stack([x[1] for x in rows], 1).ravel(), np.tile([x[2] for x in rows], k),
                           np.stack([x[3] for x in rows], 1).ravel().view(np.uint64), None, None, None))  # fmt: skip
        out.n_stats[events] = r
    matched[events] = True


class _Reader:
    """Varints at given byte positions of one chunk, one gather per column (two for long ones)."""

    def __init__(self, buf: np.ndarray):
        self.buf = buf
        aligned = np.zeros(len(buf) + 16, np.uint8)  # numpy aligns new arrays: an aligned uint64 view
        aligned[: len(buf)] = buf
        self.words = aligned[: (len(aligned) // 8) * 8].view("<u8")

    def word(self, pos: np.ndarray) -> np.ndarray:
        """The 8 bytes from each position, as a little-endian uint64."""
        i = pos >> 3
        sh = ((pos & 7) << 3).astype(np.uint64)
        return (self.words[i] >> sh) | ((self.words[i + 1] << np.uint64(1)) << (np.uint64(63) - sh))

    def varint_block(self, tok: np.ndarray, tcode: np.ndarray, cols: list[int], ok: np.ndarray) -> np.ndarray:
        """Values of token columns `cols` (value tokens, each right after its one-byte key), as a
        (rows, columns) uint64 matrix; rows whose varint is longer than 10 bytes are cleared in `ok`."""
        codes = tcode[:, cols]
        block = codes.astype(np.uint64)
        for i in np.flatnonzero((codes == 0xFF).any(axis=0)).tolist():  # columns holding multi-byte varints
            j = cols[i]
            multi = np.flatnonzero(codes[:, i] == 0xFF)
            every = len(multi) == len(codes)
            end = tok[:, j] if every else tok[multi, j]
            ln = end - (tok[:, j - 1] if every else tok[multi, j - 1])
            block[multi, i] = self._decode(end - ln + 1, ln, ok, multi)
        return block

    def _decode(self, start: np.ndarray, ln: np.ndarray, ok: np.ndarray, rows: np.ndarray) -> np.ndarray:
        top = int(ln.max())
        w = self.word(start) & _BYTE_MASK[np.minimum(ln, 8)]
        got = w & np.uint64(0x7F)
        for k in range(1, min(top, 8)):
            got |= ((w >> np.uint64(8 * k)) & np.uint64(0x7F)) << np.uint64(7 * k)
        if top > 8:  # 9- and 10-byte varints (negative int64s): the last bytes from the next word
            ok[rows[ln > MAX_VARINT]] = False
            rest = np.flatnonzero(ln > 8)
            w2 = self.word(start[rest] + 8) & _BYTE_MASK[np.minimum(ln[rest] - 8, 8)]
            got[rest] |= ((w2 & np.uint64(0x7F)) << np.uint64(56)) | (
                ((w2 >> np.uint64(8)) & np.uint64(1)) << np.uint64(63)
            )
        return got


_BYTE_MASK = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], np.uint64)


def _varint_at(buf: np.ndarray, start: int, end: int) -> int:
    """The varint in buf[start : end + 1] (one value, for layouts)."""
    return sum((b & 0x7F) << (7 * k) for k, b in enumerate(buf[start : end + 1].tolist())) & ((1 << 64) - 1)

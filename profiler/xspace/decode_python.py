"""The Python XSpace event decoder, the fallback beside the native one: any valid encoding,
level-synchronous with numpy.

The native decoder (decode_native.py) takes a line's events straight from the plane's bytes and
gives up on anything protobuf would not read the same way (a group, an invalid wire type, a
field cut short); such lines come here as one bytes object per event, and are decoded exactly, or
refused with a message naming what is wrong. All events advance one field per numpy step
(wire.decode_fields), then all their stats do; protobuf's rules apply (the last of a repeated
scalar wins, the last member of a oneof set wins). Python runs per field kind, never per event
or per stat. `native=False` in decode.decode_files sends every line here (the reference the tests
and the benchmark compare the native decoder with).
"""

from __future__ import annotations

import numpy as np

from profiler.wire import read_varints
from profiler.xspace.columns import ColumnSink, LineEvents, concat
from profiler.xspace.wire import (
    EV_DURATION_PS,
    EV_METADATA_ID,
    EV_NUM_OCC,
    EV_OFFSET_PS,
    EV_STATS,
    KIND_BYTES,
    KIND_DOUBLE,
    KIND_INT,
    KIND_OF_FIELD,
    KIND_REF,
    KIND_STR,
    KIND_UINT,
    PAD,
    ST_DOUBLE,
    ST_INT64,
    ST_METADATA_ID,
    ST_REF,
    ST_UINT64,
    Fields,
    decode_fields,
)

_CHUNK_EVENTS = 1 << 18  # events decoded together (bounds the index matrices' memory)


def decode_events(events, where: str) -> LineEvents:
    """Decode a line's events (a sequence of serialized XEvents) into columns."""
    evs = list(events)
    parts = [_decode_chunk(evs[i : i + _CHUNK_EVENTS], where) for i in range(0, len(evs), _CHUNK_EVENTS)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        parts = [_decode_chunk([], where)]
    return concat(parts)


def _decode_chunk(evs: list[bytes], where: str) -> LineEvents:
    n = len(evs)
    lens = np.fromiter(map(len, evs), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(b"".join(evs) + bytes(PAD), np.uint8)
    out = ColumnSink(n)
    if n:
        decode_general(buf, starts, ends, np.arange(n), out, where)
    return out.finish(buf)


def _last_per_row(rows: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of each value in `rows` (grouped, ascending)."""
    if not rows.size:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.append(rows[1:] != rows[:-1], True))


def decode_general(buf, starts, ends, todo: np.ndarray, out: ColumnSink, where: str) -> None:
    """Level-synchronous decode of events `todo`: all advance one field per numpy step."""
    f = decode_fields(buf, starts[todo], ends[todo], where)
    order = np.lexsort((f.start, f.msg))  # by event, then position: protobuf's last-one-wins order
    f = Fields(f.msg[order], f.number[order], f.wire[order], f.value[order], f.start[order])
    ev = todo[f.msg]
    for number, col in ((EV_METADATA_ID, out.mid), (EV_DURATION_PS, out.dur)):
        sel = np.flatnonzero((f.number == number) & (f.wire == 0))
        sel = sel[_last_per_row(ev[sel])]
        col[ev[sel]] = f.value[sel]
    sel = np.flatnonzero(((f.number == EV_OFFSET_PS) | (f.number == EV_NUM_OCC)) & (f.wire == 0))
    sel = sel[_last_per_row(ev[sel])]  # oneof data: the last of the two wins
    is_off = f.number[sel] == EV_OFFSET_PS
    out.off[ev[sel]] = np.where(is_off, f.value[sel], 0)
    out.occ[ev[sel]] = np.where(is_off, 0, f.value[sel])
    sel = (f.number == EV_STATS) & (f.wire == 2)
    s_event, s_start = ev[sel], f.start[sel]
    s_end = s_start + f.value[sel].astype(np.int64)
    m = len(s_event)
    smid, ival = np.zeros(m, np.uint64), np.zeros(m, np.uint64)
    kind, dval = np.zeros(m, np.int8), np.full(m, np.nan)
    spos, slen = np.full(m, -1, np.int64), np.zeros(m, np.int64)
    slow = _fast_stats(buf, s_start, s_end, smid, kind, ival, dval)
    g = decode_fields(buf, s_start[slow], s_end[slow], where)
    order = np.lexsort((g.start, g.msg))
    g = Fields(slow[g.msg[order]], g.number[order], g.wire[order], g.value[order], g.start[order])
    sel = np.flatnonzero((g.number == ST_METADATA_ID) & (g.wire == 0))
    sel = sel[_last_per_row(g.msg[sel])]
    smid[g.msg[sel]] = g.value[sel]
    wire_of = {KIND_DOUBLE: 1, KIND_STR: 2, KIND_BYTES: 2}
    g_kind = np.zeros(len(g.msg), np.int8)
    for number, k in KIND_OF_FIELD.items():
        g_kind[(g.number == number) & (g.wire == wire_of.get(k, 0))] = k
    sel = np.flatnonzero(g_kind)
    sel = sel[_last_per_row(g.msg[sel])]  # oneof value: the last one set wins
    rows, k = g.msg[sel], g_kind[sel]
    kind[rows] = k
    is_int, is_dbl, is_str = (
        np.isin(k, (KIND_INT, KIND_UINT, KIND_REF)),
        k == KIND_DOUBLE,
        (k == KIND_STR) | (k == KIND_BYTES),
    )
    ival[rows[is_int]] = g.value[sel][is_int]
    dval[rows[is_dbl]] = g.value[sel][is_dbl].view(np.float64)
    spos[rows[is_str]] = g.start[sel][is_str]
    slen[rows[is_str]] = g.value[sel][is_str].astype(np.int64)
    np.add.at(out.n_stats, s_event, 1)
    first = np.searchsorted(s_event, s_event)  # s_event is ascending: rank of each stat in its event
    rank = np.arange(m) - first
    out.blocks.append((s_event, rank, rank, smid, kind, ival, dval, spos, slen))


_SCALAR_TAGS = {(ST_INT64 << 3): KIND_INT, (ST_UINT64 << 3): KIND_UINT, (ST_REF << 3): KIND_REF}
_DOUBLE_TAG = ST_DOUBLE << 3 | 1


def _fast_stats(buf, start, end, smid, kind, ival, dval) -> np.ndarray:
    """Decode the common stat layout (1-byte metadata id, then one scalar value) in one pass.

    Fills the outputs for those rows; returns the indices of the other rows, for the
    field walk.
    """
    simple = (buf[start] == (ST_METADATA_ID << 3)) & (buf[start + 1] < 0x80) & (end - start >= 4)
    tag = buf[start + 2]
    out = np.zeros(len(start), bool)
    for t, k in _SCALAR_TAGS.items():
        rows = np.flatnonzero(simple & (tag == t))
        if rows.size:
            v, after = read_varints(buf, start[rows] + 3)
            ok = after == end[rows]
            rows, v = rows[ok], v[ok]
            smid[rows], kind[rows], ival[rows] = buf[start[rows] + 1], k, v
            out[rows] = True
    rows = np.flatnonzero(simple & (tag == _DOUBLE_TAG) & (end - start == 11))
    if rows.size:
        raw = buf[(start[rows, None] + 3 + np.arange(8)).ravel()].reshape(-1, 8)
        smid[rows], kind[rows], dval[rows] = buf[start[rows] + 1], KIND_DOUBLE, raw.copy().view("<f8").ravel()
        out[rows] = True
    return np.flatnonzero(~out)

"""XSpace (`.xplane.pb`) at the protobuf wire level, vectorised with numpy.

XSpace stores one nested message per event and per stat, which the standard
runtime turns into one Python object each (about 3 µs per event with stats).
Here the plane "shell" (names, metadata maps, plane stats) goes through the
official classes, but each line's events are decoded with numpy, two ways:

- the *layout* decoder (the fast path): one pass finds every varint of the line;
  events are matched, all at once, against the field layout of a first event
  (same keys, same stat lengths) and read column by column; stats whose metadata
  id is the same on every matched event come out as columns (`StatColumn`);
- the *general* decoder, for events no layout fits (string, bytes or double stats,
  unknown fields, malformed bytes): level-synchronous, all events advance one
  field per numpy step, then all stats do.

Python runs per layout and per field kind, never per event or per stat. Encoding
(used by the XSpace exporter and the benchmark) is the mirror image, in
profiler/xplane_encode.py (re-exported here).

Field numbers come from the generated descriptors of proto/xplane.proto.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profiler import xplane_encode as _enc
from profiler import xplane_pb2 as xp
from profiler.wire import encode_varint  # noqa: F401 - the exporter's, with the encoder below

_U8 = np.uint8
_MAX_VARINT = 10


class XSpaceWireError(ValueError):
    """Bytes that are not a valid XSpace encoding (message says where)."""


def _num(msg, name: str) -> int:
    return msg.DESCRIPTOR.fields_by_name[name].number


# Field numbers (from the generated descriptors, so the .proto stays the only source).
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
_KIND_OF_FIELD = {ST_INT64: KIND_INT, ST_UINT64: KIND_UINT, ST_DOUBLE: KIND_DOUBLE,
                  ST_STR: KIND_STR, ST_BYTES: KIND_BYTES, ST_REF: KIND_REF}  # fmt: skip


def _lite_classes():
    """XPlane/XLine look-alikes whose `events` and `lines` stay raw bytes (same field numbers)."""
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
    return get(pool.FindMessageTypeByName("scprof.xplane_lite.XPlaneLite")), pool


XPlaneLite, _POOL = _lite_classes()
# Real message classes from the same pool, for the metadata inside XPlaneLite.
XSpaceInPool = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.profiler.XSpace"))


# --------------------------------------------------------------------------- decoding


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
    for k in range(1, _MAX_VARINT):
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


@dataclass
class StatColumn:
    """Stats of one metadata id and value kind on many events (events with a common layout)."""

    metadata_id: int
    kind: int  # KIND_INT, KIND_UINT or KIND_REF (0: no value)
    events: np.ndarray  # event indices (not sorted)
    ints: np.ndarray  # int64 values (uint64 reinterpreted)
    ranks: np.ndarray  # position of the stat among its event's stats


@dataclass
class LineEvents:
    """Events of one line as columns.

    Stats come two ways, disjoint: `columns` (one per metadata id and kind, from events
    decoded by layout) and rows (one per stat, ordered by event, then as in the file).
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
        """The same events with every stat as a row, ordered by event, then as in the file."""
        if not self.columns:
            return self
        cs = self.columns
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
        return pa.Array.from_buffers(pa.large_binary(), len(rows),
                                     [validity, pa.py_buffer(offsets), pa.py_buffer(data)])  # fmt: skip


_CHUNK_EVENTS = 1 << 18  # events decoded together (bounds the index matrices' memory)
_MAX_TEMPLATES = 32  # event layouts tried per chunk before the rest goes to the general decoder


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
    return _concat(parts)


def _concat(parts: list[LineEvents]) -> LineEvents:
    ev_base = np.cumsum([0] + [len(p.metadata_id) for p in parts[:-1]])
    buf_base = np.cumsum([0] + [len(p.buf) for p in parts[:-1]])
    cat = np.concatenate
    return LineEvents(
        cat([p.metadata_id for p in parts]), cat([p.offset_ps for p in parts]),
        cat([p.duration_ps for p in parts]), cat([p.num_occurrences for p in parts]),
        cat([p.stat_event + b for p, b in zip(parts, ev_base, strict=True)]),
        cat([p.stat_metadata_id for p in parts]), cat([p.stat_kind for p in parts]),
        cat([p.stat_int for p in parts]), cat([p.stat_double for p in parts]),
        cat([np.where(p.stat_str_pos >= 0, p.stat_str_pos + b, -1) for p, b in zip(parts, buf_base, strict=True)]),
        cat([p.stat_str_len for p in parts]), cat([p.buf for p in parts]), cat([p.stat_rank for p in parts]),
        _merge([StatColumn(c.metadata_id, c.kind, c.events + b, c.ints, c.ranks)
                for p, b in zip(parts, ev_base, strict=True) for c in p.columns]),
    )  # fmt: skip


def _merge(columns: list[StatColumn]) -> list[StatColumn]:
    """One column per (metadata id, kind)."""
    by: dict[tuple[int, int], list[StatColumn]] = {}
    for c in columns:
        by.setdefault((c.metadata_id, c.kind), []).append(c)
    return [cs[0] if len(cs) == 1 else
            StatColumn(*key, *(np.concatenate([getattr(c, a) for c in cs]) for a in ("events", "ints", "ranks")))
            for key, cs in by.items()]  # fmt: skip


def _decode_chunk(evs: list[bytes], where: str, fast: bool) -> LineEvents:
    n = len(evs)
    lens = np.fromiter(map(len, evs), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(b"".join(evs) + bytes(_MAX_VARINT + 8), _U8)
    out = _Columns(n)
    todo = _decode_templates(buf, starts, ends, out) if fast and n else np.arange(n)
    if todo.size:
        _decode_general(buf, starts, ends, todo, out, where)
    return out.finish(buf)


class _Columns:
    """Decoded columns of one chunk; stats arrive in blocks and are ordered by event at the end."""

    def __init__(self, n: int):
        self.n = n
        self.mid, self.off, self.dur, self.occ = (np.zeros(n, np.uint64) for _ in range(4))
        self.blocks: list[tuple] = []  # stat rows: (event, row within event, rank, mid, kind, int, dbl, pos, len)
        self.n_stats = np.zeros(n, np.int64)  # stat rows per event
        self.columns: list[StatColumn] = []

    def finish(self, buf: np.ndarray) -> LineEvents:
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
            if b_dbl is not None:
                dval[dest], spos[dest], slen[dest] = b_dbl, b_pos, b_len
        event = np.repeat(np.arange(self.n), self.n_stats)
        i64 = np.int64
        return LineEvents(self.mid.view(i64), self.off.view(i64), self.dur.view(i64), self.occ.view(i64), event,
                          smid.view(i64), kind, ival.view(i64), dval, spos, slen, buf, srank,
                          _merge(self.columns))  # fmt: skip


# ------------------------------------------------------------------ template decoder
#
# One vectorised pass finds every varint of the chunk: a byte below 0x80 ends one
# (the last byte of each event is forced to end one, and events whose real last byte
# does not are left to the general decoder). Tokens alternate key, value inside an
# event when no stat carries a fixed64 or length-delimited payload other than the
# stats themselves, whose `stats` header (key, length) is followed by the stat's own
# key/value tokens. Events are then matched against *layouts*: the key sequence of a
# first unmatched event, walked once in Python, says which token holds which field.
# Every event with the same token count is checked against it at once (same key
# bytes, each stat's length equal to the bytes of its tokens), so the walk is the
# exact protobuf parse for all events that match; the others try the next layout.
# Events with string or double stats, unknown fields or malformed bytes match no
# layout and go to the general decoder.

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
    if (tok[1::2] - tok[0::2]).max() > _MAX_VARINT:
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


def _decode_templates(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: _Columns) -> np.ndarray:
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


def _match(lay: _Layout, tok: np.ndarray, tcode: np.ndarray, events: np.ndarray, rd: _Reader, out: _Columns,
           matched: np.ndarray) -> None:  # fmt: skip
    """Decode the events (rows of `tok`: their tokens' end bytes; `tcode`: their one-byte values or 0xFF)
    that follow layout `lay`."""
    ok = (tcode[:, 0::2] == lay.keys).all(axis=1)
    for j in lay.unread:  # value tokens no field keeps (overwritten): still bounded like any varint
        ok &= tok[:, j] - tok[:, j - 1] <= _MAX_VARINT
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
            ok[rows[ln > _MAX_VARINT]] = False
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


# ------------------------------------------------------------------ general decoder


def _last_per_row(rows: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of each value in `rows` (grouped, ascending)."""
    if not rows.size:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.append(rows[1:] != rows[:-1], True))


def _decode_general(buf, starts, ends, todo: np.ndarray, out: _Columns, where: str) -> None:
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
    for number, k in _KIND_OF_FIELD.items():
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
    general decoder.
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


def split_space(data: bytes | memoryview, where: str) -> tuple[list[memoryview], list[str]]:
    """Top level of an XSpace: the plane payloads (as views) and the hostnames."""
    buf = np.frombuffer(bytes(data) if not isinstance(data, bytes) else data, _U8)
    padded = np.concatenate([buf, np.zeros(_MAX_VARINT + 8, _U8)])
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


# The encoder lives in profiler/xplane_encode.py; its names stay importable from here (the exporter's).
encode_rows, message_pieces, varint_len, key = _enc.encode_rows, _enc.message_pieces, _enc.varint_len, _enc.key

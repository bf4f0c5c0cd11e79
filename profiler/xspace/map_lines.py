"""One decoded XSpace line onto store columns: typed event columns, event_args rows, counter samples.

`PlaneMeta` holds a plane's metadata as numpy lookups (built once per plane), `LineCtx` one
decoded line with its stats resolved to names (built once per line); the functions here take
a LineCtx and work on whole columns, no Python step per event. Which stat fills which typed
column is map_names.TYPED_FIELDS; every other stat becomes an event_args row. XProf's
`_counters_` lines and the memory stats of `MemoryAllocation` / `MemoryDeallocation` events
become counter samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from profiler.xspace import check as chk
from profiler.xspace import xplane_pb2 as xp
from profiler.xspace.check import NULL
from profiler.xspace.columns import LineEvents, StatColumn
from profiler.xspace.map_names import (
    ALLOCATOR_STAT,
    COUNTER_LINE,
    COUNTER_VALUE_STATS,
    MARKER_STAT,
    MEMORY_EVENTS,
    MEMORY_STATS,
    STEP_NUM,
    STRING_COLUMNS,
    TYPED_FIELDS,
    TYPED_STATS,
    UNIT_STAT,
    UNKNOWN_STAT,
    event_name,
    plane_kind,
)
from profiler.xspace.wire import KIND_BYTES, KIND_DOUBLE, KIND_INT, KIND_REF, KIND_STR, KIND_UINT

if TYPE_CHECKING:  # the Decoded a line is added to (decode.py imports this module)
    from profiler.xspace.decode import Decoded

_INT_KINDS, _STRING_KINDS = (KIND_INT, KIND_UINT), (KIND_STR, KIND_REF)


def stat_value(s: xp.XStat, names: dict[int, str]):
    """A stat's value as a Python object (ref_value: the name it points at; bytes: `<N bytes>`)."""
    k = s.WhichOneof("value")
    if k == "ref_value":
        return names.get(s.ref_value, "")
    if k == "bytes_value":
        return f"<{len(s.bytes_value)} bytes>"
    return getattr(s, k) if k else None


def line_name(line) -> str:
    """A line's name as stored: `name`, else `display_name`, else `line <id>`."""
    return line.name or line.display_name or f"line {line.id}"


def _fills(sname: str, kind: int) -> bool:
    """Whether a stat of this (typed) name and value kind fills its typed events column."""
    return kind in (_STRING_KINDS if TYPED_STATS[sname] in STRING_COLUMNS else _INT_KINDS)


@dataclass
class PlaneMeta:
    """One plane's metadata as lookup arrays: what each of its lines reads."""

    path: str  # the file, for messages
    name: str  # the plane's name in the file
    stored_name: str  # as stored: prefixed with the host when a run has several files
    kind: str
    chip: int
    core: int
    stat_names: dict[int, str]  # stat metadata id -> name
    stat_ids: np.ndarray  # stat metadata ids, sorted
    stat_name_list: list[str]  # their names
    stat_str: np.ndarray  # their names' string ids (the values of ref_value stats)
    meta_ids: np.ndarray  # event metadata ids, sorted
    metas: list  # their XEventMetadata
    meta_name: np.ndarray  # string id of each one's name (and 0 after the last, for unknown ids)
    meta_raw_name: list[str]
    meta_typed: dict[str, np.ndarray]  # typed stat name -> its value on each event metadata (NULL: none)
    meta_args: list[tuple[int, str, object]]  # other metadata stats: (metadata index, key, value)
    marker_meta: list[int]  # event metadata flagged MARKER_STAT (step markers only)
    has_memory: bool  # some event metadata is a MemoryAllocation / MemoryDeallocation

    @classmethod
    def build(cls, d: Decoded, path: str, plane, stored_name: str, stat_names: dict[int, str]) -> PlaneMeta:
        """The lookups of `plane` (an XPlaneLite with lines); its typed metadata values checked."""
        kind, chip, core = plane_kind(plane.name)
        chk.check_plane_ids(f"{path}: plane {plane.name!r}", chip, core)
        meta_ids = np.array(sorted(plane.event_metadata), np.int64)
        metas = [plane.event_metadata[int(i)] for i in meta_ids]
        meta_name = np.array([d.strings(event_name(m.name, m.display_name)) for m in metas] + [0], np.int64)
        meta_typed: dict[str, np.ndarray] = {}
        meta_args: list[tuple[int, str, object]] = []
        marker_meta: list[int] = []
        for i, m in enumerate(metas):
            for s in m.stats:
                sname = stat_names.get(s.metadata_id, str(s.metadata_id))
                val = stat_value(s, stat_names)
                if sname == MARKER_STAT:
                    marker_meta.append(i)
                    continue
                col = TYPED_STATS.get(sname)
                is_str = col in STRING_COLUMNS
                if col and (isinstance(val, str) if is_str else isinstance(val, int)):
                    if not is_str:
                        chk.check_meta_value(f"{path}: plane {plane.name!r} event metadata {m.name!r}", sname, col, val)
                    arr = meta_typed.setdefault(sname, np.full(len(metas) + 1, NULL, np.int64))
                    arr[i] = d.strings(val) if is_str else val
                elif val is not None:
                    meta_args.append((i, sname, val))
        stat_ids = np.array(sorted(stat_names), np.int64)
        stat_name_list = [stat_names[int(i)] for i in stat_ids]
        stat_str = np.array([d.strings(nm) for nm in stat_name_list], np.int64)
        raw = [m.name for m in metas]
        return cls(
            path,
            plane.name,
            stored_name,
            kind,
            chip,
            core,
            stat_names,
            stat_ids,
            stat_name_list,
            stat_str,
            meta_ids,
            metas,
            meta_name,
            raw,
            meta_typed,
            meta_args,
            marker_meta,
            any(name in MEMORY_EVENTS for name in raw),
        )

    def ref_ids(self, refs: np.ndarray) -> np.ndarray:
        """String ids of ref_value stats: the name of the stat metadata each points at (0 if none)."""
        if not len(self.stat_ids):
            return np.zeros(len(refs), np.int64)
        pos = np.minimum(np.searchsorted(self.stat_ids, refs), len(self.stat_ids) - 1)
        return np.where(self.stat_ids[pos] == refs, self.stat_str[pos], 0)


@dataclass
class LineCtx:
    """One decoded line of a plane, its events' metadata and stats resolved against the plane's."""

    d: Decoded
    plane: PlaneMeta
    ev: LineEvents
    name: str  # the line's name
    where: str  # "file: plane 'P' line 'L'", for messages
    midx: np.ndarray  # per event: index of its metadata in plane.metas (len(metas) when unknown)
    start: np.ndarray  # per event: start, ps after the run's origin (checked)
    sidx: np.ndarray  # per stat row: index of its metadata in plane.stat_ids (where `known`)
    known: np.ndarray  # per stat row: its metadata id is one the plane names
    by_name: dict[str, list[StatColumn]]  # stat columns (events decoded by layout), by stat name
    base: int = 0  # event id of the line's first event, once its events are added

    @classmethod
    def build(cls, d: Decoded, plane: PlaneMeta, line, ev: LineEvents) -> LineCtx:
        """Resolve `ev`, the decoded events of `line`; event times are checked here."""
        name = line_name(line)
        if name == COUNTER_LINE or plane.has_memory:  # these read stats by name, row by row
            ev = ev.as_rows()
        by_name: dict[str, list[StatColumn]] = {}
        for c in ev.columns:
            by_name.setdefault(plane.stat_names.get(c.metadata_id, UNKNOWN_STAT.format(c.metadata_id)), []).append(c)
        meta_ids, n_meta = plane.meta_ids, len(plane.metas)
        midx = np.searchsorted(meta_ids, ev.metadata_id)
        midx = np.where(
            (midx < len(meta_ids)) & (meta_ids[np.minimum(midx, len(meta_ids) - 1)] == ev.metadata_id)
            if len(meta_ids)
            else False,
            midx,
            n_meta,
        )
        where = f"{plane.path}: plane {plane.name!r} line {name!r}"
        start = chk.event_starts(where, line.timestamp_ns, d.origin_ns, ev.offset_ps, ev.duration_ps)
        stat_ids = plane.stat_ids
        sidx = np.searchsorted(stat_ids, ev.stat_metadata_id) if len(stat_ids) else np.zeros(len(ev.stat_event), int)
        known = (
            (sidx < len(stat_ids)) & (stat_ids[np.minimum(sidx, max(len(stat_ids) - 1, 0))] == ev.stat_metadata_id)
            if len(stat_ids)
            else np.zeros(len(sidx), bool)
        )
        return cls(d, plane, ev, name, where, midx, start, sidx, known, by_name)

    @property
    def n(self) -> int:
        """Events on the line."""
        return len(self.ev.metadata_id)

    def has_stat(self, sname: str) -> bool:
        """Whether the plane names a stat `sname`."""
        return sname in self.plane.stat_name_list

    def stat_rows(self, sname: str) -> np.ndarray:
        """Mask of the stat rows of stat `sname` (the plane's first stat metadata of that name)."""
        return self.known & (self.sidx == self.plane.stat_name_list.index(sname))

    def ref_strings(self, rows: np.ndarray) -> np.ndarray:
        """String ids of str/ref stat values of stat rows `rows` (ref: the stat metadata's name)."""
        ev, p = self.ev, self.plane
        out = np.zeros(len(rows), np.int64)
        kind = ev.stat_kind[rows]
        ref = np.flatnonzero(kind == KIND_REF)
        if ref.size and len(p.stat_ids):
            pos = np.minimum(np.searchsorted(p.stat_ids, ev.stat_int[rows[ref]]), len(p.stat_ids) - 1)
            hit = p.stat_ids[pos] == ev.stat_int[rows[ref]]
            out[ref] = np.where(hit, p.stat_str[pos], 0)
        inline = np.flatnonzero(kind != KIND_REF)
        if inline.size:
            out[inline] = self._intern_payloads(rows[inline])
        return out

    def _intern_payloads(self, rows: np.ndarray) -> np.ndarray:
        """String ids of str/bytes stat payloads (bytes as `<N bytes>`): one Python step per distinct value."""
        ev, strings = self.ev, self.d.strings
        out = np.zeros(len(rows), np.int64)
        is_str = ev.stat_kind[rows] == KIND_STR
        if is_str.any():
            enc = pc.dictionary_encode(ev.stat_bytes(rows[is_str]))
            ids = np.array([strings(v.decode("utf-8", "replace")) for v in enc.dictionary.to_pylist()], np.int64)
            out[is_str] = ids[enc.indices.to_numpy(zero_copy_only=False)]
        raw = np.flatnonzero(~is_str)
        if raw.size:
            lens = ev.stat_str_len[rows[raw]]
            uniq, inv = np.unique(lens, return_inverse=True)
            out[raw] = np.array([strings(f"<{int(n)} bytes>") for n in uniq.tolist()], np.int64)[inv]
        return out


def typed_columns(line: LineCtx, dest=None) -> dict[str, np.ndarray]:
    """Typed event columns (NULL where none) from metadata stats, overridden by the events' own stats.

    `dest(column)` gives the int64 array to fill for a column (else each is a new array)."""
    ev, p, n = line.ev, line.plane, line.n
    is_int = (ev.stat_kind == KIND_INT) | (ev.stat_kind == KIND_UINT)
    is_str = (ev.stat_kind == KIND_STR) | (ev.stat_kind == KIND_REF)
    out = {}
    for f in TYPED_FIELDS:
        col, snames, string = f.name, f.xspace_read, f.name in STRING_COLUMNS
        vals = dest(col) if dest else np.empty(n, np.int64)
        columns = [(sname, c) for sname in snames for c in line.by_name.get(sname, ()) if _fills(sname, c.kind)]
        if not any(isinstance(c.index, slice) for _, c in columns):  # else a stat of every event, set last, hides them
            vals.fill(NULL)
            for sname in snames:  # a later name wins
                if sname in p.meta_typed:
                    mv = p.meta_typed[sname][line.midx]
                    np.copyto(vals, mv, where=mv != NULL)
        for sname in snames:
            if not line.has_stat(sname):
                continue
            sel = line.stat_rows(sname)
            if string:
                rows = np.flatnonzero(sel & is_str)
                vals[ev.stat_event[rows]] = line.ref_strings(rows)
            else:
                sel &= is_int
                chk.check_stat_values(line.where, sname, col, ev.stat_event[sel], ev.stat_kind[sel], ev.stat_int[sel])
                vals[ev.stat_event[sel]] = ev.stat_int[sel]
        for sname, c in columns:
            if not string:
                chk.check_stat_values(line.where, sname, col, c.index, c.kind, c.ints)
            vals[c.index] = p.ref_ids(c.ints) if string else c.ints
        out[col] = vals  # always present, so columns of all lines line up
    return out


def untyped_rows(line: LineCtx) -> np.ndarray:
    """Mask of the stat rows that fill no typed column (they become event_args rows)."""
    ev = line.ev
    mask = np.ones(len(ev.stat_event), bool)
    for sname in set(TYPED_STATS) & set(line.plane.stat_name_list):
        kinds = _STRING_KINDS if TYPED_STATS[sname] in STRING_COLUMNS else _INT_KINDS
        mask &= ~(line.stat_rows(sname) & np.isin(ev.stat_kind, kinds))
    return mask


def step_num_events(line: LineCtx) -> np.ndarray:
    """Events carrying a `step_num` stat (e.g. jax.profiler.StepTraceAnnotation): they mark a step."""
    has_num = np.zeros(line.n, bool)
    if line.has_stat(STEP_NUM):
        has_num[line.ev.stat_event[line.stat_rows(STEP_NUM)]] = True
    if STEP_NUM in line.plane.meta_typed:
        has_num |= line.plane.meta_typed[STEP_NUM][line.midx] != NULL
    for c in line.by_name.get(STEP_NUM, ()):
        has_num[c.index] = True
    return has_num


def event_args(line: LineCtx, rows_mask: np.ndarray) -> None:
    """Stat rows `rows_mask` (those filling no typed column) as event_args rows."""
    rows = np.flatnonzero(rows_mask)
    if not rows.size:
        return
    d, ev = line.d, line.ev
    keys = np.where(line.known[rows], line.sidx[rows], -1)
    key_ids = np.array([d.strings(n) for n in line.plane.stat_name_list] + [0], np.int64)
    key_col = key_ids[keys]
    if (keys < 0).any():  # stats without metadata: kept under their numeric id
        uids, inv = np.unique(ev.stat_metadata_id[rows[keys < 0]], return_inverse=True)
        key_col[keys < 0] = np.array([d.strings(UNKNOWN_STAT.format(u)) for u in uids.tolist()], np.int64)[inv.ravel()]
    kind = ev.stat_kind[rows]
    is_int = np.isin(kind, _INT_KINDS)
    ints = np.where(is_int, ev.stat_int[rows], NULL)
    doubles = np.where(kind == KIND_DOUBLE, ev.stat_double[rows], np.nan)
    strs = np.zeros(len(rows), np.int64)
    sk = np.flatnonzero(np.isin(kind, (KIND_STR, KIND_BYTES, KIND_REF)))
    strs[sk] = line.ref_strings(rows[sk])
    wide = is_int & chk.wide_ints(kind, ints)
    if wide.any():  # integers beyond int64 (uint64 above 2^63 - 1): exact, as text
        strs[wide], ints[wide] = chk.int_text(d.strings, kind[wide], ints[wide]), NULL
    d.add_args(line.base + ev.stat_event[rows], key_col, ints, doubles, strs)


def column_args(line: LineCtx) -> None:
    """Stat columns that fill no typed column become argument rows, one per event."""
    d = line.d
    for sname, cs in line.by_name.items():
        for c in cs:
            if sname in TYPED_STATS and _fills(sname, c.kind):
                continue
            ids = line.base + c.events
            if c.kind in _INT_KINDS:
                wide, strs = chk.wide_ints(c.kind, c.ints), None
                if wide.any():
                    strs = np.zeros(len(c.ints), np.int64)
                    strs[wide] = chk.int_text(d.strings, c.kind, c.ints[wide])
                d.add_args(ids, sname, ints=np.where(wide, NULL, c.ints), strs=strs)
            elif c.kind == KIND_REF:
                d.add_args(ids, sname, strs=line.plane.ref_ids(c.ints))
            else:  # a stat without a value
                d.add_args(ids, sname)


def meta_args(line: LineCtx) -> None:
    """Stats of event metadata that are not typed columns: one arg row per event of that metadata."""
    d = line.d
    for i, key, val in line.plane.meta_args:
        ev_ids = line.base + np.flatnonzero(line.midx == i)
        if not ev_ids.size:
            continue
        n = len(ev_ids)
        if isinstance(val, int) and NULL < val <= chk.I64_MAX:
            d.add_args(ev_ids, key, ints=np.full(n, val))
        elif isinstance(val, float):
            d.add_args(ev_ids, key, doubles=np.full(n, val))
        else:
            d.add_args(ev_ids, key, strs=np.full(n, d.strings(str(val))))


def counter_line(line: LineCtx) -> None:
    """A `_counters_` line: each event is a sample of the counter named by the event."""
    ev, p, d = line.ev, line.plane, line.d
    value = np.full(len(ev.metadata_id), np.nan)
    for sname in reversed(COUNTER_VALUE_STATS):  # the first name present wins
        if line.has_stat(sname):
            sel = line.stat_rows(sname)
            rows = ev.stat_event[sel]
            value[rows] = chk.numeric_values(
                line.where, sname, rows, ev.stat_kind[sel], ev.stat_int[sel], ev.stat_double[sel]
            )
    for i in np.unique(line.midx).tolist():
        name = p.meta_raw_name[i] if i < len(p.meta_raw_name) else "counter"
        unit = ""
        if i < len(p.metas):
            for s in p.metas[i].stats:
                if p.stat_names.get(s.metadata_id) == UNIT_STAT:
                    unit = str(stat_value(s, p.stat_names))
        t = d.tracks(p.stored_name, name, "counter", p.chip, -1, unit)
        sel = (line.midx == i) & ~np.isnan(value)
        d.add_counter(t, line.start[sel], value[sel])


def memory_counters(line: LineCtx) -> None:
    """MemoryAllocation/Deallocation events: memory stats become counter samples, one track per
    allocator and stat (`"<allocator_name> <stat>"`)."""
    ev, p, d = line.ev, line.plane, line.d
    is_mem = np.isin(line.midx, [i for i, n in enumerate(p.meta_raw_name) if n in MEMORY_EVENTS])
    alloc = np.zeros(len(line.midx), np.int64)  # string id of the allocator name ("" when absent)
    if line.has_stat(ALLOCATOR_STAT):
        sel = np.flatnonzero(line.stat_rows(ALLOCATOR_STAT))
        sel = sel[np.isin(ev.stat_kind[sel], (KIND_STR, KIND_BYTES, KIND_REF))]
        alloc[ev.stat_event[sel]] = line.ref_strings(sel)
    for sname, unit in MEMORY_STATS.items():
        if not line.has_stat(sname):
            continue
        sel = line.stat_rows(sname) & is_mem[ev.stat_event]
        rows = ev.stat_event[sel]
        vals = chk.numeric_values(line.where, sname, rows, ev.stat_kind[sel], ev.stat_int[sel], ev.stat_double[sel])
        for a in sorted(set(alloc[rows].tolist()), key=lambda i: d.strings.values[i]):
            pick = alloc[rows] == a
            t = d.tracks(p.stored_name, f"{d.strings.values[a]} {sname}".strip(), "counter", p.chip, -1, unit)
            d.add_counter(t, line.start[rows[pick]], vals[pick])

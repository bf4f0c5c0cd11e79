"""Ingest XProf captures (`.xplane.pb` XSpace files) into the store as runs.

    logdir/plugins/profile/<run>/<host>.xplane.pb  ->  runs, tracks, events, steps, counters

Called by `trace_to_store.ingest_traces` inside its transaction, so a bad file
leaves the store as it was. The mapping (both directions) is documented in
docs/trace-format.md, "XSpace mapping"; in short:

- each plane line is a track (plane name, line name); kind, chip and core come from
  XProf's plane names (`/device:TPU:N`, `/device:TPU:N SparseCore M`, `/host:...`);
- event time is `line.timestamp_ns * 1000 + offset_ps`, stored relative to the
  run's `start_time_unix_ns` (the earliest line origin) so it fits int64 ps;
- stats on the event and on its event metadata are resolved through the plane's
  stat metadata; names in `TYPED_STATS` fill typed columns, all others become
  event_args (bytes values as a `<N bytes>` placeholder), none are dropped;
- steps come from `group_id` / `step_num` stats and `Steps` / `Sparse Core Steps`
  lines; events without a step inherit the step whose marker contains them;
- `_counters_` lines and `MemoryAllocation` / `MemoryDeallocation` events give
  counter tracks.

Events are decoded column-wise (profiler/xplane_wire.py), not one object per event.
"""

from __future__ import annotations

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import xplane_checks as chk
from profiler import xplane_pb2 as xp
from profiler import xplane_wire as w
from profiler.errors import TraceFormatError
from profiler.xplane_facts import SCPROF_PLANE, run_facts
from profiler.xplane_files import check_path, find_runs, is_xplane_path, read_capture, stem  # noqa: F401

# Stat name -> typed events column. Values on the event win over its metadata's.
TYPED_STATS = {
    "group_id": "step",
    "step_num": "step",
    "table": "table",
    "table_name": "table",
    "sc": "sc",
    "sparse_core": "sc",
    "minibatch": "minibatch",
    "ids": "ids",
    "unique_ids": "unique_ids",
    "dropped_ids": "dropped_ids",
    "bytes": "bytes",
    "bytes_accessed": "bytes",
    "bytes_transferred": "bytes",
    "flops": "flops",
    "hlo_category": "category",
    "category": "category",
}
STRING_COLUMNS = ("table", "category")  # typed columns holding string ids
# group_id wins over step_num for events.step (XProf groups by group_id).
_STEP_PRIORITY = ("group_id", "step_num")
STEP_LINES = ("Steps", "Sparse Core Steps")
COUNTER_LINE = "_counters_"
MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")
MEMORY_STATS = {
    "bytes_allocated": "bytes", "bytes_reserved": "bytes", "bytes_available": "bytes",
    "peak_bytes_in_use": "bytes", "requested_bytes": "bytes", "allocation_bytes": "bytes",
    "fragmentation": "ratio",
}  # fmt: skip
COUNTER_VALUE_STATS = ("counter_value", "value", "Scaled Value", "Raw Value")
# Plane stats that fill runs' hardware columns.
_TPU_RE = re.compile(r"^/device:TPU:(\d+)$")
_SC_RE = re.compile(r"^/device:TPU:(\d+) SparseCore(?: [a-zA-Z]+)? (\d+)$")
_DEVICE_RE = re.compile(r"^/device:[A-Za-z_]+:(\d+)")
MARKER_STAT = "scprof_step_marker"  # event metadata stat: a step marker only, not an event of the run


def plane_kind(name: str) -> tuple[str, int, int]:
    """(kind, chip, core) of an XProf plane name."""
    num = chk.plane_number
    if m := _SC_RE.match(name):
        return "sparsecore", num(m[1]), num(m[2])
    if m := _TPU_RE.match(name):
        return "tensorcore", num(m[1]), 0
    if name.startswith("/host:"):
        return "host", -1, -1
    if m := _DEVICE_RE.match(name):
        return "unknown", num(m[1]), -1
    return "unknown", -1, -1


# --------------------------------------------------------------------------- decoding


@dataclass
class _Interner:
    values: list[str] = field(default_factory=lambda: [""])
    ids: dict[str, int] = field(default_factory=lambda: {"": 0})

    def __call__(self, s: str) -> int:
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.values)
            self.values.append(s)
        return i


@dataclass
class _Tracks:
    rows: list[dict] = field(default_factory=list)
    ids: dict[tuple[str, str], int] = field(default_factory=dict)

    def __call__(self, plane: str, line: str, kind: str, chip: int, core: int, unit: str = "") -> int:
        k = (plane, line)
        if k not in self.ids:
            self.ids[k] = len(self.rows) + 1
            self.rows.append(
                dict(
                    track_id=len(self.rows) + 1,
                    plane=plane,
                    line=line,
                    kind=kind,
                    chip=chip,
                    core=core,
                    tile=-1,
                    unit=unit,
                )
            )
        return self.ids[k]


@dataclass
class Decoded:
    """A capture decoded into store-shaped columns (times relative to origin_ns)."""

    strings: _Interner
    tracks: _Tracks
    events: dict[str, list[np.ndarray]]
    args: dict[str, list]
    counters: dict[str, list]
    markers: dict[str, list]
    plane_stats: dict[str, dict]
    hostnames: list[str]
    origin_ns: int
    scprof: dict  # run facts from an scprof-written file, else {}
    plane_kinds: dict = field(default_factory=dict)
    digests: list[bytes] = field(default_factory=list)  # SHA-1 of each file (the run's uuid)
    n_events: int = 0  # events decoded so far (rows of the `events` parts)


def _stat_value(s: xp.XStat, names: dict[int, str]):
    k = s.WhichOneof("value")
    if k == "ref_value":
        return names.get(s.ref_value, "")
    if k == "bytes_value":
        return f"<{len(s.bytes_value)} bytes>"
    return getattr(s, k) if k else None


def decode_files(files: list[str], fast: bool = True) -> Decoded:
    """Decode the host files of one run into columns; raises TraceFormatError naming the file.

    `fast=False` decodes events with the general decoder only (xplane_wire.decode_events).
    """
    spaces, digests = [], []
    for path in files:
        data = read_capture(path)
        if not data:
            raise TraceFormatError(f"{path}: empty file, not an XSpace (.xplane.pb)")
        try:
            planes, hosts = w.split_space(data, path)
            lite = [w.XPlaneLite.FromString(bytes(p)) for p in planes]
        except w.XSpaceWireError as e:
            raise TraceFormatError(str(e)) from None
        except Exception as e:  # protobuf DecodeError: cut short, corrupt, bad UTF-8
            raise TraceFormatError(f"{path}: not a valid XSpace ({type(e).__name__}: {e})") from None
        if not lite:
            raise TraceFormatError(f"{path}: XSpace holds no planes (not an .xplane.pb, or corrupt)")
        chk.check_repeats(path, data, [p.name for p in lite])
        spaces.append((path, lite, hosts))
        digests.append(hashlib.sha1(data).digest())
    multi = len(spaces) > 1
    prefixes = [f"{hosts[0] if hosts else stem(path)} " if multi else "" for path, _, hosts in spaces]
    chk.check_files(files, digests, [[pre + p.name for p in sp[1]] for pre, sp in zip(prefixes, spaces, strict=True)])
    origins = [(path, p.name, ln) for path, lite, _ in spaces for p in lite if p.name != SCPROF_PLANE
               for ln in p.lines if ln.events]  # fmt: skip
    if not origins:
        raise TraceFormatError(f"{files[0]}: XSpace holds no events")
    chk.check_line_count(files[0] if len(files) == 1 else os.path.dirname(files[0]), len(origins))
    for path, pname, ln in origins:
        chk.check_timestamp(f"{path}: plane {pname!r} line {_line_name(ln)!r}", ln.timestamp_ns)
    origin_ns = min(ln.timestamp_ns for _, _, ln in origins)
    d = Decoded(_Interner(), _Tracks(), {}, {}, {}, {}, {}, [], origin_ns, {}, digests=digests)
    jobs = [(f"{path}: plane {plane.name!r} line {_line_name(line)!r}", line.events)
            for path, lite, _ in spaces for plane in lite if plane.name != SCPROF_PLANE
            for line in plane.lines if line.events]  # fmt: skip
    try:
        lines = iter(_decode_lines(jobs, fast))
    except w.XSpaceWireError as e:
        raise TraceFormatError(str(e)) from None
    for (path, lite, hosts), prefix in zip(spaces, prefixes, strict=True):
        d.hostnames += hosts
        for plane in lite:
            if plane.name == SCPROF_PLANE:
                _decode_plane(d, path, plane, prefix, [])
                continue
            _decode_plane(d, path, plane, prefix, [next(lines) if ln.events else None for ln in plane.lines])
    return d


_DECODE_THREADS = min(2, os.cpu_count() or 1)  # numpy releases the GIL in most of the decoder's work


def _decode_lines(jobs: list[tuple[str, object]], fast: bool) -> list[w.LineEvents]:
    """Decode every line's events (in threads when there is enough work to share)."""

    def one(job):
        return w.decode_events(job[1], job[0], fast=fast)

    if _DECODE_THREADS > 1 and len(jobs) > 1 and sum(len(e) for _, e in jobs) >= 200_000:
        with ThreadPoolExecutor(_DECODE_THREADS) as ex:
            return list(ex.map(one, jobs))
    return [one(j) for j in jobs]


def _line_name(line) -> str:
    return line.name or line.display_name or f"line {line.id}"


def _decode_plane(d: Decoded, path: str, plane, prefix: str, decoded: list) -> None:
    """One plane into `d`; `decoded` holds its lines' decoded events (None for lines without events)."""
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    pstats = {stat_names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, stat_names) for s in plane.stats}
    if plane.name == SCPROF_PLANE:
        d.scprof = pstats
        return
    if pstats:
        d.plane_stats[prefix + plane.name] = pstats
        d.plane_kinds[prefix + plane.name] = plane_kind(plane.name)[0]
    if not plane.lines:
        return
    kind, chip, core = plane_kind(plane.name)
    chk.check_plane_ids(f"{path}: plane {plane.name!r}", chip, core)
    pname = prefix + plane.name
    # Event metadata: names and constant stats, as lookup arrays indexed by position.
    meta_ids = np.array(sorted(plane.event_metadata), np.int64)
    metas = [plane.event_metadata[int(i)] for i in meta_ids]
    meta_name = np.array([d.strings(m.display_name or m.name) for m in metas] + [0], np.int64)
    meta_raw_name = [m.name for m in metas]
    meta_typed: dict[str, np.ndarray] = {}
    meta_args: list[tuple[int, str, object]] = []  # (metadata index, key, value)
    marker_meta: list[int] = []
    for i, m in enumerate(metas):
        for s in m.stats:
            sname = stat_names.get(s.metadata_id, str(s.metadata_id))
            val = _stat_value(s, stat_names)
            if sname == MARKER_STAT:
                marker_meta.append(i)
                continue
            col = TYPED_STATS.get(sname)
            is_str = col in STRING_COLUMNS
            if col and (isinstance(val, str) if is_str else isinstance(val, int)):
                if not is_str:
                    chk.check_meta_value(f"{path}: plane {plane.name!r} event metadata {m.name!r}", sname, col, val)
                arr = meta_typed.setdefault(sname, np.full(len(metas) + 1, np.iinfo(np.int64).min, np.int64))
                arr[i] = d.strings(val) if is_str else val
            elif val is not None:
                meta_args.append((i, sname, val))
    stat_ids = np.array(sorted(stat_names), np.int64)
    stat_name_list = [stat_names[int(i)] for i in stat_ids]
    stat_str = np.array([d.strings(nm) for nm in stat_name_list], np.int64)  # for ref_value stats
    has_memory = any(name in MEMORY_EVENTS for name in meta_raw_name)
    for line, ev in zip(plane.lines, decoded, strict=True):
        if ev is None:
            continue
        lname = _line_name(line)
        if lname == COUNTER_LINE or has_memory:  # these read stats by name, row by row
            ev = ev.as_rows()
        n = len(ev.metadata_id)
        by_name: dict[str, list[w.StatColumn]] = {}  # stat columns (events decoded by layout), by stat name
        for c in ev.columns:
            by_name.setdefault(stat_names.get(c.metadata_id, f"stat_{c.metadata_id}"), []).append(c)
        midx = np.searchsorted(meta_ids, ev.metadata_id)
        midx = np.where((midx < len(meta_ids)) & (meta_ids[np.minimum(midx, len(meta_ids) - 1)] == ev.metadata_id)
                        if len(meta_ids) else False, midx, len(metas))  # fmt: skip
        where = f"{path}: plane {plane.name!r} line {lname!r}"
        start = chk.event_starts(where, line.timestamp_ns, d.origin_ns, ev.offset_ps, ev.duration_ps)
        # Stats on the events, resolved to names.
        sidx = np.searchsorted(stat_ids, ev.stat_metadata_id) if len(stat_ids) else np.zeros(len(ev.stat_event), int)
        known = (sidx < len(stat_ids)) & (stat_ids[np.minimum(sidx, max(len(stat_ids) - 1, 0))] == ev.stat_metadata_id) \
            if len(stat_ids) else np.zeros(len(sidx), bool)  # fmt: skip
        jidx = np.where(known, sidx, -1)
        cols = _typed_columns(d, ev, midx, meta_typed, jidx, stat_name_list, stat_ids, stat_str, n, by_name, where)
        args_mask = np.ones(len(ev.stat_event), bool)
        for sname in set(TYPED_STATS) & set(stat_name_list):
            j = stat_name_list.index(sname)
            kinds = (w.KIND_STR, w.KIND_REF) if TYPED_STATS[sname] in STRING_COLUMNS else (w.KIND_INT, w.KIND_UINT)
            hit = known & (sidx == j) & np.isin(ev.stat_kind, kinds)
            args_mask &= ~hit
        if lname == COUNTER_LINE:
            _counter_line(d, pname, kind, chip, ev, midx, meta_raw_name, sidx, known, stat_name_list, start, metas,
                          plane, stat_names, where)  # fmt: skip
            continue
        track = d.tracks(pname, lname, kind, chip, core)
        base = d.n_events  # a running count: summing the parts per line was quadratic in lines
        d.n_events += n
        ev_cols = d.events
        ev_cols.setdefault("track", []).append(np.full(n, track, np.int32))
        ev_cols.setdefault("name", []).append(meta_name[midx])
        ev_cols.setdefault("start_ps", []).append(start)
        ev_cols.setdefault("dur_ps", []).append(ev.duration_ps)
        for c, v in cols.items():
            ev_cols.setdefault(c, []).append(v)
        has_num = np.zeros(n, bool)
        if "step_num" in stat_name_list:
            has_num[ev.stat_event[known & (sidx == stat_name_list.index("step_num"))]] = True
        if "step_num" in meta_typed:
            has_num |= meta_typed["step_num"][midx] != _NULL
        for c in by_name.get("step_num", ()):
            has_num[c.events] = True
        ev_cols.setdefault("has_step_num", []).append(has_num)
        ev_cols.setdefault("only_marker", []).append(np.isin(midx, marker_meta))
        ev_cols.setdefault("is_step_line", []).append(np.full(n, lname in STEP_LINES))
        ev_cols.setdefault("plane_id", []).append(np.full(n, d.strings(pname), np.int64))
        _event_args(d, ev, args_mask, known, sidx, stat_name_list, stat_ids, stat_str, base)
        _column_args(d, by_name, stat_ids, stat_str, base)
        if meta_args:
            _meta_args(d, meta_args, midx, base)
        if ev.num_occurrences.any():
            _add_args(d, base + np.flatnonzero(ev.num_occurrences), "num_occurrences", ints=ev.num_occurrences[
                ev.num_occurrences != 0])  # fmt: skip
        if has_memory:
            _memory_counters(d, pname, kind, chip, ev, midx, meta_raw_name, sidx, known, stat_name_list, start,
                             stat_ids, stat_str, where)  # fmt: skip


_NULL = np.iinfo(np.int64).min


def _ref_strings(d: Decoded, ev, rows: np.ndarray, stat_ids: np.ndarray, stat_str: np.ndarray) -> np.ndarray:
    """String ids of str/ref stat values (ref: the name of the stat metadata it points at)."""
    out = np.zeros(len(rows), np.int64)
    kind = ev.stat_kind[rows]
    ref = np.flatnonzero(kind == w.KIND_REF)
    if ref.size and len(stat_ids):
        pos = np.minimum(np.searchsorted(stat_ids, ev.stat_int[rows[ref]]), len(stat_ids) - 1)
        hit = stat_ids[pos] == ev.stat_int[rows[ref]]
        out[ref] = np.where(hit, stat_str[pos], 0)
    inline = np.flatnonzero(kind != w.KIND_REF)
    if inline.size:
        out[inline] = _intern_payloads(d, ev, rows[inline])
    return out


def _intern_payloads(d: Decoded, ev, rows: np.ndarray) -> np.ndarray:
    """String ids of str/bytes stat payloads (bytes as `<N bytes>`): one Python step per distinct value."""
    out = np.zeros(len(rows), np.int64)
    is_str = ev.stat_kind[rows] == w.KIND_STR
    if is_str.any():
        enc = pc.dictionary_encode(ev.stat_bytes(rows[is_str]))
        ids = np.array([d.strings(v.decode("utf-8", "replace")) for v in enc.dictionary.to_pylist()], np.int64)
        out[is_str] = ids[enc.indices.to_numpy(zero_copy_only=False)]
    raw = np.flatnonzero(~is_str)
    if raw.size:
        lens = ev.stat_str_len[rows[raw]]
        uniq, inv = np.unique(lens, return_inverse=True)
        out[raw] = np.array([d.strings(f"<{int(n)} bytes>") for n in uniq.tolist()], np.int64)[inv]
    return out


def _typed_columns(d, ev, midx, meta_typed, jidx, stat_name_list, stat_ids, stat_str, n,
                   by_name, where) -> dict[str, np.ndarray]:  # fmt: skip
    """Typed event columns from metadata stats, overridden by the events' own stats.

    `jidx` is each stat row's index into stat_name_list (-1 if its metadata is unknown);
    `by_name` holds the stat columns by name.
    """
    is_int = (ev.stat_kind == w.KIND_INT) | (ev.stat_kind == w.KIND_UINT)
    is_str = (ev.stat_kind == w.KIND_STR) | (ev.stat_kind == w.KIND_REF)
    by_col: dict[str, list[str]] = {}
    for sname, col in TYPED_STATS.items():
        by_col.setdefault(col, []).append(sname)
    out = {}
    for col, snames in by_col.items():
        if col == "step":  # lower priority first, so group_id is applied last and wins
            snames = list(reversed(_STEP_PRIORITY))
        vals = np.full(n, _NULL, np.int64)
        for sname in snames:
            if sname in meta_typed:
                mv = meta_typed[sname][midx]
                vals = np.where(mv != _NULL, mv, vals)
        for sname in snames:
            if sname not in stat_name_list:
                continue
            sel = jidx == stat_name_list.index(sname)
            if col in STRING_COLUMNS:
                rows = np.flatnonzero(sel & is_str)
                vals[ev.stat_event[rows]] = _ref_strings(d, ev, rows, stat_ids, stat_str)
            else:
                sel &= is_int
                chk.check_stat_values(where, sname, col, ev.stat_event[sel], ev.stat_kind[sel], ev.stat_int[sel])
                vals[ev.stat_event[sel]] = ev.stat_int[sel]
        for sname in snames:
            for c in by_name.get(sname, ()):
                if _typed_kind(sname, c.kind):
                    if col not in STRING_COLUMNS:
                        chk.check_stat_values(where, sname, col, c.events, c.kind, c.ints)
                    vals[c.events] = _ref_ids(stat_ids, stat_str, c.ints) if col in STRING_COLUMNS else c.ints
        out[col] = vals  # always present, so columns of all lines line up
    return out


def _typed_kind(sname: str, kind: int) -> bool:
    """Whether a stat of this name and value kind fills its typed events column."""
    if TYPED_STATS[sname] in STRING_COLUMNS:
        return kind in (w.KIND_STR, w.KIND_REF)
    return kind in (w.KIND_INT, w.KIND_UINT)


def _ref_ids(stat_ids: np.ndarray, stat_str: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """String ids of ref_value stats: the name of the stat metadata each points at (0 if none)."""
    if not len(stat_ids):
        return np.zeros(len(refs), np.int64)
    pos = np.minimum(np.searchsorted(stat_ids, refs), len(stat_ids) - 1)
    return np.where(stat_ids[pos] == refs, stat_str[pos], 0)


def _column_args(d: Decoded, by_name: dict, stat_ids: np.ndarray, stat_str: np.ndarray, base: int) -> None:
    """Stat columns that fill no typed column become argument rows, one per event."""
    for sname, cs in by_name.items():
        for c in cs:
            if sname in TYPED_STATS and _typed_kind(sname, c.kind):
                continue
            ids = base + c.events
            if c.kind in (w.KIND_INT, w.KIND_UINT):
                wide, strs = chk.wide_ints(c.kind, c.ints), None
                if wide.any():
                    strs = np.zeros(len(c.ints), np.int64)
                    strs[wide] = chk.int_text(d.strings, c.kind, c.ints[wide])
                _add_args(d, ids, sname, ints=np.where(wide, _NULL, c.ints), strs=strs)
            elif c.kind == w.KIND_REF:
                _add_args(d, ids, sname, strs=_ref_ids(stat_ids, stat_str, c.ints))
            else:  # a stat without a value
                _add_args(d, ids, sname)


def _add_args(d: Decoded, event_ids, key: str | np.ndarray, ints=None, doubles=None, strs=None) -> None:
    """Append argument rows; `key` is a name or an array of string ids."""
    n = len(event_ids)
    a = d.args
    a.setdefault("event_id", []).append(np.asarray(event_ids, np.int64))
    a.setdefault("key", []).append(np.full(n, d.strings(key), np.int64) if isinstance(key, str) else key)
    a.setdefault("int_value", []).append(np.asarray(ints, np.int64) if ints is not None else np.full(n, _NULL))
    a.setdefault("double_value", []).append(np.asarray(doubles, np.float64) if doubles is not None
                                            else np.full(n, np.nan))  # fmt: skip
    a.setdefault("string_id", []).append(np.asarray(strs, np.int64) if strs is not None else np.zeros(n, np.int64))


def _event_args(d, ev, args_mask, known, sidx, stat_name_list, stat_ids, stat_str, base) -> None:
    rows = np.flatnonzero(args_mask)
    if not rows.size:
        return
    keys = np.where(known[rows], sidx[rows], -1)
    key_ids = np.array([d.strings(n) for n in stat_name_list] + [0], np.int64)
    key_col = key_ids[keys]
    if (keys < 0).any():  # stats without metadata: kept under their numeric id
        uids, inv = np.unique(ev.stat_metadata_id[rows[keys < 0]], return_inverse=True)
        key_col[keys < 0] = np.array([d.strings(f"stat_{u}") for u in uids.tolist()], np.int64)[inv.ravel()]
    kind = ev.stat_kind[rows]
    is_int = np.isin(kind, (w.KIND_INT, w.KIND_UINT))
    ints = np.where(is_int, ev.stat_int[rows], _NULL)
    doubles = np.where(kind == w.KIND_DOUBLE, ev.stat_double[rows], np.nan)
    strs = np.zeros(len(rows), np.int64)
    sk = np.flatnonzero(np.isin(kind, (w.KIND_STR, w.KIND_BYTES, w.KIND_REF)))
    strs[sk] = _ref_strings(d, ev, rows[sk], stat_ids, stat_str)
    wide = is_int & chk.wide_ints(kind, ints)
    if wide.any():  # integers beyond int64 (uint64 above 2^63 - 1): exact, as text
        strs[wide], ints[wide] = chk.int_text(d.strings, kind[wide], ints[wide]), _NULL
    _add_args(d, base + ev.stat_event[rows], key_col, ints, doubles, strs)


def _meta_args(d, meta_args, midx, base) -> None:
    """Stats of event metadata that are not typed columns: one arg row per event of that metadata."""
    for i, key, val in meta_args:
        ev_ids = base + np.flatnonzero(midx == i)
        if not ev_ids.size:
            continue
        n = len(ev_ids)
        if isinstance(val, int) and _NULL < val <= chk.I64_MAX:
            _add_args(d, ev_ids, key, ints=np.full(n, val))
        elif isinstance(val, float):
            _add_args(d, ev_ids, key, doubles=np.full(n, val))
        else:
            _add_args(d, ev_ids, key, strs=np.full(n, d.strings(str(val))))


def _counter_line(d, pname, kind, chip, ev, midx, meta_raw_name, sidx, known, stat_name_list, start, metas,
                  plane, stat_names, where) -> None:  # fmt: skip
    """`_counters_` line: each event is a sample of the counter named by the event."""
    value = np.full(len(ev.metadata_id), np.nan)
    for sname in reversed(COUNTER_VALUE_STATS):
        if sname in stat_name_list:
            sel = known & (sidx == stat_name_list.index(sname))
            rows = ev.stat_event[sel]
            value[rows] = chk.numeric_values(where, sname, rows, ev.stat_kind[sel], ev.stat_int[sel],
                                             ev.stat_double[sel])  # fmt: skip
    for i in np.unique(midx).tolist():
        name = meta_raw_name[i] if i < len(meta_raw_name) else "counter"
        unit = ""
        if i < len(metas):
            for s in metas[i].stats:
                if stat_names.get(s.metadata_id) == "unit":
                    unit = str(_stat_value(s, stat_names))
        t = d.tracks(pname, name, "counter", chip, -1, unit)
        sel = (midx == i) & ~np.isnan(value)
        _add_counter(d, t, start[sel], value[sel])


def _memory_counters(d, pname, kind, chip, ev, midx, meta_raw_name, sidx, known, stat_name_list, start,
                     stat_ids, stat_str, where) -> None:  # fmt: skip
    """MemoryAllocation/Deallocation events: memory stats become counter samples."""
    is_mem = np.isin(midx, [i for i, n in enumerate(meta_raw_name) if n in MEMORY_EVENTS])
    alloc = np.zeros(len(midx), np.int64)  # string id of the allocator name ("" when absent)
    if "allocator_name" in stat_name_list:
        sel = np.flatnonzero(known & (sidx == stat_name_list.index("allocator_name")))
        sel = sel[np.isin(ev.stat_kind[sel], (w.KIND_STR, w.KIND_BYTES, w.KIND_REF))]
        alloc[ev.stat_event[sel]] = _ref_strings(d, ev, sel, stat_ids, stat_str)
    for sname, unit in MEMORY_STATS.items():
        if sname not in stat_name_list:
            continue
        sel = known & (sidx == stat_name_list.index(sname)) & is_mem[ev.stat_event]
        rows = ev.stat_event[sel]
        vals = chk.numeric_values(where, sname, rows, ev.stat_kind[sel], ev.stat_int[sel], ev.stat_double[sel])
        for a in sorted(set(alloc[rows].tolist()), key=lambda i: d.strings.values[i]):
            pick = alloc[rows] == a
            t = d.tracks(pname, f"{d.strings.values[a]} {sname}".strip(), "counter", chip, -1, unit)
            _add_counter(d, t, start[rows[pick]], vals[pick])


def _add_counter(d, track, ts, values) -> None:
    d.counters.setdefault("track", []).append(np.full(len(ts), track, np.int32))
    d.counters.setdefault("ts_ps", []).append(np.asarray(ts, np.int64))
    d.counters.setdefault("value", []).append(np.asarray(values, np.float64))


# --------------------------------------------------------------------------- steps


def _steps(d: Decoded, ev: dict[str, np.ndarray], files_hint: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """events.step (filled by containment) and the step markers."""
    n = len(ev["start_ps"])
    step = ev["step"] if "step" in ev else np.full(n, _NULL, np.int64)
    step = step.copy()
    has_num = ev.get("step_num_marker", np.zeros(n, bool))
    is_marker = ev["is_step_line"] | has_num
    mk = np.flatnonzero(is_marker)
    m_step = step[mk].copy()
    # Steps-line events without a step stat: XProf names them by step number.
    missing = np.flatnonzero(m_step == _NULL)
    if missing.size:  # one Python step per distinct name
        uniq, first, inv = np.unique(ev["name"][mk[missing]], return_index=True, return_inverse=True)
        track_of = {r["track_id"]: r for r in d.tracks.rows}

        def where(i: int) -> str:
            t = track_of[int(ev["track"][mk[missing[first[i]]]])]
            return f"{files_hint}: plane {t['plane']!r} line {t['line']!r}"

        num = chk.step_numbers([d.strings.values[i] for i in uniq.tolist()], where)[inv.ravel()]
        m_step[missing] = np.where(num >= 0, num, missing)
        step[mk] = m_step
    markers = {"track": ev["track"][mk], "step": m_step, "start_ps": ev["start_ps"][mk], "dur_ps": ev["dur_ps"][mk],
               "plane": ev["plane_id"][mk]}  # fmt: skip
    if not mk.size and (step != _NULL).any():
        # Only group_id stats: one marker per plane and step, spanning its events.
        sel = np.flatnonzero(step != _NULL)
        key = np.stack([ev["plane_id"][sel], step[sel]], 1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.ravel()
        lo = np.full(len(uniq), np.iinfo(np.int64).max)
        hi = np.full(len(uniq), np.iinfo(np.int64).min)
        np.minimum.at(lo, inv, ev["start_ps"][sel])
        np.maximum.at(hi, inv, ev["start_ps"][sel] + ev["dur_ps"][sel])
        first_track = np.zeros(len(uniq), np.int64)
        first_track[inv[::-1]] = ev["track"][sel][::-1]
        markers = {"track": first_track, "step": uniq[:, 1], "start_ps": lo, "dur_ps": hi - lo, "plane": uniq[:, 0]}
    # Containment: an event without a step takes the step of its plane's marker around its start.
    todo = step == _NULL
    if todo.any() and len(markers["start_ps"]):
        for plane in np.unique(markers["plane"]).tolist():
            pm = markers["plane"] == plane
            order = np.argsort(markers["start_ps"][pm], kind="stable")
            ms, md, mstep = markers["start_ps"][pm][order], markers["dur_ps"][pm][order], markers["step"][pm][order]
            sel = np.flatnonzero(todo & (ev["plane_id"] == plane))
            k = np.searchsorted(ms, ev["start_ps"][sel], side="right") - 1
            ok = (k >= 0) & (ev["start_ps"][sel] < ms[np.maximum(k, 0)] + md[np.maximum(k, 0)])
            step[sel[ok]] = mstep[k[ok]]
    return step, markers


# --------------------------------------------------------------------------- store


def ingest_xplane_run(con, run_id: int, name: str, files: list[str], insert_arrow) -> dict:
    """Insert one decoded capture as run `run_id` (inside the caller's transaction).

    Returns the run facts (uuid, events, ...). `insert_arrow(con, sql, run_id, table)`
    is trace_to_store's helper.
    """
    d = decode_files(files)
    ev = {k: np.concatenate(v) for k, v in d.events.items()}
    if "start_ps" not in ev or not len(ev["start_ps"]):
        raise TraceFormatError(f"{files[0]}: XSpace holds no events")
    n = len(ev["start_ps"])
    ev["step_num_marker"] = _step_num_markers(d, ev, n)
    only_marker = ev.pop("only_marker")
    ev["is_step_line"] = ev["is_step_line"] | only_marker
    chk.check_totals(files[0], ev)
    step, markers = _steps(d, ev, files[0])
    keep = ~only_marker
    new_id = np.cumsum(keep) - 1
    if not keep.all():
        ev = {k: v[keep] for k, v in ev.items()}
        step = step[keep]
        n = int(keep.sum())
        if d.args:
            old = np.concatenate(d.args["event_id"])
            ok = keep[old]
            d.args = {k: [np.concatenate(v)[ok]] for k, v in d.args.items()}
            d.args["event_id"] = [new_id[old[ok]]]
    null32 = lambda a: pa.array(a, pa.int64(), mask=(a == _NULL))  # noqa: E731
    table = pa.table({
        "event_id": np.arange(n, dtype=np.int64), "track_id": ev["track"], "name_id": ev["name"],
        "start_ps": ev["start_ps"], "dur_ps": ev["dur_ps"], "step": null32(step),
        "table_id": null32(ev["table"]), "category_id": null32(ev["category"]),
        **{c: null32(ev[c]) for c in ("sc", "minibatch", "ids", "unique_ids", "dropped_ids", "bytes", "flops")},
    })  # fmt: skip
    insert_arrow(con, "INSERT INTO events BY NAME SELECT $run AS run_id, * FROM b", run_id, table)
    if d.args:
        a = {k: np.concatenate(v) for k, v in d.args.items()}
        args = pa.table({
            "event_id": a["event_id"], "key": a["key"], "int_value": null32(a["int_value"]),
            "double_value": pa.array(a["double_value"], mask=np.isnan(a["double_value"])),
            "string_id": a["string_id"],
        })  # fmt: skip
    if d.counters:
        c = {k: np.concatenate(v) for k, v in d.counters.items()}
        insert_arrow(con, "INSERT INTO counters SELECT $run, track, ts_ps, value FROM b", run_id, pa.table(c))
    if len(markers["start_ps"]):
        m = pa.table({k: np.asarray(markers[k], np.int64) for k in ("track", "step", "start_ps", "dur_ps")})
        insert_arrow(con, "INSERT INTO steps SELECT $run, track, step, start_ps, dur_ps FROM b", run_id, m)
    strings = pa.table({"string_id": np.arange(len(d.strings.values), dtype=np.int32), "value": d.strings.values})
    insert_arrow(con, "INSERT INTO strings SELECT $run, string_id, value FROM b", run_id, strings)
    if d.args:
        insert_arrow(
            con,
            """
            INSERT INTO event_args
            SELECT $run, a.event_id, k.value, a.int_value, a.double_value,
                   CASE WHEN a.string_id <> 0 THEN s.value END
            FROM b a JOIN strings k ON k.run_id = $run AND k.string_id = a.key
            LEFT JOIN strings s ON s.run_id = $run AND s.string_id = a.string_id""",
            run_id,
            args,
        )
    tracks = pa.Table.from_pylist(d.tracks.rows)
    insert_arrow(con, "INSERT INTO tracks SELECT $run, track_id, plane, line, kind, chip, core, tile, unit FROM b",
                 run_id, tracks)  # fmt: skip
    return run_facts(d, files, name, d.digests)


def _step_num_markers(d: Decoded, ev: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Events carrying a `step_num` stat (e.g. jax.profiler.StepTraceAnnotation) mark a step."""
    return ev.pop("has_step_num") if "has_step_num" in ev else np.zeros(n, bool)

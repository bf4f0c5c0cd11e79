"""Decode the files of one XProf capture into a `Decoded`: store-shaped columns, plane by plane.

    host files -> planes (xplane_wire.split_space, XPlaneLite) -> lines' events as columns
    (xplane_wire.decode_events, in threads) -> per line: events, typed columns, event_args,
    counter samples (profiler/xplane_lines.py) -> a Decoded

Strings are interned into one table per run (id 0 is the empty string); times are ps after
`origin_ns`. Checks of the files and of each value on the way are profiler/xplane_checks.py's;
a bad file raises TraceFormatError naming it. profiler/xplane_to_store.py inserts the result.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from profiler import xplane_checks as chk
from profiler import xplane_wire as w
from profiler.errors import TraceFormatError
from profiler.xplane_checks import NULL
from profiler.xplane_columns import LineEvents
from profiler.xplane_fields import XSpaceWireError
from profiler.xplane_files import read_capture, stem
from profiler.xplane_lines import (
    LineCtx,
    PlaneMeta,
    column_args,
    counter_line,
    event_args,
    line_name,
    memory_counters,
    meta_args,
    stat_value,
    step_num_events,
    typed_columns,
    untyped_rows,
)
from profiler.xplane_mapping import COUNTER_LINE, NUM_OCCURRENCES, SCPROF_PLANE, STEP_LINES, plane_kind


@dataclass
class Interner:
    """The run's strings: each distinct value gets the next id."""

    values: list[str] = field(default_factory=lambda: [""])
    ids: dict[str, int] = field(default_factory=lambda: {"": 0})

    def __call__(self, s: str) -> int:
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.values)
            self.values.append(s)
        return i


@dataclass
class Tracks:
    """The run's tracks: one per (plane, line), numbered from 1 in order of appearance."""

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

    origin_ns: int
    digests: list[bytes]  # SHA-1 of each file (the run's uuid)
    strings: Interner = field(default_factory=Interner)
    tracks: Tracks = field(default_factory=Tracks)
    events: dict[str, list[np.ndarray]] = field(default_factory=dict)  # column -> parts, one per line
    args: dict[str, list] = field(default_factory=dict)  # event_args columns -> parts
    counters: dict[str, list] = field(default_factory=dict)  # counters columns -> parts
    plane_stats: dict[str, dict] = field(default_factory=dict)  # stored plane name -> its stats
    plane_kinds: dict = field(default_factory=dict)  # stored plane name -> track kind
    hostnames: list[str] = field(default_factory=list)
    host_prefixes: list[str] = field(default_factory=list)  # per file: the prefix of its planes' stored names
    scprof: dict = field(default_factory=dict)  # run facts from an scprof-written file, else {}
    n_events: int = 0  # events decoded so far (rows of the `events` parts)

    def add_events(self, columns: dict[str, np.ndarray]) -> None:
        """Append one line's events (every line gives the same columns, so they line up)."""
        for name, values in columns.items():
            self.events.setdefault(name, []).append(values)

    def add_args(self, event_ids, key: str | np.ndarray, ints=None, doubles=None, strs=None) -> None:
        """Append argument rows; `key` is a name or an array of string ids."""
        n = len(event_ids)
        a = self.args
        a.setdefault("event_id", []).append(np.asarray(event_ids, np.int64))
        a.setdefault("key", []).append(np.full(n, self.strings(key), np.int64) if isinstance(key, str) else key)
        a.setdefault("int_value", []).append(np.asarray(ints, np.int64) if ints is not None else np.full(n, NULL))
        a.setdefault("double_value", []).append(np.asarray(doubles, np.float64) if doubles is not None
                                                else np.full(n, np.nan))  # fmt: skip
        a.setdefault("string_id", []).append(np.asarray(strs, np.int64) if strs is not None
                                             else np.zeros(n, np.int64))  # fmt: skip

    def add_counter(self, track: int, ts, values) -> None:
        """Append samples of one counter track."""
        self.counters.setdefault("track", []).append(np.full(len(ts), track, np.int32))
        self.counters.setdefault("ts_ps", []).append(np.asarray(ts, np.int64))
        self.counters.setdefault("value", []).append(np.asarray(values, np.float64))


_DECODE_THREADS = min(2, os.cpu_count() or 1)  # numpy releases the GIL in most of the decoder's work


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
        except XSpaceWireError as e:
            raise TraceFormatError(str(e)) from None
        except Exception as e:  # protobuf DecodeError: cut short, corrupt, bad UTF-8
            raise TraceFormatError(f"{path}: not a valid XSpace ({type(e).__name__}: {e})") from None
        if not lite:
            raise TraceFormatError(f"{path}: XSpace holds no planes (not an .xplane.pb, or corrupt)")
        chk.check_repeats(path, data, [p.name for p in lite])
        spaces.append((path, lite, hosts))
        digests.append(hashlib.sha1(data).digest())
    multi = len(spaces) > 1
    # A host is named by its XSpace's hostname, or by its file (XProf's `<host>.xplane.pb`) where
    # hostnames are missing or shared (processes of one machine).
    names = [hosts[0] if hosts else stem(path) for path, _, hosts in spaces]
    if len(set(names)) < len(names):
        names = [stem(path) for path, _, _ in spaces]
    prefixes = [f"{name} " if multi else "" for name in names]
    chk.check_files(files, digests, [[pre + p.name for p in sp[1]] for pre, sp in zip(prefixes, spaces, strict=True)])
    origins = [(path, p.name, ln) for path, lite, _ in spaces for p in lite if p.name != SCPROF_PLANE
               for ln in p.lines if ln.events]  # fmt: skip
    if not origins:
        raise TraceFormatError(f"{files[0]}: XSpace holds no events")
    chk.check_line_count(files[0] if len(files) == 1 else os.path.dirname(files[0]), len(origins))
    for path, pname, ln in origins:
        chk.check_timestamp(f"{path}: plane {pname!r} line {line_name(ln)!r}", ln.timestamp_ns)
    d = Decoded(min(ln.timestamp_ns for _, _, ln in origins), digests, host_prefixes=prefixes)
    jobs = [(f"{path}: plane {plane.name!r} line {line_name(line)!r}", line.events)
            for path, lite, _ in spaces for plane in lite if plane.name != SCPROF_PLANE
            for line in plane.lines if line.events]  # fmt: skip
    try:
        lines = iter(_decode_lines(jobs, fast))
    except XSpaceWireError as e:
        raise TraceFormatError(str(e)) from None
    for (path, lite, hosts), prefix in zip(spaces, prefixes, strict=True):
        d.hostnames += hosts
        for plane in lite:
            if plane.name == SCPROF_PLANE:
                _decode_plane(d, path, plane, prefix, [])
                continue
            _decode_plane(d, path, plane, prefix, [next(lines) if ln.events else None for ln in plane.lines])
    return d


def _decode_lines(jobs: list[tuple[str, object]], fast: bool) -> list[LineEvents]:
    """Decode every line's events (in threads when there is enough work to share)."""

    def one(job):
        return w.decode_events(job[1], job[0], fast=fast)

    if _DECODE_THREADS > 1 and len(jobs) > 1 and sum(len(e) for _, e in jobs) >= 200_000:
        with ThreadPoolExecutor(_DECODE_THREADS) as ex:
            return list(ex.map(one, jobs))
    return [one(j) for j in jobs]


def _decode_plane(d: Decoded, path: str, plane, prefix: str, decoded: list) -> None:
    """One plane into `d`; `decoded` holds its lines' decoded events (None for lines without events)."""
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    pstats = {stat_names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, stat_names) for s in plane.stats}
    if plane.name == SCPROF_PLANE:
        d.scprof = pstats
        return
    if pstats:
        d.plane_stats[prefix + plane.name] = pstats
        d.plane_kinds[prefix + plane.name] = plane_kind(plane.name)[0]
    if not plane.lines:
        return
    meta = PlaneMeta.build(d, path, plane, prefix + plane.name, stat_names)
    for line, ev in zip(plane.lines, decoded, strict=True):
        if ev is not None:
            _decode_line(LineCtx.build(d, meta, line, ev))


def _decode_line(line: LineCtx) -> None:
    """One line's events, typed columns and arguments (or counter samples) into its Decoded."""
    d, p, ev, n = line.d, line.plane, line.ev, line.n
    cols = typed_columns(line)
    args_mask = untyped_rows(line)
    if line.name == COUNTER_LINE:
        counter_line(line)
        return
    track = d.tracks(p.stored_name, line.name, p.kind, p.chip, p.core)
    line.base = d.n_events  # a running count: summing the parts per line was quadratic in lines
    d.n_events += n
    d.add_events({
        "track": np.full(n, track, np.int32), "name": p.meta_name[line.midx], "start_ps": line.start,
        "dur_ps": ev.duration_ps, **cols, "has_step_num": step_num_events(line),
        "only_marker": np.isin(line.midx, p.marker_meta), "is_step_line": np.full(n, line.name in STEP_LINES),
        "plane_id": np.full(n, d.strings(p.stored_name), np.int64),
    })  # fmt: skip
    event_args(line, args_mask)
    column_args(line)
    if p.meta_args:
        meta_args(line)
    if ev.num_occurrences.any():
        d.add_args(line.base + np.flatnonzero(ev.num_occurrences), NUM_OCCURRENCES,
                   ints=ev.num_occurrences[ev.num_occurrences != 0])  # fmt: skip
    if p.has_memory:
        memory_counters(line)

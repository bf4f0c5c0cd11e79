"""Decode the files of one XProf capture into a `Decoded`: store-shaped columns, plane by plane.

    host files (read.py) -> planes (wire.split_space, decode_native.parse_plane) -> lines' events
    as columns (decode_native.decode_line, else decode_python.decode_events; each when the mapping
    reaches it) -> per line: events, typed columns, event_args, counter samples (map_lines.py)
    -> a Decoded (events: run-wide columns each line writes into)

Strings are interned into one table per run (id 0 is the empty string); times are ps after
`origin_ns`. Checks of the files and of each value on the way are check.py's; a bad file raises
TraceFormatError naming it. store.py inserts the result.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from profiler.errors import TraceFormatError
from profiler.wire import WireError
from profiler.xspace import check as chk
from profiler.xspace import decode_native, source
from profiler.xspace import wire as w
from profiler.xspace.check import NULL
from profiler.xspace.columns import LineEvents
from profiler.xspace.decode_python import decode_events
from profiler.xspace.map_kinds import DEVICE_KINDS
from profiler.xspace.map_lines import (
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
from profiler.xspace.map_names import (
    COUNTER_LINE,
    EMPTY_PLANE_LINE,
    MEMORY_EVENTS,
    NUM_OCCURRENCES,
    SCPROF_PLANE,
    STEP_LINES,
    plane_kind,
)
from profiler.xspace.read import read_capture, stem


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
    events: dict[str, np.ndarray] = field(default_factory=dict)  # column -> the run's values (n_events rows)
    args: dict[str, list] = field(default_factory=dict)  # event_args columns -> parts
    counters: dict[str, list] = field(default_factory=dict)  # counters columns -> parts
    plane_stats: dict[str, dict] = field(default_factory=dict)  # stored plane name -> its stats
    plane_kinds: dict = field(default_factory=dict)  # stored plane name -> track kind
    hostnames: list[str] = field(default_factory=list)
    host_prefixes: list[str] = field(default_factory=list)  # per file: the prefix of its planes' stored names
    scprof: dict = field(default_factory=dict)  # run facts from an scprof-written file, else {}
    n_events: int = 0  # events decoded so far (rows of the `events` columns)
    capacity: int = 0  # rows allocated per events column: the events of all lines (counter lines too)
    kept: object = None  # a source.Kept: the capture's XSpace, kept for the export (None: nothing kept)

    def event_rows(self, name: str, dtype, n: int) -> np.ndarray:
        """Rows n_events .. n_events + n of events column `name`, to fill (the column is allocated
        whole on first use: every line writes its rows in place, nothing is concatenated)."""
        col = self.events.get(name)
        if col is None:
            col = self.events[name] = np.empty(self.capacity, dtype)
        return col[self.n_events : self.n_events + n]

    def add_args(self, event_ids, key: str | np.ndarray, ints=None, doubles=None, strs=None) -> None:
        """Append argument rows; `key` is a name or an array of string ids."""
        n = len(event_ids)
        a = self.args
        a.setdefault("event_id", []).append(np.asarray(event_ids, np.int64))
        a.setdefault("key", []).append(np.full(n, self.strings(key), np.int64) if isinstance(key, str) else key)
        a.setdefault("int_value", []).append(np.asarray(ints, np.int64) if ints is not None else np.full(n, NULL))
        a.setdefault("double_value", []).append(
            np.asarray(doubles, np.float64) if doubles is not None else np.full(n, np.nan)
        )
        a.setdefault("string_id", []).append(np.asarray(strs, np.int64) if strs is not None else np.zeros(n, np.int64))

    def add_counter(self, track: int, ts, values) -> None:
        """Append samples of one counter track."""
        self.counters.setdefault("track", []).append(np.full(len(ts), track, np.int32))
        self.counters.setdefault("ts_ps", []).append(np.asarray(ts, np.int64))
        self.counters.setdefault("value", []).append(np.asarray(values, np.float64))


def decode_files(files: list[str], native: bool = True) -> Decoded:
    """Decode the host files of one run into columns; raises TraceFormatError naming the file.

    Lines' events go to the native decoder (decode_native.py), and the lines it does not take to
    the Python one (decode_python.py); `native=False` uses only the Python one (the reference
    the tests and the benchmark compare with). Each line is decoded, then mapped, in turn.
    """
    spaces, digests = [], []
    for path in files:
        raw = read_capture(path, pad=w.PAD)
        data = memoryview(raw)[: len(raw) - w.PAD]
        if not data:
            raise TraceFormatError(f"{path}: empty file, not an XSpace (.xplane.pb)")
        try:
            planes, hosts = w.split_space(data, path, raw)
            lite = [decode_native.parse_plane(p, native) for p in planes]
        except WireError as e:  # XSpaceWireError, or an overlong varint
            raise TraceFormatError(str(e)) from None
        except Exception as e:  # protobuf DecodeError: cut short, corrupt, bad UTF-8
            raise TraceFormatError(f"{path}: not a valid XSpace ({type(e).__name__}: {e})") from None
        if not lite:
            raise TraceFormatError(f"{path}: XSpace holds no planes (not an .xplane.pb, or corrupt)")
        chk.check_repeats(path, data, [p.name for p in lite])
        spaces.append((path, lite, hosts))
        # One file: nothing to compare its digest with, so it is taken in a thread while lines decode.
        digests.append(hashlib.sha1(data).digest() if len(files) > 1 else _Digest(data))
    multi = len(spaces) > 1
    # A host is named by its XSpace's hostname, or by its file (XProf's `<host>.xplane.pb`) where
    # hostnames are missing or shared (processes of one machine).
    names = [hosts[0] if hosts else stem(path) for path, _, hosts in spaces]
    if len(set(names)) < len(names):
        names = [stem(path) for path, _, _ in spaces]
    prefixes = [f"{name} " if multi else "" for name in names]
    chk.check_files(files, [[pre + p.name for p in sp[1]] for pre, sp in zip(prefixes, spaces, strict=True)])
    origins = [
        (path, p.name, ln)
        for path, lite, _ in spaces
        for p in lite
        if p.name != SCPROF_PLANE
        for i, ln in enumerate(p.lines)
        if p.events(i)
    ]
    if not origins:
        raise TraceFormatError(f"{files[0]}: XSpace holds no events")
    chk.check_line_count(files[0] if len(files) == 1 else os.path.dirname(files[0]), len(origins))
    for path, pname, ln in origins:
        chk.check_timestamp(f"{path}: plane {pname!r} line {line_name(ln)!r}", ln.timestamp_ns)
    d = Decoded(min(ln.timestamp_ns for _, _, ln in origins), digests, host_prefixes=prefixes)
    jobs = [
        job
        for path, lite, _ in spaces
        for plane in lite
        if plane.name != SCPROF_PLANE
        for job in _line_jobs(path, plane)
    ]
    d.capacity = sum(j.events for j in jobs)
    lines = _decoded_lines(jobs)
    # A real capture keeps its XSpace for the export (source.py); one scprof wrote, not.
    kept = None if any(p.name == SCPROF_PLANE for _, lite, _ in spaces for p in lite) else source.Kept()
    try:
        for host, ((path, lite, hosts), prefix) in enumerate(zip(spaces, prefixes, strict=True)):
            d.hostnames += hosts
            for k, plane in enumerate(lite):
                first = d.n_events
                _decode_plane(d, path, plane, prefix, lines)
                if kept is not None and source.keep_plane(kept, host, k, plane, first) != d.n_events - first:
                    kept = None  # not the events the store holds: keep nothing rather than a wrong copy
        if kept is not None:
            source.finish(kept, files, [hosts for _, _, hosts in spaces])
            d.kept = kept
        d.events = {k: v[: d.n_events] for k, v in d.events.items()}
        d.digests = [x.result() if isinstance(x, _Digest) else x for x in digests]
    except WireError as e:  # XSpaceWireError, or an overlong varint
        raise TraceFormatError(str(e)) from None
    except TraceFormatError:
        _drain(lines)  # a line that does not decode is the file's first problem, as if all were decoded first
        raise
    finally:
        lines.close()
    return d


class _Digest(threading.Thread):
    """SHA-1 of a file's bytes, taken in a thread (hashlib releases the GIL)."""

    def __init__(self, data) -> None:
        super().__init__(daemon=True)
        self.data, self.digest = data, b""
        self.start()

    def run(self) -> None:
        self.digest = hashlib.sha1(self.data).digest()

    def result(self) -> bytes:
        self.join()
        return self.digest


@dataclass
class _LineJob:
    """Line i of a plane, to decode: natively when the plane was split natively (plane.spans)."""

    where: str
    plane: decode_native.Plane
    i: int
    events: int
    buf: np.ndarray | None = None  # the plane's bytes
    row_mids: np.ndarray | None = None
    ranks: bool = True  # its stats are read as rows (LineEvents.as_rows): stat columns keep their ranks


def _line_jobs(path: str, plane: decode_native.Plane) -> list[_LineJob]:
    """The jobs of a plane's lines that hold events."""
    native = plane.spans is not None
    buf = np.frombuffer(plane.raw, np.uint8) if native else None
    rows = decode_native.row_mids({k: v.name for k, v in plane.msg.stat_metadata.items()}) if native else None
    memory = any(m.name in MEMORY_EVENTS for m in plane.msg.event_metadata.values())  # as LineCtx.build reads
    return [
        _LineJob(
            f"{path}: plane {plane.name!r} line {line_name(line)!r}",
            plane,
            i,
            plane.events(i),
            buf,
            rows,
            memory or line_name(line) == COUNTER_LINE,
        )
        for i, line in enumerate(plane.lines)
        if plane.events(i)
    ]


def _decode_job(job: _LineJob) -> LineEvents:
    if job.buf is not None:
        ev = decode_native.decode_line(job.buf, job.plane.spans[job.i], job.row_mids, job.ranks)
        if ev is not None:
            return ev
    return decode_events(job.plane.event_bytes(job.i), job.where)


def _decoded_lines(jobs: list[_LineJob]) -> Iterator[LineEvents]:
    """Every line's decoded events, in order, each decoded when the mapping asks for it (so one
    line's decoded columns are held at a time). In this thread: a thread decoding ahead of the
    mapping gained nothing on two cores (the mapping holds the GIL most of the time, and the
    decoder's output came back as fresh pages from the thread's own malloc arena)."""
    for job in jobs:
        yield _decode_job(job)


def _drain(lines: Iterator[LineEvents]) -> None:
    """Decode the remaining lines; the first that does not decode raises its TraceFormatError."""
    try:
        for _ in lines:
            pass
    except WireError as e:  # XSpaceWireError, or an overlong varint
        raise TraceFormatError(str(e)) from None


def _decode_plane(d: Decoded, path: str, plane: decode_native.Plane, prefix: str, lines: Iterator[LineEvents]) -> None:
    """One plane into `d`; `lines` gives its lines' decoded events (those of lines holding events)."""
    msg = plane.msg
    stat_names = {k: v.name for k, v in msg.stat_metadata.items()}
    pstats = {stat_names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, stat_names) for s in msg.stats}
    if plane.name == SCPROF_PLANE:
        d.scprof = pstats
        return
    if pstats:
        d.plane_stats[prefix + plane.name] = pstats
        d.plane_kinds[prefix + plane.name] = plane_kind(plane.name)[0]
    if not any(plane.events(i) for i in range(len(plane.lines))):
        kind, chip, core = plane_kind(plane.name)
        if kind in DEVICE_KINDS:  # a chip with no events is still a chip: one track, no events
            chk.check_plane_ids(f"{path}: plane {plane.name!r}", chip, core)
            d.tracks(prefix + plane.name, EMPTY_PLANE_LINE, kind, chip, core)
        return
    meta = PlaneMeta.build(d, path, msg, prefix + plane.name, stat_names)
    for i, line in enumerate(plane.lines):
        if plane.events(i):
            _decode_line(LineCtx.build(d, meta, line, next(lines)))


def _decode_line(line: LineCtx) -> None:
    """One line's events, typed columns and arguments (or counter samples) into its Decoded."""
    d, p, ev, n = line.d, line.plane, line.ev, line.n
    counter = line.name == COUNTER_LINE
    typed_columns(line, None if counter else lambda col: d.event_rows(col, np.int64, n))  # checked either way
    args_mask = untyped_rows(line)
    if counter:
        counter_line(line)
        return
    track = d.tracks(p.stored_name, line.name, p.kind, p.chip, p.core)
    d.event_rows("track", np.int32, n)[:] = track
    np.take(p.meta_name, line.midx, out=d.event_rows("name", np.int64, n))
    d.event_rows("start_ps", np.int64, n)[:] = line.start
    d.event_rows("dur_ps", np.int64, n)[:] = ev.duration_ps
    d.event_rows("has_step_num", bool, n)[:] = step_num_events(line)
    d.event_rows("only_marker", bool, n)[:] = np.isin(line.midx, p.marker_meta)
    d.event_rows("is_step_line", bool, n)[:] = line.name in STEP_LINES
    d.event_rows("plane_id", np.int64, n)[:] = d.strings(p.stored_name)
    line.base = d.n_events  # a running count: summing the parts per line was quadratic in lines
    d.n_events += n
    event_args(line, args_mask)
    column_args(line)
    if p.meta_args:
        meta_args(line)
    if ev.num_occurrences.any():
        d.add_args(
            line.base + np.flatnonzero(ev.num_occurrences),
            NUM_OCCURRENCES,
            ints=ev.num_occurrences[ev.num_occurrences != 0],
        )
    if p.has_memory:
        memory_counters(line)

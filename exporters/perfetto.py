"""A run from the store as a Perfetto protobuf trace (`scprof export perfetto`).

Layout (docs/exporters.md has the full description):

- one process track per chip ("Chip N") and one for the host ("Host"); under it a
  group per XProf plane (`/device:TPU:0`, `/device:TPU:0 SparseCore 1`,
  `/host:CPU`), under that (a "Tile T" group for SparseCore tiles, then) one slice
  track per XProf line (`XLA Ops`, `Sparse Core Ops`, `Steps`, ...) and one counter
  track per counter (`HBM heap` in bytes, ...);
- events as slices whose debug annotations are the typed arguments (step, table,
  sc, minibatch, ids, unique_ids, dropped_ids, bytes, flops) and the event_args;
  step markers as slices "Step N" (category `step`) on their line;
- overlapping events of one line go to sibling tracks of the same name ("lanes"),
  which the Perfetto UI draws as one track;
- flows from each step's SparseCore forward to the TensorCore forward that consumes
  it, and from the TensorCore backward to the SparseCore backward (FLOWS_SQL);
- a "Step breakdown" track per chip whose slices split each step window into the
  wall-time categories of analyzers.timeline (the analyzers' step breakdown), one
  after the other in priority order (_plan_breakdown).

Perfetto timestamps are nanoseconds; scprof's are picoseconds. A slice starts at
floor(start_ps / 1000) and ends at floor(end_ps / 1000); when that loses
picoseconds the exact values ride along as `start_ps`/`dur_ps` annotations (and
`ts_ps` on counter samples), so the export is lossless.

Streaming: rows come from DuckDB in time windows of about WINDOW_ROWS rows
(planned from a histogram of start times), unsorted; a reader thread puts each window
in stream order with numpy (_window_order, the same order as STREAM_ORDER) and gathers
it into record batches of CHUNK_ROWS while the previous window is encoded, so memory
does not grow with the run.
Each batch is written on the wire by the compiled encoder exporters/_perfetto_wire.c
(one pass per row: the BEGIN/INSTANT/COUNTER packet, preceded by the END packets
due, which it keeps in a heap); Python plans tracks, lanes, interning and flows per
batch with numpy. All packets are on one trusted packet sequence whose first packet
clears incremental state and interns every event name, category, annotation name
and table name.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from analyzers.breakdown import split_windows
from analyzers.context import RunContext
from analyzers.timeline import CATEGORIES as TIMELINE_CATEGORIES
from exporters import _perfetto_wire as wire
from profiler.errors import ScprofError
from profiler.safe_output import open_output, store_owned_paths
from profiler.store import Store
from profiler.wire import encode_varint

SEQ_ID = 1
WINDOW_ROWS = 1 << 19  # rows fetched and sorted at a time
CHUNK_ROWS = 1 << 16  # rows encoded at a time (small enough to stay in cache)

BEGIN, END, INSTANT, COUNTER = (
    pt.TrackEvent.TYPE_SLICE_BEGIN,
    pt.TrackEvent.TYPE_SLICE_END,
    pt.TrackEvent.TYPE_INSTANT,
    pt.TrackEvent.TYPE_COUNTER,
)
CLEARED = pt.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pt.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE

# Typed event arguments, exported as debug annotations with these names.
TYPED_ARGS = ("step", "table", "sc", "minibatch", "ids", "unique_ids", "dropped_ids", "bytes", "flops")
# Exact picosecond times, present only where nanoseconds lose precision.
EXACT_ARGS = ("start_ps", "dur_ps", "ts_ps")
# Prefix for event_args keys that collide with the names above.
ARGS_PREFIX = "args."
# Interned categories: the kind of the event's track; `step` for step markers.
CATEGORIES = ("host", "tensorcore", "sparsecore", "sc_tile", "counter", "unknown", "step", "breakdown")
STEP_CATEGORY = "step"
# The per-chip track of the step-time breakdown (analyzers.breakdown): its slices split each
# step window into the wall-time categories of analyzers.timeline, in their priority order.
BREAKDOWN_CATEGORY = "breakdown"
BREAKDOWN_TRACK = "Step breakdown"
# Lines between whose events flows are drawn.
TC_OPS_LINE, SC_OPS_LINE = "XLA Ops", "Sparse Core Ops"
_INF_PS = 1 << 62

# Row kinds of the merged stream.
_EVENT, _MARKER, _COUNTER, _BREAKDOWN = 0, 1, 2, 3

# Flows, one per direction, step and chip, between the ops lines' events:
#   forward:  the last SparseCore op of step i on chip c that starts before the
#             first TensorCore op of step i on chip c  ->  that TensorCore op;
#   backward: the last TensorCore op of step i on chip c  ->  the first SparseCore
#             op of step i on chip c that starts at or after its end.
# Ties go to the lower event_id; a flow is kept only if its origin starts in an
# earlier nanosecond than its end (Perfetto draws arrows forward in time).
# (start_ps, event_id) orders are packed into one HUGEINT key (k_asc, k_desc: event_id descending):
# DuckDB's arg_min/arg_max compare those much faster than a struct; SparseCore ops are joined and
# aggregated once for both directions.
FLOWS_SQL = """
WITH ops AS NOT MATERIALIZED (  -- scanned twice rather than held in memory
  SELECT e.event_id, e.step, t.chip, t.kind = 'tensorcore' AS tc, e.start_ps, e.start_ps + e.dur_ps AS end_ps,
         (e.start_ps::HUGEINT << 64) + (e.event_id::HUGEINT + 9223372036854775808) AS k_asc,
         (e.start_ps::HUGEINT << 64) + (9223372036854775807 - e.event_id::HUGEINT) AS k_desc
  FROM events e JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
  WHERE e.run_id = $run AND {event_filter} AND e.step IS NOT NULL AND t.chip >= 0
    AND ((t.kind = 'tensorcore' AND t.line = $tc_line)
         OR (t.kind IN ('sparsecore', 'sc_tile') AND t.line = $sc_line))
),
tc AS (
  SELECT step, chip, arg_min(event_id, k_asc) AS first_id, min(start_ps) AS first_start,
         arg_max(event_id, k_desc) AS last_id, max(start_ps) AS last_start, arg_max(end_ps, k_desc) AS last_end
  FROM ops WHERE tc GROUP BY step, chip
),
sc AS (
  SELECT o.step, o.chip,
         arg_max(o.event_id, o.k_desc) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src,
         max(o.start_ps) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src_start,
         arg_min(o.event_id, o.k_asc) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst,
         min(o.start_ps) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst_start,
         any_value(t.first_id) AS fwd_dst, any_value(t.first_start) AS fwd_dst_start,
         any_value(t.last_id) AS bwd_src, any_value(t.last_start) AS bwd_src_start
  FROM ops o JOIN tc t ON o.step = t.step AND o.chip = t.chip
  WHERE NOT o.tc AND (o.start_ps < t.first_start OR o.start_ps >= t.last_end)
  GROUP BY o.step, o.chip
)
SELECT src, dst FROM (
  SELECT 0 AS dir, step, chip, fwd_src AS src, fwd_dst AS dst, fwd_src_start AS src_start, fwd_dst_start AS dst_start
  FROM sc WHERE fwd_src IS NOT NULL
  UNION ALL
  SELECT 1, step, chip, bwd_src, bwd_dst, bwd_src_start, bwd_dst_start FROM sc WHERE bwd_dst IS NOT NULL)
WHERE src_start // 1000 < dst_start // 1000
ORDER BY step, chip, dir
"""

# Rows of one time window, merged; unsorted (DuckDB's sort of all 16 columns cost more than
# the rest of the scan): _window_order puts them in Perfetto's order, STREAM_ORDER.
STREAM_SQL = """
SELECT 0::BIGINT AS kind, event_id::BIGINT AS id, track_id::BIGINT AS track_id, name_id::BIGINT AS name_id,
       start_ps::BIGINT AS start_ps, dur_ps::BIGINT AS dur_ps, step::BIGINT AS step, table_id::BIGINT AS table_id,
       sc::BIGINT AS sc, minibatch::BIGINT AS minibatch, ids::BIGINT AS ids, unique_ids::BIGINT AS unique_ids,
       dropped_ids::BIGINT AS dropped_ids, bytes::BIGINT AS bytes, flops::BIGINT AS flops, NULL::DOUBLE AS value
FROM events e WHERE run_id = $run AND {event_filter} AND start_ps >= $lo AND start_ps < $hi
UNION ALL
SELECT 1, step, track_id, NULL, start_ps, dur_ps, step, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM steps WHERE run_id = $run AND {marker_filter} AND start_ps >= $lo AND start_ps < $hi
UNION ALL
SELECT 2, rowid, track_id, NULL, ts_ps, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, value
FROM counters WHERE run_id = $run AND {counter_filter} AND ts_ps >= $lo AND ts_ps < $hi
UNION ALL  -- step breakdown slices: track_id is the chip, name_id the interned name
SELECT 3, id, chip, name_iid, start_ps, dur_ps, step, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM {breakdown} WHERE start_ps >= $lo AND start_ps < $hi
"""
# Perfetto's order of the stream, as SQL (the reference _window_order reproduces, tests use it):
# start nanosecond, then longer first (parents before children), then events before markers
# before counters, then id and track.
STREAM_ORDER = "ORDER BY start_ps // 1000, (start_ps + dur_ps) // 1000 DESC, kind, id, track_id"

# The stream's columns, in the order exporters/_perfetto_wire.c reads them (all 8 bytes wide).
STREAM_COLUMNS = (
    "kind",
    "id",
    "track_id",
    "name_id",
    "start_ps",
    "dur_ps",
    "step",
    "table_id",
    "sc",
    "minibatch",
    "ids",
    "unique_ids",
    "dropped_ids",
    "bytes",
    "flops",
    "value",
)
STREAM_SCHEMA = pa.schema([(c, pa.float64() if c == "value" else pa.int64()) for c in STREAM_COLUMNS])
_NO_ARGS = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(1, np.int64))

ARGS_SQL = """
SELECT a.event_id, a.key, a.int_value, a.double_value, a.string_value
FROM event_args a
WHERE a.run_id = $run AND a.event_id IN (
  SELECT event_id FROM events e WHERE run_id = $run AND {event_filter} AND start_ps >= $lo AND start_ps < $hi)
ORDER BY a.event_id, a.key
"""

# --steps A:B keeps events of steps A..B-1, events without a step that start inside
# those steps' time span, their step markers, and counter samples inside the span.
# {breakdown} is the table of step-breakdown slices, once planned (_plan_breakdown).
_NO_BREAKDOWN = (
    "(SELECT NULL::BIGINT AS id, NULL::BIGINT AS chip, NULL::BIGINT AS name_iid, NULL::BIGINT AS start_ps,"
    " NULL::BIGINT AS dur_ps, NULL::BIGINT AS step WHERE FALSE)"
)
_FILTERS_ALL = {"event_filter": "TRUE", "marker_filter": "TRUE", "counter_filter": "TRUE", "breakdown": _NO_BREAKDOWN}
_FILTERS_STEPS = {
    "event_filter": "((e.step >= $step_a AND e.step < $step_b)"
                    " OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b))",
    "marker_filter": "(step >= $step_a AND step < $step_b)",
    "counter_filter": "(ts_ps >= $span_a AND ts_ps <= $span_b)",
    "breakdown": _NO_BREAKDOWN,
}  # fmt: skip


class ExportCheckError(Exception):
    """The written file breaks a Perfetto rule (an exporter bug: exit code 1)."""


@dataclass
class ExportStats:
    """What an export wrote."""

    events: int = 0
    markers: int = 0
    breakdown: int = 0  # slices on the "Step breakdown" tracks
    counters: int = 0
    flows: int = 0
    tracks: int = 0
    lanes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def export_run(store: Store, run_id: int, path: str, steps: tuple[int, int] | None, check: bool) -> str:
    """Write run `run_id` to `path` as a Perfetto trace; returns a one-line summary."""
    progress = sys.stderr.isatty() and sys.stdout.isatty()
    stats = write_trace(store, run_id, path, steps, progress=progress)
    line = (
        f"wrote {path}: {stats.events:,} events, {stats.markers:,} step markers, "
        f"{stats.counters:,} counter samples, {stats.flows:,} flows, {stats.breakdown:,} step-breakdown "
        f"slices on {stats.tracks} tracks "
        f"({stats.bytes / 1e6:.1f} MB, {stats.bytes / max(stats.events, 1):.1f} B/event, "
        f"{stats.seconds:.1f} s)"
    )
    if check:
        from exporters.perfetto_validate import validate_file

        problems = validate_file(path)
        if problems:
            first = "; ".join(str(p) for p in problems[:3])
            raise ExportCheckError(f"{path}: written, but {len(problems)} problem(s) found: {first}")
        line += "; checked: valid"
    return line + "; open it at https://ui.perfetto.dev"


def write_trace(
    store: Store,
    run_id: int,
    path: str,
    steps: tuple[int, int] | None = None,
    progress: bool = False,
    window_rows: int = WINDOW_ROWS,
    chunk_rows: int = CHUNK_ROWS,
    breakdown: bool = True,
) -> ExportStats:
    """Export to `path` (written to a temporary name, then renamed); returns figures.

    `path` is refused (profiler.safe_output) when it is the store, its WAL, a stored run's
    source, another DuckDB database or scprof trace, a directory or a special file.

    `breakdown=False` leaves out the "Step breakdown" tracks (and the analysis they need).
    """
    t0 = time.perf_counter()
    with open_output(path, store_owned_paths(store)) as f:  # refused outputs: before any work
        writer = _Writer(store, run_id, f, steps, window_rows, chunk_rows, progress, breakdown)
        writer.run()
    st = writer.stats
    st.bytes = os.path.getsize(path)
    st.seconds = time.perf_counter() - t0
    return st


# -- the writer -------------------------------------------------------------------------------


def _trace_packet(pkt: pt.TracePacket) -> bytes:
    """A TracePacket as one `Trace.packet` field (key 0x0A: field 1, length-delimited)."""
    body = pkt.SerializeToString()
    return b"\x0a" + encode_varint(len(body)) + body


class _Lanes:
    """Assigns slices to lanes (sibling tracks) so that each lane nests strictly.

    Rows arrive in stream order (start asc, end desc). A slice goes to the first
    lane where, after closing the slices that ended by its start, it nests inside
    the innermost open slice (or the lane is empty); else to a new lane.
    Fast path, vectorised: a slice that starts after every earlier slice of its
    line has ended finds all lanes empty and goes to lane 0 ("free" row). Only
    runs of other rows go through the per-slice loop, each from the free row
    before it (whose state is known: lane 0 holds just that slice).
    """

    def __init__(self, n_keys: int):
        self.max_end = np.full(n_keys, -1, np.int64)  # latest end so far per key
        self.stacks: dict[int, list[list[int]]] = {}  # open ends per lane, for keys left busy

    def assign(self, key: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        n = len(key)
        lane = np.zeros(n, np.int64)
        if n == 0:
            return lane
        # few keys: a 16-bit stable sort is numpy's radix sort, several times faster than int64's
        order = np.argsort(key.astype(np.int16) if len(self.max_end) <= 1 << 15 else key, kind="stable")
        k, ss, ee = key[order], s[order], e[order]
        first = np.ones(n, bool)
        first[1:] = k[1:] != k[:-1]
        seg_starts = np.flatnonzero(first)
        seg_ends = np.append(seg_starts[1:], n)
        seg = np.cumsum(first) - 1
        carried = self.max_end[k[seg_starts]]
        cm = _segmented_cummax(ee, seg, seg_starts, carried)
        prev = np.empty(n, np.int64)
        prev[1:] = cm[:-1]
        prev[seg_starts] = carried
        free = ss >= prev
        busy = np.flatnonzero(~free)
        if len(busy):
            lane_sorted = np.zeros(n, np.int64)
            last_free = np.maximum.accumulate(np.where(free, np.arange(n), -1))
            done_upto = 0
            for i in busy.tolist():
                if i < done_upto:
                    continue
                g = int(seg[i])
                lo, hi = int(seg_starts[g]), int(seg_ends[g])
                kk = int(k[i])
                j0 = int(last_free[i])
                if j0 >= lo:
                    stacks = [[int(ee[j0])]]
                    j = j0 + 1
                else:
                    stacks = self.stacks.get(kk) or [[int(carried[g])]]
                    j = lo
                while j < hi and not free[j]:
                    lane_sorted[j] = _place(stacks, int(ss[j]), int(ee[j]))
                    j += 1
                done_upto = j
                if j == hi:
                    self.stacks[kk] = stacks
            lane[order] = lane_sorted
        last = seg_ends - 1
        self.max_end[k[last]] = cm[last]
        for kk in k[last[free[last]]].tolist():
            self.stacks.pop(kk, None)
        return lane


def _segmented_cummax(v: np.ndarray, seg: np.ndarray, seg_starts: np.ndarray, carried: np.ndarray) -> np.ndarray:
    """Running max of v within each segment, starting from the segment's carried value."""
    v = v.copy()
    v[seg_starts] = np.maximum(v[seg_starts], carried)
    lo = int(v.min())
    span = int(v.max()) - lo + 1
    if span * (len(seg_starts) + 1) < (1 << 62):
        off = seg.astype(np.int64) * np.int64(span) - np.int64(lo)
        return np.maximum.accumulate(v + off) - off
    out = np.empty_like(v)
    ends = np.append(seg_starts[1:], len(v))
    for a, b in zip(seg_starts.tolist(), ends.tolist(), strict=True):
        out[a:b] = np.maximum.accumulate(v[a:b])
    return out


def _place(stacks: list[list[int]], s: int, e: int) -> int:
    """Put slice [s, e) on the first lane where it nests; returns the lane."""
    for li, st in enumerate(stacks):
        while st and st[-1] <= s:
            st.pop()
        if not st or st[-1] >= e:
            if e > s:
                st.append(e)
            return li
    stacks.append([e] if e > s else [])
    return len(stacks) - 1


class _Writer:
    def __init__(
        self,
        store: Store,
        run_id: int,
        f,
        steps,
        window_rows: int,
        chunk_rows: int,
        progress: bool,
        breakdown: bool = True,
    ):
        self.store, self.con, self.run_id, self.f = store, store.con, run_id, f
        self.breakdown = breakdown
        self.window_rows, self.chunk_rows, self.progress = window_rows, chunk_rows, progress
        self.stats = ExportStats()
        self.params: dict = {"run": run_id}
        self.filters = dict(_FILTERS_ALL)
        self.steps = steps
        if steps is not None:
            self._set_step_filter(*steps)
        self.next_uuid = 1
        self.seq = 0  # rows encoded so far: the order in which slices began
        # ENDs of the open slices, a min-heap on (end ns, -seq) kept by the C encoder: (end, seq, uuid), size
        self.heap = (np.zeros(chunk_rows, np.int64), np.zeros(chunk_rows, np.int64), np.zeros(chunk_rows, np.uint64))
        self.heap_n = 0
        self.out = np.empty(0, np.uint8)  # the encoder's output buffer, reused across batches
        self.last_ts = 0

    # -- set-up ---------------------------------------------------------------------

    def _q(self, sql: str, extra: dict | None = None) -> pa.Table:
        params = {**self.params, **(extra or {})}
        used = {k: v for k, v in params.items() if f"${k}" in sql}
        return self.con.sql(sql, params=used).to_arrow_table()

    def _rows(self, sql: str, extra: dict | None = None) -> list[tuple]:
        params = {**self.params, **(extra or {})}
        used = {k: v for k, v in params.items() if f"${k}" in sql}
        return self.con.execute(sql, used).fetchall()

    def _set_step_filter(self, a: int, b: int) -> None:
        self.params.update(step_a=a, step_b=b)
        span = self._rows("""
            SELECT min(s), max(e) FROM (
              SELECT start_ps AS s, start_ps + dur_ps AS e FROM events
              WHERE run_id = $run AND step >= $step_a AND step < $step_b
              UNION ALL
              SELECT start_ps, start_ps + dur_ps FROM steps
              WHERE run_id = $run AND step >= $step_a AND step < $step_b)""")[0]
        if span[0] is None:
            raise ScprofError(f"--steps: run {self.run_id} has no events in steps {a}..{b - 1}")
        self.params.update(span_a=span[0], span_b=span[1])
        self.filters = dict(_FILTERS_STEPS)

    def _sql(self, template: str) -> str:
        return template.format(**self.filters)

    def run(self) -> None:
        first_ps = self._rows(
            self._sql("""
            SELECT min(t) FROM (
              SELECT min(start_ps) AS t FROM events e WHERE run_id = $run AND {event_filter}
              UNION ALL SELECT min(start_ps) FROM steps WHERE run_id = $run AND {marker_filter}
              UNION ALL SELECT min(ts_ps) FROM counters WHERE run_id = $run AND {counter_filter})""")
        )[0][0]
        if first_ps is None:
            raise ScprofError(f"run {self.run_id} has no events, step markers or counters to export")
        if first_ps < 0:
            raise ScprofError(f"run {self.run_id} has negative timestamps; Perfetto needs times >= 0")
        self.first_ns = first_ps // 1000
        cuts = self._plan_windows()
        self._plan_tracks()
        self._plan_interning()
        self._plan_breakdown(cuts[1::2])  # the split costs per call: windows of twice the rows
        self.lanes = _Lanes(self.n_keys)
        self._plan_flows()
        self._write_head()
        total = self.stats_total
        done = 0
        bounds = zip([0, *cuts], [*cuts, _INF_PS // 1000], strict=True)
        # the next window is fetched and sorted in a thread while this one is encoded
        for batches, args in _prefetch(self._window(lo * 1000, hi * 1000) for lo, hi in bounds):
            while batches:  # each batch freed once written
                done += self._chunk(batches.pop(0), args)
            del batches, args
            if self.progress and total:
                print(f"\rexport perfetto: {100 * done // total:3d}%", end="", file=sys.stderr, flush=True)
        self._flush_ends()
        if self.progress:
            print("\r" + " " * 30 + "\r", end="", file=sys.stderr, flush=True)

    def _plan_tracks(self) -> None:
        tracks = self._rows("""SELECT track_id, plane, line, kind, chip, core, tile, unit
                               FROM tracks WHERE run_id = $run ORDER BY track_id""")
        self.tracks = {t[0]: t for t in tracks}
        max_tid = max(self.tracks, default=0)
        max_chip = max((t[4] for t in tracks if t[4] is not None and t[4] >= 0), default=-1)
        self.bd_key0 = 2 * (max_tid + 1)  # lane keys of the breakdown tracks: bd_key0 + chip
        self.n_keys = self.bd_key0 + max_chip + 1
        ev_counts = dict(
            self._rows(
                self._sql("SELECT track_id, count(*) FROM events e WHERE run_id = $run AND {event_filter} GROUP BY 1")
            )
        )
        marker_tracks = [
            r[0]
            for r in self._rows(
                self._sql("SELECT DISTINCT track_id FROM steps WHERE run_id = $run AND {marker_filter}")
            )
        ]
        counter_tracks = [
            r[0]
            for r in self._rows(
                self._sql("SELECT DISTINCT track_id FROM counters WHERE run_id = $run AND {counter_filter}")
            )
        ]
        self.stats_total = sum(ev_counts.values())
        self.descriptors: list[pt.TrackDescriptor] = []
        self.groups: dict[tuple, int] = {}
        self.lane_uuids: dict[tuple[int, int], int] = {}  # (key, lane) -> uuid, lanes >= 1
        self.lane0 = np.zeros(self.n_keys, np.uint64)
        self.counter_uuid = np.zeros(max_tid + 1, np.uint64)
        self.key_parent: dict[int, tuple[int, str]] = {}
        self.category_of_track = np.zeros(max_tid + 1, np.uint64)
        for tid, (_, _plane, _line, kind, *_rest) in self.tracks.items():
            cat = kind if kind in CATEGORIES else "unknown"
            self.category_of_track[tid] = CATEGORIES.index(cat) + 1
        used = sorted(set(ev_counts) | set(marker_tracks) | set(counter_tracks))
        for tid in used:
            if tid not in self.tracks:
                raise ScprofError(f"run {self.run_id}: track {tid} is used but not declared")
        for tid in used:
            _, plane, line, kind, chip, core, tile, unit = self.tracks[tid]
            parent = self._group_of(plane, kind, chip, tile)
            rank = tid
            if tid in counter_tracks:
                unit_enum = {
                    "bytes": pt.CounterDescriptor.UNIT_SIZE_BYTES,
                    "count": pt.CounterDescriptor.UNIT_COUNT,
                    "ns": pt.CounterDescriptor.UNIT_TIME_NS,
                }.get(unit or "")
                cd = pt.CounterDescriptor(unit=unit_enum) if unit_enum else pt.CounterDescriptor(unit_name=unit or "")
                self.counter_uuid[tid] = self._describe(
                    name=line, parent_uuid=parent, counter=cd, sibling_order_rank=rank
                )
            for is_marker, present in ((0, tid in ev_counts), (1, tid in marker_tracks)):
                if present:
                    key = 2 * tid + is_marker
                    self.key_parent[key] = (parent, line, rank)
                    self.lane0[key] = self._describe(name=line, parent_uuid=parent, sibling_order_rank=rank)
        self.stats.tracks = len(self.descriptors)
        # default track of the sequence: the busiest line
        self.default_uuid = int(self.lane0[2 * max(ev_counts, key=ev_counts.get)]) if ev_counts else 0

    def _describe(self, **kw) -> int:
        uuid = self.next_uuid
        self.next_uuid += 1
        self.descriptors.append(pt.TrackDescriptor(uuid=uuid, **kw))
        return uuid

    def _process_of(self, host: bool, chip: int | None) -> tuple[tuple, int]:
        """(key, uuid) of the process-like track of a chip or of the host, described on first use."""
        pkey = ("host",) if host else ("chip", chip)
        if pkey not in self.groups:
            name = "Host" if host else f"Chip {chip}"
            pid = 1 if host else 2 + chip
            self.groups[pkey] = self._describe(
                process=pt.ProcessDescriptor(pid=pid, process_name=name), child_ordering=pt.TrackDescriptor.EXPLICIT
            )
        return pkey, self.groups[pkey]

    def _group_of(self, plane: str, kind: str, chip: int, tile: int) -> int:
        host = plane.startswith("/host") or chip is None or chip < 0
        pkey, _ = self._process_of(host, chip)
        gkey = (*pkey, plane)
        if gkey not in self.groups:
            rank = len([k for k in self.groups if k[: len(pkey)] == pkey and len(k) == len(pkey) + 1])
            self.groups[gkey] = self._describe(
                name=plane,
                parent_uuid=self.groups[pkey],
                child_ordering=pt.TrackDescriptor.EXPLICIT,
                sibling_order_rank=rank,
            )
        if kind == "sc_tile" and tile is not None and tile >= 0:
            tkey = (*gkey, "tile", tile)
            if tkey not in self.groups:
                self.groups[tkey] = self._describe(
                    name=f"Tile {tile}",
                    parent_uuid=self.groups[gkey],
                    child_ordering=pt.TrackDescriptor.EXPLICIT,
                    sibling_order_rank=1_000_000 + tile,
                )
            return self.groups[tkey]
        return self.groups[gkey]

    def _plan_interning(self) -> None:
        names = self._rows(
            self._sql("""
            SELECT n.string_id, n.value FROM (
              SELECT name_id, count(*) AS c FROM events e WHERE run_id = $run AND {event_filter} GROUP BY 1) u
            JOIN strings n ON n.run_id = $run AND n.string_id = u.name_id
            ORDER BY u.c DESC, n.string_id""")
        )
        tables = self._rows(
            self._sql("""
            SELECT n.string_id, n.value FROM (
              SELECT table_id, count(*) AS c FROM events e
              WHERE run_id = $run AND {event_filter} AND table_id IS NOT NULL GROUP BY 1) u
            JOIN strings n ON n.run_id = $run AND n.string_id = u.table_id
            ORDER BY u.c DESC, n.string_id""")
        )
        keys = [
            r[0]
            for r in self._rows(
                "SELECT key FROM event_args WHERE run_id = $run GROUP BY key ORDER BY count(*) DESC, key"
            )
        ]
        max_sid = max([r[0] for r in names + tables], default=0)
        # iids start at 1 (0 is invalid), most frequent first so they fit one varint byte
        self.name_iid = np.zeros(max_sid + 1, np.uint64)
        self.table_iid = np.zeros(max_sid + 1, np.uint64)
        for i, (sid, _) in enumerate(names):
            self.name_iid[sid] = i + 1
        for i, (sid, _) in enumerate(tables):
            self.table_iid[sid] = i + 1
        ann_names = list(TYPED_ARGS) + list(EXACT_ARGS)
        self.arg_key_iid: dict[str, int] = {}
        for k in keys:
            exported = ARGS_PREFIX + k if k in ann_names else k
            ann_names.append(exported)
            self.arg_key_iid[k] = len(ann_names)
        self.ann_iid = {n: i + 1 for i, n in enumerate(ann_names)}
        self.ann_iids = np.array([self.ann_iid[n] for n in TYPED_ARGS + EXACT_ARGS], np.uint64)  # the C encoder's
        self.has_args = bool(keys)
        # breakdown slices are named by their category, interned after the events' names
        self.bd_name_iid = {c: len(names) + i + 1 for i, c in enumerate(TIMELINE_CATEGORIES)} if self.breakdown else {}
        self.interned = pt.InternedData(
            event_categories=[pt.EventCategory(iid=i + 1, name=c) for i, c in enumerate(CATEGORIES)],
            event_names=[pt.EventName(iid=i + 1, name=v) for i, (_, v) in enumerate(names)]
            + [pt.EventName(iid=i, name=c) for c, i in self.bd_name_iid.items()],
            debug_annotation_names=[pt.DebugAnnotationName(iid=i + 1, name=n) for i, n in enumerate(ann_names)],
            debug_annotation_string_values=[
                pt.InternedString(iid=i + 1, str=v.encode()) for i, (_, v) in enumerate(tables)
            ],
        )
        self.step_cat = CATEGORIES.index(STEP_CATEGORY) + 1
        self.bd_cat = CATEGORIES.index(BREAKDOWN_CATEGORY) + 1

    def _plan_breakdown(self, cuts: list[int]) -> None:
        """The "Step breakdown" slices as a temp table, and a track per chip that has some.

        The split is the analyzers' (analyzers.breakdown.split_windows over the store's
        step_windows), called per export span with the step windows clipped to it and the
        parts summed: the split is additive over time, so the figures are the analyzer's,
        while memory follows the span rather than the run.
        """
        if not self.breakdown:
            return
        ctx = RunContext(self.store, self.run_id)
        windows = self.store.query(
            "SELECT chip, step, start_ps, end_ps FROM step_windows WHERE run_id = $run AND end_ps > start_ps"
            + (" AND step >= $a AND step < $b" if self.steps else "")
            + " ORDER BY chip, start_ps",
            {"run": self.run_id, "a": self.steps[0], "b": self.steps[1]} if self.steps else {"run": self.run_id},
        )
        if windows.num_rows == 0:
            return
        w = {k: windows.column(k).to_numpy().astype(np.int64) for k in ("chip", "step", "start_ps", "end_ps")}
        parts = []
        bounds = [int(w["start_ps"].min()), *[c * 1000 for c in cuts], int(w["end_ps"].max())]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            inside = (w["start_ps"] < hi) & (w["end_ps"] > lo)
            if hi <= lo or not inside.any():
                continue
            clipped = pa.table(
                {
                    "chip": w["chip"][inside],
                    "step": w["step"][inside],
                    "start_ps": np.maximum(w["start_ps"][inside], lo),
                    "end_ps": np.minimum(w["end_ps"][inside], hi),
                }
            )
            parts.append(split_windows(ctx, clipped, span=(lo, hi))["priority"])
        if not parts:
            return
        split = pa.concat_tables(parts).group_by(["chip", "step", "category"]).aggregate([("dur_ps", "sum")])
        chip = split.column("chip").to_numpy().astype(np.int64)
        step = split.column("step").to_numpy().astype(np.int64)
        dur = split.column("dur_ps_sum").to_numpy().astype(np.int64)
        prio_of = {c: i for i, c in enumerate(TIMELINE_CATEGORIES)}
        cats = split.column("category").to_pylist()
        prio = np.array([prio_of[c] for c in cats], np.int64)
        o = np.lexsort((prio, step, chip))
        chip, step, dur, prio = chip[o], step[o], dur[o], prio[o]
        # consecutive inside the window, in priority order: start = window start + earlier categories
        wkey = w["chip"] * (int(w["step"].max()) + 1) + w["step"]
        wo = np.argsort(wkey)
        at = wo[np.searchsorted(wkey[wo], chip * (int(w["step"].max()) + 1) + step)]
        first = np.ones(len(chip), bool)
        first[1:] = (chip[1:] != chip[:-1]) | (step[1:] != step[:-1])
        before = np.cumsum(dur) - dur
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(chip)), 0))
        start = w["start_ps"][at] + before - before[group_start]
        names = np.array([self.bd_name_iid[TIMELINE_CATEGORIES[p]] for p in range(len(TIMELINE_CATEGORIES))], np.int64)[
            prio
        ]
        keep = dur > 0
        table = pa.table(
            {
                "id": np.arange(int(keep.sum()), dtype=np.int64),
                "chip": chip[keep],
                "name_iid": names[keep],
                "start_ps": start[keep],
                "dur_ps": dur[keep],
                "step": step[keep],
            }
        )
        name = f"scprof_perfetto_breakdown_{self.run_id}"
        self.con.register("scprof_perfetto_breakdown_arrow", table)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM scprof_perfetto_breakdown_arrow")
        finally:
            self.con.unregister("scprof_perfetto_breakdown_arrow")
        self.filters["breakdown"] = name
        for c in np.unique(chip[keep]).tolist():
            _, parent = self._process_of(c < 0, c)
            key = self.bd_key0 + c
            self.key_parent[key] = (parent, BREAKDOWN_TRACK, -1)
            self.lane0[key] = self._describe(name=BREAKDOWN_TRACK, parent_uuid=parent, sibling_order_rank=-1)
        self.stats.tracks = len(self.descriptors)

    def _plan_flows(self) -> None:
        t = self._q(self._sql(FLOWS_SQL), {"tc_line": TC_OPS_LINE, "sc_line": SC_OPS_LINE})
        src = t.column("src").to_numpy().astype(np.int64)
        dst = t.column("dst").to_numpy().astype(np.int64)
        fid = np.arange(1, len(src) + 1, dtype=np.uint64)
        # one outgoing and one terminating flow per event at most (keep the first)
        _, keep_s = np.unique(src, return_index=True)
        _, keep_d = np.unique(dst, return_index=True)
        keep = np.intersect1d(keep_s, keep_d)
        src, dst, fid = src[keep], dst[keep], fid[keep]
        o = np.argsort(src)
        self.flow_src, self.flow_src_id = src[o], fid[o]
        o = np.argsort(dst)
        self.flow_dst, self.flow_dst_id = dst[o], fid[o]
        self.stats.flows = len(src)
        # events with a flow, as a bitmap over their ids (1 bit per id in the flows' range): the C
        # encoder looks a row's flows up only where its bit is set
        ends = np.concatenate([src, dst])
        self.flow_lo = int(ends.min()) if len(ends) else 0
        mask = np.zeros(int(ends.max()) - self.flow_lo + 1 if len(ends) else 0, bool)
        mask[ends - self.flow_lo] = True
        self.flow_bits = np.packbits(mask, bitorder="little")

    def _write_head(self) -> None:
        first = pt.TracePacket(
            timestamp=self.first_ns,
            trusted_packet_sequence_id=SEQ_ID,
            sequence_flags=CLEARED | NEEDS,
            first_packet_on_sequence=True,
            interned_data=self.interned,
        )
        if self.default_uuid:
            first.trace_packet_defaults.track_event_defaults.track_uuid = self.default_uuid
        out = [_trace_packet(first)]
        for d in self.descriptors:
            out.append(
                _trace_packet(
                    pt.TracePacket(timestamp=self.first_ns, trusted_packet_sequence_id=SEQ_ID, track_descriptor=d)
                )
            )
        self.f.write(b"".join(out))
        self.written_descriptors = len(self.descriptors)

    def _plan_windows(self) -> list[int]:
        """Cut points (ns) so that each window holds about window_rows events."""
        lo_hi = self._rows(
            self._sql(
                "SELECT min(start_ps), max(start_ps), count(*) FROM events e WHERE run_id = $run AND {event_filter}"
            )
        )[0]
        if lo_hi[2] <= self.window_rows:
            return []
        cuts: list[int] = []
        self._split(lo_hi[0] // 1000, lo_hi[1] // 1000 + 1, cuts, 0)
        return cuts

    def _split(self, lo_ns: int, hi_ns: int, cuts: list[int], depth: int) -> None:
        width = max(1, -(-(hi_ns - lo_ns) // 256))
        hist = self._rows(
            self._sql("""
            SELECT (start_ps // 1000 - $lo) // $w AS b, count(*) FROM events e
            WHERE run_id = $run AND {event_filter} AND start_ps >= $lo_ps AND start_ps < $hi_ps
            GROUP BY b ORDER BY b"""),
            {"lo": lo_ns, "w": width, "lo_ps": lo_ns * 1000, "hi_ps": hi_ns * 1000},
        )
        acc = 0
        for b, c in hist:
            b_lo = lo_ns + b * width
            if c > 2 * self.window_rows and width > 1 and depth < 8:
                if acc:
                    cuts.append(b_lo)
                    acc = 0
                self._split(b_lo, min(b_lo + width, hi_ns), cuts, depth + 1)
                cuts.append(min(b_lo + width, hi_ns))
                continue
            if acc and acc + c > self.window_rows:
                cuts.append(b_lo)
                acc = 0
            acc += c
        # drop duplicates / unordered cuts from recursion edges
        cuts[:] = sorted(set(cuts))

    # -- streaming ------------------------------------------------------------------

    def _window(self, lo_ps: int, hi_ps: int) -> tuple[list[pa.RecordBatch], tuple | None]:
        """One window's rows in stream order, in batches of chunk_rows, and its event_args (for _chunk).

        Runs in the reader thread (_prefetch) while the previous window is encoded. The rows come
        unsorted (a plain scan), are ordered in numpy (_window_order) and gathered batch by batch;
        memory: the window about twice at the peak (DuckDB's batches and their concatenation),
        then once (one column is gathered at a time and its source freed).
        """
        args = self._window_args(lo_ps, hi_ps) if self.has_args else None
        sql = self._sql(STREAM_SQL)
        params = {k: v for k, v in {**self.params, "lo": lo_ps, "hi": hi_ps}.items() if f"${k}" in sql}
        reader = self.con.sql(sql, params=params).to_arrow_reader(self.chunk_rows)
        if reader.schema != STREAM_SCHEMA:
            raise TypeError(f"stream has schema {reader.schema}, expected {STREAM_SCHEMA}")
        table = pa.Table.from_batches(list(reader), schema=STREAM_SCHEMA)
        if table.num_rows == 0:
            return [], args
        rows = table.combine_chunks().to_batches()[0]  # take() on a chunked table concatenates at every call
        del table
        order = _window_order(rows)
        cols = rows.columns
        del rows
        picks = [order[a : a + self.chunk_rows] for a in range(0, len(order), self.chunk_rows)]
        parts: list[list[pa.Array]] = []
        for i in range(len(cols)):
            parts.append(_gather(cols[i], picks))
            cols[i] = None  # the window's column freed once gathered
        return [
            pa.RecordBatch.from_arrays([c[j] for c in parts], schema=STREAM_SCHEMA) for j in range(len(picks))
        ], args

    def _window_args(self, lo_ps: int, hi_ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The window's event_args as DebugAnnotation fields: (sorted event_ids, blob, offsets), or None."""
        t = self._q(self._sql(ARGS_SQL), {"lo": lo_ps, "hi": hi_ps})
        k = t.num_rows
        if k == 0:
            return None
        eid = t.column("event_id").to_numpy().astype(np.int64)
        keys = t.column("key").to_pylist()
        key_iid = np.array([self.arg_key_iid[x] for x in keys], np.uint64)
        ints, dbls, strs = t.column("int_value"), t.column("double_value"), t.column("string_value")
        is_int = pc.is_valid(ints).to_numpy(zero_copy_only=False)
        is_dbl = pc.is_valid(dbls).to_numpy(zero_copy_only=False) & ~is_int
        is_str = pc.is_valid(strs).to_numpy(zero_copy_only=False) & ~is_int & ~is_dbl
        value_kind = np.select([is_int, is_dbl, is_str], [1, 2, 3], 0).astype(np.uint8)
        sarr = pc.fill_null(strs, "").combine_chunks().cast(pa.large_string())
        offs = np.frombuffer(sarr.buffers()[1], np.int64, len(sarr) + 1, sarr.offset * 8)
        data = sarr.buffers()[2] if sarr.buffers()[2] is not None else b""
        blob, aoffs = wire.encode_args(
            key_iid,
            value_kind,
            pc.fill_null(ints, 0).to_numpy(zero_copy_only=False).astype(np.int64),
            pc.fill_null(dbls, 0.0).to_numpy(zero_copy_only=False).astype(np.float64),
            offs,
            data,
        )
        return eid, np.frombuffer(blob, np.uint8), np.frombuffer(aoffs, np.int64)

    def _chunk(self, batch: pa.RecordBatch, args) -> int:
        """Encode and write one batch of the stream; returns its number of events."""
        n = batch.num_rows
        if n == 0:
            return 0
        if batch.schema != STREAM_SCHEMA:
            raise TypeError(f"stream batch has schema {batch.schema}, expected {STREAM_SCHEMA}")
        kind = _values(batch, "kind")
        track = _values(batch, "track_id")
        start_ps = _values(batch, "start_ps")
        s_ns = start_ps // 1000
        e_ns = (start_ps + _values(batch, "dur_ps")) // 1000
        is_mk, is_ct, is_bd = kind == _MARKER, kind == _COUNTER, kind == _BREAKDOWN

        # tracks: lanes for slices (keys: 2 * track (+1 for markers); breakdown: after those, by
        # chip), the counter track for samples
        uuid = np.empty(n, np.uint64)
        sl = np.flatnonzero(~is_ct)
        key = 2 * track + is_mk
        if is_bd.any():
            key = np.where(is_bd, self.bd_key0 + track, key)
        lanes = self.lanes.assign(key[sl], s_ns[sl], e_ns[sl])
        uuid[sl] = self.lane0[key[sl]]
        for j in np.flatnonzero(lanes > 0).tolist():
            kk, ln = int(key[sl[j]]), int(lanes[j])
            u = self.lane_uuids.get((kk, ln))
            if u is None:
                parent, line, rank = self.key_parent[kk]
                u = self.lane_uuids[(kk, ln)] = self._describe(name=line, parent_uuid=parent, sibling_order_rank=rank)
                self.stats.lanes += 1
            uuid[sl[j]] = u
        ct = np.flatnonzero(is_ct)
        uuid[ct] = self.counter_uuid[track[ct]]
        if len(self.descriptors) > self.written_descriptors:  # new lanes, described before their first event
            ts0 = max(int(s_ns[0]), self.last_ts)
            self.f.write(
                b"".join(
                    _trace_packet(pt.TracePacket(timestamp=ts0, trusted_packet_sequence_id=SEQ_ID, track_descriptor=d))
                    for d in self.descriptors[self.written_descriptors :]
                )
            )
            self.written_descriptors = len(self.descriptors)
            self.stats.tracks = len(self.descriptors)

        self.f.write(self._encode(batch, uuid, args))
        self.seq += n
        self.last_ts = max(self.last_ts, int(s_ns[-1]))
        counts = np.bincount(kind, minlength=4)
        self.stats.events += int(counts[_EVENT])
        self.stats.markers += int(counts[_MARKER])
        self.stats.counters += int(counts[_COUNTER])
        self.stats.breakdown += int(counts[_BREAKDOWN])
        return int(counts[_EVENT])

    def _encode(self, batch: pa.RecordBatch, uuid: np.ndarray, args) -> memoryview:
        """The batch's packets (BEGIN / INSTANT / COUNTER per row, the ENDs due before each) on the wire."""
        n = batch.num_rows
        if len(self.heap[0]) < self.heap_n + n:  # room for every row's END
            cap = 2 * (self.heap_n + n)
            self.heap = tuple(
                np.concatenate([h[: self.heap_n], np.zeros(cap - self.heap_n, h.dtype)]) for h in self.heap
            )
        a_eid, a_blob, a_offs = args if args is not None else _NO_ARGS
        need = n * wire.MAX_ROW_BYTES + (self.heap_n + n) * wire.MAX_END_BYTES + len(a_blob)
        if len(self.out) < need:  # np.empty: pages are touched only as far as packets are written
            self.out = np.empty(need + need // 4, np.uint8)
        tables = (
            self.category_of_track,
            self.name_iid,
            self.table_iid,
            self.ann_iids,
            self.flow_src,
            self.flow_src_id,
            self.flow_dst,
            self.flow_dst_id,
            self.flow_bits,
            a_eid,
            a_offs,
            a_blob,
        )
        cols = tuple(_column(batch, c) for c in STREAM_COLUMNS)
        length, self.heap_n = wire.encode_chunk(
            cols,
            uuid,
            tables,
            self.flow_lo,
            self.default_uuid,
            self.step_cat,
            self.bd_cat,
            (*self.heap, self.heap_n),
            self.seq,
            self.out,
        )
        return memoryview(self.out)[:length]

    def _flush_ends(self) -> None:
        """The ENDs of the slices still open, after the last row."""
        self.f.write(wire.encode_ends((*self.heap, self.heap_n)))
        self.heap_n = 0


def _values(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """A column without nulls as numpy (zero-copy)."""
    arr = batch.column(name)
    if arr.null_count:
        raise ValueError(f"stream column {name} has nulls")
    return arr.to_numpy()


def _column(batch: pa.RecordBatch, name: str) -> tuple:
    """(values buffer, validity bitmap or None, offset) of an 8-byte Arrow column, for the C encoder."""
    arr = batch.column(name)
    validity, data = arr.buffers()[:2]
    return data, validity if arr.null_count else None, arr.offset


def _gather(arr: pa.Array, picks: list[np.ndarray]) -> list[pa.Array]:
    """arr.take(p) for each p, for an 8-byte column: numpy gathers of its values and validity.

    pyarrow's take cost several times as much per column; values under nulls are gathered
    as they are (nothing reads them).
    """
    n = len(arr)
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, np.float64 if arr.type == pa.float64() else np.int64, n, arr.offset * 8)
    if not arr.null_count:
        return [pa.Array.from_buffers(arr.type, len(p), [None, pa.py_buffer(values[p])], 0) for p in picks]
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[arr.offset : arr.offset + n]
    out = []
    for p in picks:
        v = valid[p]
        out.append(
            pa.Array.from_buffers(
                arr.type,
                len(p),
                [pa.py_buffer(np.packbits(v, bitorder="little")), pa.py_buffer(values[p])],
                len(p) - int(v.sum()),
            )
        )
    return out


def _window_order(t: pa.RecordBatch) -> np.ndarray:
    """Indices that put a window's rows in STREAM_ORDER, exactly as DuckDB's ORDER BY would.

    Keys as in SQL: start ns, end ns descending, kind, id (NULLs last), track_id; `//` truncates
    toward zero as in DuckDB. Each pair of keys is packed into one int64 where its range fits
    (end descending as end - start ascending, equal within a start), else sorted as separate keys.
    """
    start, dur = _values(t, "start_ps"), _values(t, "dur_ps")
    s_ns, e_ns = _div_1000(start), _div_1000(start + dur)
    gap = s_ns - e_ns  # within one start nanosecond, ascending gap is descending end
    kind, track = _values(t, "kind"), _values(t, "track_id")
    ids = t.column("id")
    if ids.null_count:  # NULLS LAST
        ids = pc.fill_null(ids, pc.max(ids).as_py() + 1 if ids.null_count < len(ids) else 0)
    ident = ids.to_numpy()
    return np.lexsort((*_packed(track, ident, kind), *_packed(gap, s_ns)))


def _packed(*keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Keys for np.lexsort (last one primary): one int64 when the keys' ranges multiply below 2**62."""
    if len(keys[0]) == 0:
        return keys
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows, strict=True)]
    if np.prod([float(x) for x in spans]) >= 2.0**62 or any(x >= 1 << 62 for x in spans):
        return keys
    out = keys[-1] - np.int64(lows[-1])
    for k, lo, span in zip(keys[-2::-1], lows[-2::-1], spans[-2::-1], strict=True):
        out = out * np.int64(span) + (k - np.int64(lo))
    return (out,)


def _div_1000(x: np.ndarray) -> np.ndarray:
    """x // 1000 truncated toward zero, as DuckDB's integer `//`."""
    q = x // 1000
    neg = x < 0
    if neg.any():
        q += neg & (q * 1000 != x)
    return q


def _prefetch(items: Iterable, depth: int = 2):
    """The items, made ahead in a thread (the next window is fetched and sorted while one is encoded).

    At most `depth` items exist at a time, counting the one the consumer holds, so memory
    stays bounded; the iterable is drained by the thread alone, and the thread is joined
    before this generator returns or raises.
    """
    q: queue.Queue = queue.Queue()
    slots = threading.Semaphore(depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            it = iter(items)
            while True:
                while not slots.acquire(timeout=0.1):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                item = next(it, done)
                q.put(item)
                if item is done:
                    return
        except BaseException as e:  # handed to the consumer
            q.put(e)

    t = threading.Thread(target=run, name="scprof-export-reader", daemon=True)
    t.start()
    try:
        held = False
        while True:
            if held:  # the consumer is done with the item it held
                slots.release()
            item = q.get()
            held = True
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            item = None
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)

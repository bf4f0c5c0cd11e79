"""The run's op events as numpy columns, grouped by track and time-ordered within each.

The idle-gap search (analyzers/gap_search.py) walks every op event of a track
in time order. DuckDB would sort the same ten million rows once per window
function or ASOF join; here one scan (profiler/sql/analysis/ops.sql: op_arrays) and one grouping per
context serve every search (and the wall-time split's events, breakdown.py):
rows grouped by track (from the runs of one track that ingest stores, else a
radix sort), then a sort by (start, end) of the tracks not in that order already.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.context import RunContext

NO_STEP = -1  # `step` of an event tagged with none (steps are never negative)

# Track kinds, as codes in OpArrays.track_kind.
TENSORCORE, SPARSECORE, HOST, OTHER = 0, 1, 2, 3
KIND_CODES = {"tensorcore": TENSORCORE, "sparsecore": SPARSECORE, "host": HOST}
OP_LINES = ("XLA Ops", "Sparse Core Ops")  # the lines whose ops make a core busy


@dataclass(frozen=True)
class OpArrays:
    """Row columns grouped by track, sorted by (start_ps, end_ps) within each; and per-track facts."""

    step: np.ndarray  # int64, NO_STEP when the event has none
    start: np.ndarray  # int64 ps
    end: np.ndarray  # int64 ps
    source: np.ndarray  # int64: each row's index in the scan (for columns gathered on demand)
    event_id_scan: np.ndarray  # int64 events.event_id in scan order
    category_scan: np.ndarray  # int64 events.category_id in scan order, -1 when none
    name_scan: np.ndarray  # events.name_id in scan order
    track_id: np.ndarray  # per track: tracks.track_id
    track_chip: np.ndarray  # per track: chip (-1: the host)
    track_kind: np.ndarray  # per track: kind code (TENSORCORE, SPARSECORE, HOST, OTHER)
    track_op_line: np.ndarray  # per track: on an XLA Ops or Sparse Core Ops line
    bounds: np.ndarray  # per track and one more: its first row (the last entry: the row count)

    def track_of(self, rows: np.ndarray) -> np.ndarray:
        """The track (index into the per-track arrays) of the given rows."""
        return np.searchsorted(self.bounds, rows, side="right") - 1

    def event_ids(self, rows: np.ndarray) -> np.ndarray:
        """events.event_id of the given rows."""
        return self.event_id_scan[self.source[rows]]

    def with_category(self, ctx: RunContext, value: str) -> np.ndarray:
        """Row mask: events whose recorded category is `value`."""
        ids = ctx.sql("analysis.ops.string_ids", value=value).column("string_id").to_pylist()
        if not ids:
            return np.zeros(len(self.start), bool)
        return np.isin(self.category_scan, np.asarray(ids, np.int64))[self.source]


def op_arrays(ctx: RunContext, span: tuple[int, int] | None = None) -> OpArrays:
    """The run's OpArrays (cached per context); with `span` (lo, hi), only the events that
    overlap [lo, hi) (not cached: the Perfetto export reads a run span by span)."""
    if span is not None:
        return _load(ctx, span)
    return ctx.memo("op_arrays", lambda: _load(ctx))


def _load(ctx: RunContext, span: tuple[int, int] | None = None) -> OpArrays:
    tracks = ctx.sql("analysis.ops.op_array_tracks")
    track_id = tracks.column("track_id").to_numpy().astype(np.int64)
    if span is None:
        raw = ctx.sql("analysis.ops.op_arrays", tracks=track_id.tolist())
    else:  # the longest event bounds how early one overlapping the span starts (zonemaps skip the rest)
        max_dur = ctx.memo("max_event_dur_ps", lambda: _max_event_dur_ps(ctx))
        raw = ctx.sql("analysis.ops.op_arrays_span", tracks=track_id.tolist(), lo=span[0], hi=span[1], max_dur=max_dur)
    scan_track = raw.column("track_id").to_numpy()
    # rank of a track, through a lookup table over the (small, dense) track ids
    lut = np.zeros(int(track_id.max()) + 1 if len(track_id) else 1, np.int32)
    lut[track_id] = np.arange(len(track_id))
    group = _group(scan_track, lut)
    bounds = np.concatenate([[0], np.cumsum(group.counts(len(track_id)))]).astype(np.int64)
    start, end, step = (group.take(raw.column(k).to_numpy()) for k in ("start_ps", "end_ps", "step"))
    source = group.source
    for t in range(len(track_id)):  # each track by (start, end), where it is not so already
        a, z = int(bounds[t]), int(bounds[t + 1])
        s, e = start[a:z], end[a:z]
        if (
            z - a > 1
            and not np.all(s[1:] > s[:-1])
            and not np.all((s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (e[1:] >= e[:-1])))
        ):
            within = np.lexsort((e, s))
            source[a:z], start[a:z], end[a:z], step[a:z] = source[a:z][within], s[within], e[within], step[a:z][within]
    return OpArrays(
        step=step.astype(np.int64),
        start=start,
        end=end,
        source=source,
        event_id_scan=raw.column("event_id").to_numpy(),
        category_scan=raw.column("category_id").to_numpy(),
        name_scan=raw.column("name_id").to_numpy(),
        track_id=track_id,
        track_chip=tracks.column("chip").to_numpy().astype(np.int64),
        track_kind=np.array([KIND_CODES.get(k, OTHER) for k in tracks.column("track_kind").to_pylist()], np.int8),
        track_op_line=np.isin(np.asarray(tracks.column("line").to_pylist(), object), OP_LINES),
        bounds=bounds,
    )


def _max_event_dur_ps(ctx: RunContext) -> int:
    """The run's longest event (its summary), or 0."""
    rows = ctx.sql("analysis.ops.max_event_dur").to_pylist()
    return int(rows[0]["max_event_dur_ps"] or 0) if rows else 0


@dataclass(frozen=True)
class _Grouping:
    """Scan rows regrouped by track rank, scan order kept within a track: as runs of consecutive
    scan rows (first, length) in their new order, or (when runs are many) as a gather order."""

    rank: np.ndarray  # per run (per row with `gather`): its track's rank
    first: np.ndarray | None = None  # per run: its first scan row
    length: np.ndarray | None = None  # per run: its row count
    order: np.ndarray | None = None  # the runs' new order
    gather: np.ndarray | None = None  # instead of runs: the row order

    def counts(self, n_tracks: int) -> np.ndarray:
        """Rows per track rank."""
        return np.bincount(self.rank, self.length, n_tracks).astype(np.int64)

    @property
    def source(self) -> np.ndarray:
        """Each grouped row's scan row (a new array: the caller may reorder it)."""
        if self.gather is not None:
            return self.gather.copy()
        f, n = self.first[self.order], self.length[self.order]
        return np.arange(int(n.sum())) + np.repeat(f - np.concatenate([[0], np.cumsum(n)[:-1]]), n)

    def take(self, column: np.ndarray) -> np.ndarray:
        """A scan-order column, grouped (runs copy as slices, far cheaper than a gather)."""
        if self.gather is not None:
            return column[self.gather]
        if not len(self.order):
            return column[:0].copy()
        return np.concatenate(
            [
                column[f : f + n]
                for f, n in zip(self.first[self.order].tolist(), self.length[self.order].tolist(), strict=True)
            ]
        )


def _group(scan_track: np.ndarray, lut: np.ndarray) -> _Grouping:
    """How to group scan rows by track rank (lut[track_id]), keeping scan order within a track.

    Ingest stores each group of about a million events by track, so a scan holds few
    long runs of one track: those runs are put in track order and copied as slices.
    Otherwise (many short runs) a radix sort of the ranks gives a gather order.
    """
    n = len(scan_track)
    cut = np.flatnonzero(scan_track[1:] != scan_track[:-1]) + 1
    if len(cut) + 1 > n // 64:
        rank = lut[scan_track].astype(np.int16 if len(lut) < 2**15 else np.int32)  # radix-sorted below
        gather = np.argsort(rank, kind="stable")
        return _Grouping(rank=rank, gather=gather)
    first = np.concatenate([[0], cut]) if n else np.zeros(0, np.int64)
    length = np.diff(np.concatenate([first, [n]]))
    rank = lut[scan_track[first]]
    return _Grouping(rank=rank, first=first, length=length, order=np.argsort(rank, kind="stable"))

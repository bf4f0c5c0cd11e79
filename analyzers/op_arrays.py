"""The run's op events as numpy columns, grouped by track and time-ordered within each.

The idle-gap search (analyzers/gap_search.py) walks every op event of a track
in time order. DuckDB would sort the same ten million rows once per window
function or ASOF join; here one scan (sql/op_arrays.sql) and one grouping per
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
    track_id: np.ndarray  # per track: tracks.track_id
    track_chip: np.ndarray  # per track: chip (-1: the host)
    track_kind: np.ndarray  # per track: kind code (TENSORCORE, SPARSECORE, HOST, OTHER)
    track_op_line: np.ndarray  # per track: on an XLA Ops or Sparse Core Ops line
    bounds: np.ndarray  # per track and one more: its first row (the last entry: the row count)

    def event_ids(self, rows: np.ndarray) -> np.ndarray:
        """events.event_id of the given rows."""
        return self.event_id_scan[self.source[rows]]

    def with_category(self, ctx: RunContext, value: str) -> np.ndarray:
        """Row mask: events whose recorded category is `value`."""
        ids = [r["string_id"] for r in ctx.store.rows(
            "SELECT string_id FROM strings WHERE run_id = ? AND value = ?", [ctx.run_id, value])]  # fmt: skip
        if not ids:
            return np.zeros(len(self.start), bool)
        return np.isin(self.category_scan, np.asarray(ids, np.int64))[self.source]


def op_arrays(ctx: RunContext) -> OpArrays:
    """The run's OpArrays (cached per context)."""
    return ctx.memo("op_arrays", lambda: _load(ctx))


def _load(ctx: RunContext) -> OpArrays:
    tracks = ctx.store.query(f"SELECT track_id, chip, track_kind, line FROM {ctx.temp('op_tracks')} ORDER BY track_id")
    track_id = tracks.column("track_id").to_numpy().astype(np.int64)
    raw = ctx.query("op_arrays", tracks=track_id.tolist())
    scan_track = raw.column("track_id").to_numpy()
    # rank of each row's track, through a lookup table over the (small, dense) track ids
    lut = np.zeros(int(track_id.max()) + 1 if len(track_id) else 1, np.int16 if len(track_id) < 2**15 else np.int32)
    lut[track_id] = np.arange(len(track_id))
    rank = lut[scan_track]
    source = _group(rank)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(rank, minlength=len(track_id)))]).astype(np.int64)
    start = raw.column("start_ps").to_numpy()[source]
    end = raw.column("end_ps").to_numpy()[source]
    for t in range(len(track_id)):  # each track by (start, end), where it is not so already
        a, z = int(bounds[t]), int(bounds[t + 1])
        s, e = start[a:z], end[a:z]
        if z - a > 1 and not np.all((s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (e[1:] >= e[:-1]))):
            within = np.lexsort((e, s))
            source[a:z], start[a:z], end[a:z] = source[a:z][within], s[within], e[within]
    return OpArrays(
        step=raw.column("step").to_numpy().astype(np.int64)[source], start=start, end=end, source=source,
        event_id_scan=raw.column("event_id").to_numpy(), category_scan=raw.column("category_id").to_numpy(),
        track_id=track_id, track_chip=tracks.column("chip").to_numpy().astype(np.int64),
        track_kind=np.array([KIND_CODES.get(k, OTHER) for k in tracks.column("track_kind").to_pylist()], np.int8),
        track_op_line=np.isin(np.asarray(tracks.column("line").to_pylist(), object), OP_LINES),
        bounds=bounds,
    )  # fmt: skip


def _group(rank: np.ndarray) -> np.ndarray:
    """The row order that groups rows by rank, keeping scan order within a rank.

    Ingest stores each group of about a million events by track, so a scan holds few
    long runs of one track: the order is then those runs' aranges, put in track order.
    Otherwise a radix sort (numpy sorts 16-bit keys by radix).
    """
    n = len(rank)
    cut = np.flatnonzero(rank[1:] != rank[:-1]) + 1
    if len(cut) + 1 > n // 64:
        return np.argsort(rank, kind="stable")
    first = np.concatenate([[0], cut])
    length = np.diff(np.concatenate([first, [n]]))
    runs = np.argsort(rank[first], kind="stable")
    shift = first[runs] - np.concatenate([[0], np.cumsum(length[runs])[:-1]])
    return np.arange(n) + np.repeat(shift, length[runs])

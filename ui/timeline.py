"""Timeline data: only what a window of the screen can show, whatever the run's size.

Zoomed in (at most EXACT_LIMIT events in the window) the server sends the exact
events with their arguments. Wider, it sends one cell per track and pixel column:
the share of the column the track is busy and how many events fall in it. Events
shorter than a column are counted and their whole time summed in the column they
start in (clamped to the window); events at least a column long are few (a handful
per column and track) and are painted over every column they cover. Either way the
payload is bounded by the window size in pixels, not by the run.

Windows at least COLUMNS bins of the run's timeline summary wide (1/16 of the run
and more, the first view of every run) are re-binned from the summary built at
ingest (run_summaries, timeline_bins, timeline_long: docs/schema.md) on a grid of
whole bins, which costs thousands of rows instead of millions; the window then
starts at the bin holding t0 and has up to COLUMNS columns of whole bins. Narrower
windows are aggregated from the events in SQL (queries.TIMELINE_SHORT / _LONG). Both
give the same columns for the same grid (tests/ui/test_summaries.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from profiler.store import Store
from ui import queries as Q
from ui.store_access import run_memo, sql

EXACT_LIMIT = 4000  # events in the window at or below which the exact events are sent
COLUMNS = 1000  # pixel columns of the wide view
LONG_LIMIT = 400_000  # safety cap on long events painted per request

# Display units for a time axis: (name, picoseconds per unit), largest first.
TIME_UNITS = (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3))


def time_unit(span_ps: float) -> tuple[str, float]:
    """The unit that shows a span of `span_ps` with a few digits before the point."""
    for name, scale in TIME_UNITS:
        if span_ps >= 2 * scale:
            return name, scale
    return "ns", 1e3


@dataclass
class Track:
    track_id: int
    plane: str
    line: str
    kind: str
    chip: int
    n: int

    @property
    def label(self) -> str:
        plane = self.plane.removeprefix("/device:").removeprefix("/host:")
        plane = plane.replace(" SparseCore ", " SC")
        return f"{plane} · {self.line}"


@dataclass
class TimelineView:
    """What the timeline shows for one window: mode, tracks and the data to draw."""

    mode: str  # "exact", "aggregated" or "empty"
    t0: int
    t1: int
    tracks: list[Track]
    events_in_window: int
    columns: int = 0
    column_ps: int = 0
    # exact mode: one dict per event (name, start_ps, dur_ps, track label, args)
    events: list[dict[str, Any]] = field(default_factory=list)
    # aggregated mode: [track, column] busy share (NaN where empty) and event counts
    busy: np.ndarray | None = None
    counts: np.ndarray | None = None


def run_tracks(store: Store, run_id: int) -> list[Track]:
    """The run's tracks with events or step markers, in display order."""

    def compute() -> list[Track]:
        rows = sql(store, Q.TIMELINE_TRACKS, run=run_id).to_pylist()
        return [Track(r["track_id"], r["plane"], r["line"], r["kind"], r["chip"], r["n"]) for r in rows]

    return run_memo(store, run_id, "tracks", None, compute)


def run_summary(store: Store, run_id: int) -> dict[str, Any]:
    """The run's row of run_summaries (timeline grid, longest event, tables on events); {} if none."""
    return run_memo(
        store, run_id, "summary", None, lambda: (sql(store, Q.RUN_SUMMARY, run=run_id).to_pylist() or [{}])[0]
    )


def max_event_dur(store: Store, run_id: int) -> int:
    """The run's longest event (bounds how early an event overlapping a window starts)."""
    return int(run_summary(store, run_id).get("max_event_dur_ps") or 0)


def select_tracks(tracks: list[Track], chips: list[int] | None) -> list[Track]:
    """Tracks of the chosen chips (None: all); host tracks (chip -1) are always kept."""
    if chips is None:
        return tracks
    keep = set(chips)
    return [t for t in tracks if t.chip < 0 or t.chip in keep]


def timeline_view(
    store: Store,
    run_id: int,
    tracks: list[Track],
    t0: int,
    t1: int,
    columns: int = COLUMNS,
    exact_limit: int = EXACT_LIMIT,
) -> TimelineView:
    """The data for window [t0, t1) of `tracks`: exact events or per-column aggregates."""
    t0, t1 = int(t0), int(max(t1, t0 + 1))
    ids = [t.track_id for t in tracks]
    if not ids:
        return TimelineView("empty", t0, t1, tracks, 0)
    summary = run_summary(store, run_id)
    bin_ps = summary.get("timeline_bin_ps")
    if bin_ps and t1 - t0 >= columns * bin_ps:
        wide = run_memo(
            store,
            run_id,
            "aggregate_summary",
            (tuple(ids), t0, t1, columns),
            lambda: _aggregate_summary(store, run_id, tracks, t0, t1, columns, summary["timeline_origin_ps"], bin_ps),
        )
        if wide.events_in_window > exact_limit:
            return wide
    maxdur = max_event_dur(store, run_id)
    n = run_memo(
        store,
        run_id,
        "window_count",
        (tuple(ids), t0, t1),
        lambda: sql(store, Q.WINDOW_COUNT, run=run_id, tracks=ids, t0=t0, t1=t1, maxdur=maxdur).column("n")[0].as_py(),
    )
    if n == 0:
        return TimelineView("empty", t0, t1, tracks, 0)
    if n <= exact_limit:
        events = _exact_events(store, run_id, tracks, t0, t1, exact_limit, maxdur)
        return TimelineView("exact", t0, t1, tracks, n, events=events)
    # Wide views are the same whoever asks: cached per run, tracks, window and columns.
    return run_memo(
        store,
        run_id,
        "aggregate",
        (tuple(ids), t0, t1, columns),
        lambda: _aggregate(store, run_id, tracks, t0, t1, n, columns, maxdur),
    )


def _exact_events(
    store: Store, run_id: int, tracks: list[Track], t0: int, t1: int, limit: int, maxdur: int
) -> list[dict]:
    ids = [t.track_id for t in tracks]
    rows = sql(store, Q.TIMELINE_EXACT, run=run_id, tracks=ids, t0=t0, t1=t1, limit=limit, maxdur=maxdur).to_pylist()
    event_ids = [r["event_id"] for r in rows if r["event_id"] >= 0]
    args: dict[int, dict[str, str]] = {}
    if event_ids:
        for a in sql(
            store, Q.TIMELINE_ARGS, run=run_id, ids=event_ids, lo=min(event_ids), hi=max(event_ids)
        ).to_pylist():
            args.setdefault(a["event_id"], {})[a["key"]] = a["value"]
    for r in rows:
        r["args"] = args.get(r["event_id"], {})
    return rows


def _aggregate(
    store: Store, run_id: int, tracks: list[Track], t0: int, t1: int, n: int, columns: int, maxdur: int
) -> TimelineView:
    ids = [t.track_id for t in tracks]
    row_of = {tid: i for i, tid in enumerate(ids)}
    b = max(1, -(-(t1 - t0) // columns))  # column width in ps (ceiling)
    busy = np.zeros((len(ids), columns), np.float64)
    counts = np.zeros((len(ids), columns), np.int64)
    short = sql(store, Q.TIMELINE_SHORT, run=run_id, tracks=ids, t0=t0, t1=t1, b=b)
    if short.num_rows:
        rows = np.array([row_of[t] for t in short.column("track_id").to_pylist()], np.int64)
        cols = np.clip(short.column("col").to_numpy(), 0, columns - 1)
        np.add.at(busy, (rows, cols), short.column("busy_ps").to_numpy())
        np.add.at(counts, (rows, cols), short.column("n").to_numpy())
    long = sql(store, Q.TIMELINE_LONG, run=run_id, tracks=ids, t0=t0, t1=t1, b=b, limit=LONG_LIMIT, maxdur=maxdur)
    if long.num_rows:
        rows = np.array([row_of[t] for t in long.column("track_id").to_pylist()], np.int64)
        _paint(busy, counts, rows, long.column("s").to_numpy() - t0, long.column("e").to_numpy() - t0, b)
    share = busy / b
    share[counts == 0] = np.nan
    return TimelineView(
        "aggregated", t0, t1, tracks, n, columns=columns, column_ps=b, busy=np.minimum(share, 1.0), counts=counts
    )


def summary_grid(t0: int, t1: int, columns: int, origin: int, bin_ps: int) -> tuple[int, int, int, int]:
    """(first bin, bins per column, columns, window start) of the grid of whole summary bins that
    covers [t0, t1) with at most `columns` columns."""
    g0 = (t0 - origin) // bin_ps
    start = origin + g0 * bin_ps
    k = max(1, -(-(t1 - start) // (columns * bin_ps)))
    n_cols = max(1, -(-(t1 - start) // (k * bin_ps)))
    return g0, k, n_cols, start


def _aggregate_summary(
    store: Store, run_id: int, tracks: list[Track], t0: int, t1: int, columns: int, origin: int, bin_ps: int
) -> TimelineView:
    """The wide view from the timeline summary, on the grid of whole bins covering [t0, t1)."""
    ids = [t.track_id for t in tracks]
    row_of = np.full(max(ids) + 1, -1, np.int64)
    row_of[ids] = np.arange(len(ids))
    g0, k, n_cols, start = summary_grid(t0, t1, columns, origin, bin_ps)
    b = k * bin_ps
    end = start + n_cols * b
    busy = np.zeros((len(ids), n_cols), np.float64)
    counts = np.zeros((len(ids), n_cols), np.int64)
    # Events shorter than a bin: counted and summed per bin at ingest, summed here per column...
    parts = [sql(store, Q.TIMELINE_BINS_WINDOW, run=run_id, tracks=ids, g0=g0, g1=g0 + n_cols * k, k=k)]
    if start > origin:  # ...plus those starting in the bin before the window and reaching into it.
        edge = sql(store, Q.TIMELINE_EDGE, run=run_id, tracks=ids, t0=start, w=bin_ps)
        parts.append(edge.append_column("col", pa.array(np.zeros(edge.num_rows, np.int32))))
    for p in parts:
        if p.num_rows:
            rows = row_of[p.column("track_id").to_numpy()]
            np.add.at(busy, (rows, p.column("col").to_numpy()), p.column("busy_ps").to_numpy())
            np.add.at(counts, (rows, p.column("col").to_numpy()), p.column("n").to_numpy())
    # Events at least a bin long, kept whole: short for this view when under a column, else painted.
    long = sql(store, Q.TIMELINE_LONG_WINDOW, run=run_id, tracks=ids, t0=start, t1=end)
    if long.num_rows:
        rows = row_of[long.column("track_id").to_numpy()]
        s = long.column("start_ps").to_numpy()
        d = long.column("dur_ps").to_numpy()
        short = d < b
        col = (np.maximum(s[short], start) - start) // b
        np.add.at(busy, (rows[short], col), d[short].astype(np.float64))
        np.add.at(counts, (rows[short], col), 1)
        lg = ~short
        _paint(busy, counts, rows[lg], np.maximum(s[lg], start) - start, np.minimum(s[lg] + d[lg], end) - start, b)
    n = int(sum(int(p.column("n").to_numpy().sum()) for p in parts if p.num_rows)) + long.num_rows
    share = busy / b
    share[counts == 0] = np.nan
    return TimelineView(
        "aggregated", start, end, tracks, n, columns=n_cols, column_ps=b, busy=np.minimum(share, 1.0), counts=counts
    )


def _paint(busy: np.ndarray, counts: np.ndarray, rows: np.ndarray, s: np.ndarray, e: np.ndarray, b: int) -> None:
    """Add intervals [s, e) (ps from the window start) to the columns of width b they cover."""
    columns = busy.shape[1]
    c0 = np.clip(s // b, 0, columns - 1)
    c1 = np.clip((np.maximum(e, s + 1) - 1) // b, 0, columns - 1)
    # Full coverage b on every column in [c0, c1], via a difference array per row...
    diff = np.zeros((busy.shape[0], columns + 1), np.float64)
    np.add.at(diff, (rows, c0), 1.0)
    np.add.at(diff, (rows, c1 + 1), -1.0)
    cover = np.cumsum(diff, axis=1)[:, :columns]
    busy += cover * b
    counts += np.rint(cover).astype(np.int64)
    # ...then take back the parts of the first and last columns outside [s, e).
    np.add.at(busy, (rows, c0), -(s - c0 * b).astype(np.float64))
    np.add.at(busy, (rows, c1), -((c1 + 1) * b - e).astype(np.float64))

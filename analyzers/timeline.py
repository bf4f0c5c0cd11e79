"""The wall-time split of each chip's timeline: which category owns each instant.

A sweep line in numpy: every instant of a step window goes to the
highest-priority category active then, or to `idle`, so a step's categories sum
exactly to its duration whatever overlaps. Per chip, each category's events are
first merged into disjoint intervals (cores of one chip often work at once, so
this leaves far fewer points), then one sort of their start/end points and a
running count per category give the owner of every instant. Chips are split in
parallel threads. SQL selects the events (sql/timeline_events.sql); only the
sweep itself, which needs running counts per category that DuckDB's window
functions compute far more slowly, is here.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

# Priority order of the wall-time split (first wins), as in the PyTorch profiler's
# split: device compute, then collectives, then SparseCore work, then the host.
CATEGORIES = (
    "tc_forward",
    "tc_backward",
    "tc_collective",
    "tc_other",
    "sc_forward",
    "sc_backward",
    "sc_collective",
    "sc_other",
    "host_to_device",
    "host_preprocess",
    "host_other",
    "idle",
)


def split_timeline(
    events: pa.Table, windows: pa.Table, categories: tuple[str, ...] = CATEGORIES, sets: bool = False
) -> pa.Table:
    """Per (chip, step, category): the time the category owns in the step window.

    `events`: chip, start_ps, end_ps, priority (index into `categories`, whose last
    entry is the name for time nothing covers), host events already copied onto
    every chip. `windows`: chip, step, start_ps, end_ps, non-overlapping per chip.
    With `sets`, time goes to the *set* of kinds active instead of the first one:
    `categories[mask]` names the set whose bit k is set when kind k is active
    (so categories[0] is "nothing", and K kinds need 2**K names).
    """
    return split_timelines(events, windows, {"priority": (categories, sets)})["priority"]


def split_timelines(
    events: pa.Table, windows: pa.Table, views: dict[str, tuple[tuple[str, ...], bool]]
) -> dict[str, pa.Table]:
    """Several splits of the same events, one chip per task on a thread pool (numpy
    releases the GIL, so chips split in parallel on every core).

    `views` maps an int column of `events` (the event's kind in that view; negative:
    not part of it) to (categories, sets) as in split_timeline.
    """
    ev = {k: events.column(k).to_numpy() for k in ("chip", "start_ps", "end_ps", *views)}
    win = {k: windows.column(k).to_numpy() for k in ("chip", "step", "start_ps", "end_ps")}

    def one_chip(chip: int) -> list[pa.Table]:
        wmask = win["chip"] == chip
        order = np.argsort(win["start_ps"][wmask], kind="stable")
        w_start, w_end, w_step = (win[k][wmask][order] for k in ("start_ps", "end_ps", "step"))
        emask = np.flatnonzero(ev["chip"] == chip)
        emask = emask[np.argsort(ev["start_ps"][emask], kind="stable")]  # by start, for every view
        start, end = ev["start_ps"][emask], ev["end_ps"][emask]
        parts = []
        for v, (cats, sets) in views.items():
            owned = _owned(start, end, ev[v][emask], len(cats), sets, w_start, w_end)
            steps_idx, cat_idx = np.nonzero(owned)
            parts.append(_table(np.full(len(steps_idx), chip, np.int32), w_step[steps_idx],
                                np.asarray(cats, dtype=object)[cat_idx], owned[steps_idx, cat_idx]))  # fmt: skip
        return parts

    chips = np.unique(win["chip"]).tolist()
    with ThreadPoolExecutor(max_workers=min(len(chips), os.cpu_count() or 1) or 1) as pool:
        per_chip = list(pool.map(one_chip, chips))
    empty = _table(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, object), np.zeros(0, np.int64))
    return {v: pa.concat_tables([empty, *(p[i] for p in per_chip)]) for i, v in enumerate(views)}


def _table(chip: np.ndarray, step: np.ndarray, category: np.ndarray, dur_ps: np.ndarray) -> pa.Table:
    """The split's rows as an Arrow table (chip, step, category, dur_ps)."""
    return pa.table({
        "chip": pa.array(chip, pa.int32()), "step": pa.array(step, pa.int32()),
        "category": pa.array(category, pa.string()), "dur_ps": pa.array(dur_ps, pa.int64()),
    })  # fmt: skip


def _owned(
    start: np.ndarray,
    end: np.ndarray,
    kind: np.ndarray,
    n_cat: int,
    sets: bool,
    w_start: np.ndarray,
    w_end: np.ndarray,
) -> np.ndarray:
    """A matrix [window, category] of the ps each category owns, for one chip's events (sorted by start).

    Priority mode: the first active kind owns each instant, category n_cat - 1 is
    'nothing'. Sets mode: the bitmask of active kinds is the category, 0 'nothing'.
    Events of a negative kind take no part. Only the union of each kind's events
    matters, so each kind is first merged into disjoint intervals (a sort by start
    and a running maximum of ends): the sweep then runs over far fewer points when
    several cores of a chip work at once.
    """
    use = kind >= 0
    kind, start, end = kind[use], start[use], end[use]
    by_kind = np.argsort(kind.astype(np.int8), kind="stable")  # by kind, then start
    kind, start, end = kind[by_kind], start[by_kind], end[by_kind]
    cuts = np.flatnonzero(np.diff(kind)) + 1
    u_start, u_end, u_kind = [], [], []
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(kind)], strict=True):
        if a == b:
            continue
        reach = np.maximum.accumulate(end[a:b])  # the furthest end of the kind so far
        first = np.flatnonzero(np.concatenate([[True], start[a + 1 : b] > reach[:-1]]))
        last = np.concatenate([first[1:] - 1, [b - a - 1]])
        u_start.append(start[a:b][first])
        u_end.append(reach[last])
        u_kind.append(np.full(len(first), kind[a], np.int8))
    if not u_start:
        u_start, u_end, u_kind = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int8)]
    return _sweep(np.concatenate(u_start), np.concatenate(u_end), np.concatenate(u_kind), n_cat, sets, w_start, w_end)


def _sweep(
    start: np.ndarray,
    end: np.ndarray,
    kind: np.ndarray,
    n_cat: int,
    sets: bool,
    w_start: np.ndarray,
    w_end: np.ndarray,
) -> np.ndarray:
    """_owned's matrix for intervals that are disjoint within each kind (kind >= 0)."""
    n_ev, n_win = len(start), len(w_start)
    # One sort of every point; window ends come before window starts, so at an instant
    # where window j ends and j + 1 starts, j closes first.
    pts = np.concatenate([start, end, w_end, w_start])
    order = np.argsort(pts, kind="stable")
    seg_dur = np.diff(pts[order])  # segment i runs from sorted point i to i + 1
    what = np.searchsorted(np.array([n_ev, 2 * n_ev, 2 * n_ev + n_win]), order, side="right")
    # 0: an interval starts, 1: one ends, 2: a window ends, 3: a window starts
    delta = np.array([1, -1, 0, 0], np.int8)[what]
    # Counting +3 per window start and -1 per window end gives 2j + 3 (odd) inside window j
    # and an even count outside every window: one running sum gives both.
    c = np.cumsum(np.array([0, 0, -1, 3], np.int8)[what], dtype=np.int32)[:-1]
    weight = np.where((c & 1).astype(bool), seg_dur, 0).astype(np.float64)
    window = np.maximum((c - 3) >> 1, 0)
    kind_at = np.concatenate([kind, kind, np.full(2 * n_win, -1, np.int8)])[order]
    label = np.full(len(pts), 0 if sets else n_cat - 1, np.int8)
    step = np.empty(len(pts), np.int8)
    # Paint from the lowest priority up, so the highest active category wins (or, for
    # sets, add each active kind's bit).
    for k in np.flatnonzero(np.bincount(kind, minlength=1))[::-1].tolist():
        np.multiply(delta, kind_at == k, out=step)
        active = np.cumsum(step, dtype=np.int32) > 0
        if sets:
            label[active] |= np.int8(1 << k)
        else:
            np.putmask(label, active, k)
    # float64 sums of integer picoseconds are exact below 2**53 ps (about 2.5 hours per window).
    sums = np.bincount(window * n_cat + label[:-1], weights=weight, minlength=n_win * n_cat)
    return np.rint(sums).astype(np.int64).reshape(n_win, n_cat)

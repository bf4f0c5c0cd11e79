"""The wall-time split of each chip's timeline: which category owns each instant.

A sweep line in numpy (one sort of all start/end points per chip, then
vectorised counting per category): every instant of a step window goes to the
highest-priority category active then, or to `idle`, so a step's categories sum
exactly to its duration whatever overlaps. SQL selects the events
(sql/timeline_events.sql); only the sweep itself, which needs running counts
per category that DuckDB's window functions compute far more slowly, is here.
"""

from __future__ import annotations

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
    """Several splits of the same events from one sweep per chip (one sort of their points).

    `views` maps an int column of `events` (the event's kind in that view; negative:
    not part of it) to (categories, sets) as in split_timeline.
    """
    out = {v: {"chip": [], "step": [], "category": [], "dur_ps": []} for v in views}
    ev = {k: events.column(k).to_numpy() for k in ("chip", "start_ps", "end_ps", *views)}
    win = {k: windows.column(k).to_numpy() for k in ("chip", "step", "start_ps", "end_ps")}
    for chip in np.unique(win["chip"]):
        wmask = win["chip"] == chip
        order = np.argsort(win["start_ps"][wmask], kind="stable")
        w_start, w_end, w_step = (win[k][wmask][order] for k in ("start_ps", "end_ps", "step"))
        emask = ev["chip"] == chip
        labelings = [(ev[v][emask], len(cats), sets) for v, (cats, sets) in views.items()]
        owned_by_view = _sweep(ev["start_ps"][emask], ev["end_ps"][emask], labelings, w_start, w_end)
        for (v, (cats, _)), owned in zip(views.items(), owned_by_view, strict=True):
            steps_idx, cat_idx = np.nonzero(owned)
            o = out[v]
            o["chip"].append(np.full(len(steps_idx), chip, np.int32))
            o["step"].append(w_step[steps_idx].astype(np.int32))
            o["category"].append(np.asarray(cats, dtype=object)[cat_idx])
            o["dur_ps"].append(owned[steps_idx, cat_idx])
    return {v: _table(o) for v, o in out.items()}


def _table(out: dict[str, list[np.ndarray]]) -> pa.Table:
    cols = {k: np.concatenate(v) if v else np.zeros(0, object if k == "category" else np.int64)  # no windows
            for k, v in out.items()}  # fmt: skip
    return pa.table({
        "chip": pa.array(cols["chip"], pa.int32()), "step": pa.array(cols["step"], pa.int32()),
        "category": pa.array(cols["category"], pa.string()), "dur_ps": pa.array(cols["dur_ps"], pa.int64()),
    })  # fmt: skip


def _sweep(
    start: np.ndarray, end: np.ndarray, labelings: list[tuple[np.ndarray, int, bool]], w_start: np.ndarray,
    w_end: np.ndarray,
) -> list[np.ndarray]:
    """Per labeling (kind per event, number of categories, sets), a matrix [window, category] of owned ps.

    Priority mode: the first active kind owns each instant, category n_cat - 1 is
    'nothing'. Sets mode: the bitmask of active kinds is the category, 0 'nothing'.
    Events of a negative kind take no part in that labeling.
    """
    n_ev = len(start)
    pts = np.concatenate([start, end, w_start, w_end])
    order = np.argsort(pts)
    ts = pts[order]
    n = len(pts)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    seg_start, seg_dur = ts[:-1], np.diff(ts)
    # window of each segment: how many windows start at or before it, minus one (both sorted:
    # place the few window starts among the many segments, then count)
    first_seg = np.searchsorted(seg_start, w_start, side="left")
    widx = np.cumsum(np.bincount(first_seg, minlength=len(seg_start) + 1)[: len(seg_start)]) - 1
    keep = (seg_dur > 0) & (widx >= 0)
    keep[keep] &= seg_start[keep] < w_end[widx[keep]]
    out = []
    delta = np.empty(n, np.int32)
    for prio, n_cat, sets in labelings:
        label = np.full(n, 0 if sets else n_cat - 1, np.int8)
        # Paint from the lowest priority up, so the highest active category wins (or, for
        # sets, add each active kind's bit). Every point has its own rank, so the +1 at
        # each start and -1 at each end can be written, not accumulated.
        for k in sorted((k for k in np.unique(prio).tolist() if k >= 0), reverse=True):
            idx = np.flatnonzero(prio == k)
            delta.fill(0)
            delta[rank[idx]] = 1
            delta[rank[n_ev + idx]] = -1
            active = np.cumsum(delta, dtype=np.int32) > 0
            if sets:
                label[active] |= np.int8(1 << k)
            else:
                np.putmask(label, active, k)
        flat = widx[keep] * n_cat + label[:-1][keep]
        # float64 sums of integer picoseconds are exact below 2**53 ps (about 2.5 hours per window).
        sums = np.bincount(flat, weights=seg_dur[keep], minlength=len(w_start) * n_cat)
        out.append(np.rint(sums).astype(np.int64).reshape(len(w_start), n_cat))
    return out

"""The wall-time split of each chip's timeline: which category owns each instant.

A sweep line: every instant of a step window goes to the highest-priority
category active then, or to `idle`, so a step's categories sum exactly to its
duration whatever overlaps. The sweep itself is C (analyzers/_sweep.c): it
walks a chip's events in start order, merging the runs of events it is given
(the chip's tracks, each time-ordered already), and keeps one running "furthest
end" per category, so it costs O(events x categories) and sorts nothing.
Chips and views are split in parallel threads (the C code releases the GIL).
analyzers/op_arrays.py selects the events (breakdown.split_windows).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from analyzers import _sweep

# Priority order of the wall-time split (first wins), as in the PyTorch profiler's
# split: device compute, then collectives, then SparseCore work, then the host. The device_*
# categories are other devices' (a GPU, a CPU running XLA ops: profiler/xspace/map_kinds.py).
CATEGORIES = (
    "tc_forward",
    "tc_backward",
    "tc_collective",
    "tc_other",
    "sc_forward",
    "sc_backward",
    "sc_collective",
    "sc_other",
    "device_compute",
    "device_collective",
    "device_memcpy",
    "host_to_device",
    "host_preprocess",
    "host_launch",
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
    """Several splits of the same events table (any order).

    `views` maps an int column of `events` (the event's kind in that view; negative:
    not part of it) to (categories, sets) as in split_timeline.
    """
    chip = events.column("chip").to_numpy()
    order = np.lexsort((events.column("start_ps").to_numpy(), chip))  # by chip, then start
    start, end = (events.column(k).to_numpy()[order] for k in ("start_ps", "end_ps"))
    kinds = {v: events.column(v).to_numpy().astype(np.int8)[order] for v in views}
    by_chip = chip[order]
    chips = np.unique(by_chip)
    lo, hi = np.searchsorted(by_chip, chips, "left"), np.searchsorted(by_chip, chips, "right")
    runs = {int(c): np.array([[a, z]], np.int64) for c, a, z in zip(chips, lo, hi, strict=True)}
    return split_runs(start, end, kinds, runs, windows, views)


def split_runs(
    start: np.ndarray,
    end: np.ndarray,
    kinds: dict[str, np.ndarray],
    runs: dict[int, np.ndarray],
    windows: pa.Table,
    views: dict[str, tuple[tuple[str, ...], bool]],
) -> dict[str, pa.Table]:
    """The splits of events given as columns (int64 start, end; int8 kind per view).

    `runs[chip]`: (lo, hi) rows of the events that count on the chip, each range
    sorted by start (a track; the host's tracks appear under every chip).
    Chips without windows get no rows; windows of chips without runs are all idle.
    """
    win = {k: windows.column(k).to_numpy() for k in ("chip", "step", "start_ps", "end_ps")}
    start, end = np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64)
    kinds = {v: np.ascontiguousarray(k, np.int8) for v, k in kinds.items()}

    def one(chip: int, view: str) -> pa.Table:
        cats, sets = views[view]
        wmask = np.flatnonzero(win["chip"] == chip)
        wmask = wmask[np.argsort(win["start_ps"][wmask], kind="stable")]
        w_start, w_end = (np.ascontiguousarray(win[k][wmask], np.int64) for k in ("start_ps", "end_ps"))
        owned = np.zeros((len(wmask), len(cats)), np.int64)
        chip_runs = np.ascontiguousarray(runs.get(chip, np.zeros((0, 2), np.int64)), np.int64)
        _sweep.owned(start, end, kinds[view], chip_runs, w_start, w_end, len(cats), sets, owned)
        w_idx, cat_idx = np.nonzero(owned)
        return _table(
            np.full(len(w_idx), chip, np.int32),
            win["step"][wmask][w_idx],
            np.asarray(cats, dtype=object)[cat_idx],
            owned[w_idx, cat_idx],
        )

    tasks = [(chip, view) for chip in np.unique(win["chip"]).tolist() for view in views]
    with ThreadPoolExecutor(max_workers=max(1, min(len(tasks), os.cpu_count() or 1))) as pool:
        parts = dict(zip(tasks, pool.map(lambda task: one(*task), tasks), strict=True))
    empty = _table(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, object), np.zeros(0, np.int64))
    return {v: pa.concat_tables([empty, *(t for (_, view), t in parts.items() if view == v)]) for v in views}


def _table(chip: np.ndarray, step: np.ndarray, category: np.ndarray, dur_ps: np.ndarray) -> pa.Table:
    """The split's rows as an Arrow table (chip, step, category, dur_ps)."""
    return pa.table(
        {
            "chip": pa.array(chip, pa.int32()),
            "step": pa.array(step, pa.int32()),
            "category": pa.array(category, pa.string()),
            "dur_ps": pa.array(dur_ps, pa.int64()),
        }
    )

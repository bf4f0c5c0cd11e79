"""The trace viewer's derived rows: a `Steps` row for each device chip without step markers of its own, as XProf's
trace viewer derives one on a GPU's plane from its events' group_id (SQL and rule: ui.timeline's
derived_device_steps).

A Kineto trace's GPU streams, a raw JAX GPU capture's streams, or a device whose steps only the host marks show the
device's steps this way without a row of their own in the store: the rows are the viewer's, numbered after the run's
tracks, computed once per run and served from numpy (a row holds one span per step and run of events, few next to
the events), in the same tile modes as a stored track's step markers (ui/trace_api.py compute_tiles): every span
overlapping the tile while there are at most `exact_limit` of them, else the spans at least one bucket long and per
bucket the shorter ones' count, summed duration and longest step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from profiler import sqltree
from profiler.store import Store
from ui.store_access import run_memo

LINE = "Steps"  # the row's line name, XProf's


@dataclass(frozen=True)
class DerivedSteps:
    """A run's derived step rows: one track per chip (`tracks`: track_id, plane, kind, chip, spans) and every span
    (its track, step, start and duration), ordered by track and start."""

    tracks: tuple[tuple[int, str, str, int, int], ...]
    track: np.ndarray
    step: np.ndarray
    start_ps: np.ndarray
    dur_ps: np.ndarray

    @property
    def track_ids(self) -> frozenset[int]:
        return frozenset(t[0] for t in self.tracks)

    def overlapping(self, track_ids: list[int], t0: int, t1: int) -> np.ndarray:
        """Mask of the spans of `track_ids` overlapping [t0, t1) (the tiles' rule: starts before t1 and starts at
        or after t0 or ends after it)."""
        end = self.start_ps + self.dur_ps
        return (
            np.isin(self.track, np.asarray(track_ids, dtype=np.int64))
            & (self.start_ps < t1)
            & ((self.start_ps >= t0) | (end > t0))
        )


_NONE = np.zeros(0, dtype=np.int64)
NO_DERIVED_STEPS = DerivedSteps(tracks=(), track=_NONE, step=_NONE, start_ps=_NONE, dur_ps=_NONE)


def derived_steps(store: Store, run_id: int) -> DerivedSteps:
    """The run's derived step rows (computed once per run content)."""

    def compute() -> DerivedSteps:
        t = sqltree.query(store.con, "ui.timeline.derived_device_steps", run=run_id)
        cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in ("track_id", "step", "start_ps", "dur_ps")}
        ids, first, n = np.unique(cols["track_id"], return_index=True, return_counts=True)  # one row per track
        heads = t.take(pa.array(first)).select(["plane", "kind", "chip"]).to_pydict()
        tracks = zip(ids.tolist(), heads["plane"], heads["kind"], heads["chip"], n.tolist(), strict=True)
        return DerivedSteps(
            tracks=tuple(tracks),
            track=cols["track_id"].astype(np.int64),
            step=cols["step"].astype(np.int64),
            start_ps=cols["start_ps"].astype(np.int64),
            dur_ps=cols["dur_ps"].astype(np.int64),
        )

    return run_memo(store, run_id, "derived_steps", None, compute)


def _events(d: DerivedSteps, rows: np.ndarray, name_base: int) -> dict[str, list]:
    return {
        "id": [-1] * len(rows),
        "start": d.start_ps[rows].tolist(),
        "dur": d.dur_ps[rows].tolist(),
        "name": (name_base + d.step[rows]).tolist(),
        "step": d.step[rows].tolist(),
    }


def _buckets(d: DerivedSteps, rows: np.ndarray, k: int, t0: int, name_base: int) -> dict[str, list]:
    """Spans `rows` per bucket of 2^k ps they start in (clamped to t0): count, summed duration and the dominant
    name, the one with the largest summed duration (ties: the smaller name id), as ui.timeline's tile_buckets."""
    if not len(rows):
        return {"b": [], "name": [], "busy": [], "n": []}
    bucket = (np.maximum(d.start_ps[rows], t0) - t0) >> k
    keys, where, n = np.unique(bucket, return_inverse=True, return_counts=True)
    busy = np.bincount(where, weights=d.dur_ps[rows], minlength=len(keys)).astype(np.int64)
    pairs, pair_of = np.unique(np.stack([bucket, name_base + d.step[rows]]), axis=1, return_inverse=True)
    pair_busy = np.bincount(pair_of.ravel(), weights=d.dur_ps[rows], minlength=pairs.shape[1])
    order = np.lexsort((pairs[1], -pair_busy, pairs[0]))  # per bucket: the largest busy first, then the smaller id
    b = pairs[0][order]
    first = order[np.r_[True, b[1:] != b[:-1]]]
    return {"b": keys.tolist(), "name": pairs[1][first].tolist(), "busy": busy.tolist(), "n": n.tolist()}


def tiles(
    d: DerivedSteps, track_ids: list[int], k: int, t0: int, t1: int, name_base: int, exact_limit: int
) -> dict[int, dict[str, Any]]:
    """Each derived track's tile of level k over [t0, t1) (buckets of 2^k ps), with the name ids it uses under
    "_names", as ui/trace_api.py compute_tiles gives a stored track's."""
    bw = 1 << k
    inside = d.overlapping(track_ids, t0, t1)
    out: dict[int, dict[str, Any]] = {}
    for t in track_ids:
        rows = np.flatnonzero(inside & (d.track == t))
        if len(rows) <= exact_limit:
            out[t] = {"mode": "exact", "ev": _events(d, rows, name_base), "_names": name_base + d.step[rows]}
            continue
        whole = rows[d.dur_ps[rows] >= bw]
        short = rows[(d.dur_ps[rows] < bw) & (d.start_ps[rows] >= t0 - bw)]
        bk = _buckets(d, short, k, t0, name_base)
        out[t] = {
            "mode": "agg",
            "ev": _events(d, whole, name_base),
            "bk": bk,
            "_names": np.concatenate([name_base + d.step[whole], np.asarray(bk["name"], dtype=np.int64)]),
        }
    return out


def window_rows(d: DerivedSteps, track_ids: list[int], t0: int, t1: int, name_base: int) -> pa.Table:
    """The spans of `track_ids` overlapping [t0, t1) as ui.timeline's window_slices gives a track's step markers
    (id -1, name id name_base + step), in time order."""
    rows = np.flatnonzero(d.overlapping(track_ids, t0, t1))
    return pa.table(
        {
            "id": pa.array(np.full(len(rows), -1, dtype=np.int64)),
            "track_id": pa.array(d.track[rows].astype(np.int32)),
            "name": pa.array((name_base + d.step[rows]).astype(np.int32)),
            "start": pa.array(d.start_ps[rows]),
            "dur": pa.array(d.dur_ps[rows]),
            "step": pa.array(d.step[rows].astype(np.int32)),
        }
    )

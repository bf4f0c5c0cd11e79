"""The interval searches behind the idle-gap analysis, in numpy over OpArrays.

profiler/sql/analysis/idle.sql (idle_gaps) classifies the gaps; what it reads comes from here, because
each piece needs the ops of a track in time order, which DuckDB would sort again
for every window function and ASOF join:
- gaps: on every TensorCore / SparseCore op line, the time between an op and the
  one before it (in (start, end) order) of at least min_gap_ps, with the step of
  the op after the gap (else the one before) and the step of the next SparseCore
  forward op on the track starting at or after the gap's start;
- the blocker of each gap: the work with a duration on the gap's chip or the
  host that ended last inside the gap (gap_start, gap_end], among work of the
  gap's step or the step before (later steps' work, e.g. preprocessing ahead,
  blocks nothing); on equal ends the gap's own step wins, then the higher event id;
- for TensorCore gaps, the last end inside the gap of the chip's own work for
  steps other than the blocker's (how long the gap would have lasted anyway).
Both searches walk back from the gap's end through each track's work ordered by
(end, step, event id), skipping a whole run of one step at a time (EndIndex).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from analyzers.op_arrays import HOST, NO_STEP, SPARSECORE, TENSORCORE, OpArrays

T = TypeVar("T")


@dataclass(frozen=True)
class EndIndex:
    """Per track, the rows with a duration ordered by (end, step, event id); run_start: where each row's run of
    one step begins (a walk back jumps to run_start - 1)."""

    end: np.ndarray
    step: np.ndarray
    row: np.ndarray
    run_start: np.ndarray
    bounds: np.ndarray  # per track and one more: the track's first position


def find_gaps(a: OpArrays, min_gap_ps: int, sc_forward: np.ndarray) -> dict[str, np.ndarray]:
    """The gaps as columns: row (of the op after the gap), track (index), step, start, end and
    next_fwd_step (NO_STEP when no forward op follows, or it has none)."""
    cur, prev = [], []
    devices = np.flatnonzero(a.track_op_line & np.isin(a.track_kind, (TENSORCORE, SPARSECORE)))
    for t in devices.tolist():
        lo, hi = int(a.bounds[t]), int(a.bounds[t + 1])
        big = np.flatnonzero(a.start[lo + 1 : hi] - a.end[lo : hi - 1] >= min_gap_ps) + lo  # the op before a gap
        cur.append(big + 1)
        prev.append(big)
    cur = np.concatenate(cur) if cur else np.zeros(0, np.int64)
    prev = np.concatenate(prev) if prev else np.zeros(0, np.int64)
    track = a.track_of(cur)
    step = np.where(a.step[cur] != NO_STEP, a.step[cur], a.step[prev])
    g = {
        "row": cur,
        "track": track,
        "step": step,
        "start": a.end[prev],
        "end": a.start[cur],
        "next_fwd_step": np.full(len(cur), NO_STEP, np.int64),
    }
    fwd = np.flatnonzero(sc_forward)  # rows are grouped by track, and so are these and the gaps
    for t in np.unique(track).tolist():
        f = fwd[np.searchsorted(fwd, a.bounds[t]) : np.searchsorted(fwd, a.bounds[t + 1])]
        gi = np.flatnonzero(track == t)
        j = np.searchsorted(a.start[f], g["start"][gi], side="left")  # the track's forward ops, by start
        ok = j < len(f)
        g["next_fwd_step"][gi[ok]] = a.step[f[j[ok]]]
    return g


def end_index(a: OpArrays) -> EndIndex:
    """The EndIndex of every track (rows without a duration left out, as they end nothing)."""
    positive = a.end > a.start
    if positive.all():  # the usual case: no copies
        rows, bounds, end, step = np.arange(len(a.end)), a.bounds, a.end, a.step
    else:
        rows = np.flatnonzero(positive)
        bounds = np.searchsorted(rows, a.bounds)
        end, step = a.end[rows], a.step[rows]
    copied = end is not a.end
    for t in range(len(bounds) - 1):
        lo, hi = int(bounds[t]), int(bounds[t + 1])
        e, s = end[lo:hi], step[lo:hi]
        if hi - lo < 2 or np.all(e[1:] > e[:-1]):
            continue
        ev = a.event_ids(rows[lo:hi])  # on equal (end, step) the higher event id comes last: it wins the tie
        tie = (e[1:] == e[:-1]) & (s[1:] == s[:-1])
        if np.all((e[1:] > e[:-1]) | ((e[1:] == e[:-1]) & (s[1:] > s[:-1])) | (tie & (ev[1:] > ev[:-1]))):
            continue
        if not copied:  # a track with overlapping ops: sort it by (end, step, event id), in copies
            rows, end, step, copied = rows.copy(), end.copy(), step.copy(), True
        o = lo + np.lexsort((ev, step[lo:hi], end[lo:hi]))
        rows[lo:hi], end[lo:hi], step[lo:hi] = rows[o], end[o], step[o]
    new_run = np.ones(len(rows), bool)  # a run of one step starts at each step change and track start
    np.not_equal(step[1:], step[:-1], out=new_run[1:])
    new_run[bounds[:-1][bounds[:-1] < len(rows)]] = True
    starts = np.flatnonzero(new_run)
    run_start = np.repeat(starts, np.diff(np.append(starts, len(rows))))
    return EndIndex(end=end, step=step, row=rows, run_start=run_start, bounds=bounds)


def last_end(
    ix: EndIndex, track: int, upto: np.ndarray, after: np.ndarray, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Per probe i: the position in `ix` of the track's last work ending in (after[i], upto[i]] whose
    step passes keep(steps, probe indices); -1 if none."""
    lo, hi = int(ix.bounds[track]), int(ix.bounds[track + 1])
    pos = lo + np.searchsorted(ix.end[lo:hi], upto, side="right") - 1
    found = np.full(len(upto), -1, np.int64)
    active = np.arange(len(upto))
    while len(active):
        p = pos[active]
        inside = (p >= lo) & (ix.end[np.maximum(p, lo)] > after[active])
        ok = inside & keep(ix.step[np.maximum(p, lo)], active)
        found[active[ok]] = p[ok]
        more = inside & ~ok
        active = active[more]
        pos[active] = ix.run_start[p[more]] - 1  # skip the rest of this step's run
    return found


def find_blockers(a: OpArrays, ix: EndIndex, g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per gap: blocker_row (in `a`), blocker_event, blocker_end_ps, blocker_step (-1: none), and for
    TensorCore gaps with a blocker, unrelated_ps: the last end inside the gap of the chip's non-host work for other steps."""
    n = len(g["start"])
    chip = a.track_chip[g["track"]]
    own = g["step"]
    before = np.where(own == NO_STEP, NO_STEP, own - 1)
    best_rank = np.full(n, -1, np.int64)
    best_event = np.full(n, -1, np.int64)
    best_pos = np.full(n, -1, np.int64)

    def candidates(t: int) -> tuple[np.ndarray, np.ndarray]:
        """The gaps track t has a candidate blocker for, and its position in `ix`."""
        gi = np.arange(n) if a.track_chip[t] < 0 else np.flatnonzero(chip == a.track_chip[t])  # the host: every chip
        found = last_end(ix, t, g["end"][gi], g["start"][gi], lambda s, i: (s == own[gi[i]]) | (s == before[gi[i]]))
        hit = found >= 0
        return gi[hit], found[hit]

    # each track's search in parallel (numpy releases the GIL); the best of them is the
    # largest (rank, event), whatever order the tracks are taken in
    for gi, p in _each_track(candidates, [t for t in range(len(a.track_id)) if ix.bounds[t] < ix.bounds[t + 1]]):
        rank = ix.end[p] * 2 + (ix.step[p] == own[gi])  # the gap's own step wins a tie
        event = a.event_ids(ix.row[p])
        better = (rank > best_rank[gi]) | ((rank == best_rank[gi]) & (event > best_event[gi]))
        gi, p = gi[better], p[better]
        best_rank[gi], best_event[gi], best_pos[gi] = rank[better], event[better], p
    has = best_pos >= 0
    at = np.maximum(best_pos, 0)
    out = {
        "blocker_row": np.where(has, ix.row[at], -1) if len(ix.end) else best_pos,
        "blocker_event": best_event,
        "blocker_end_ps": np.where(has, ix.end[at], -1) if len(ix.end) else best_pos,
        "blocker_step": np.where(has, ix.step[at], NO_STEP) if len(ix.end) else best_pos,
        "unrelated_ps": np.full(n, -1, np.int64),
    }
    tc_gaps = has & (a.track_kind[g["track"]] == TENSORCORE)

    def unrelated(t: int) -> tuple[np.ndarray, np.ndarray]:
        """The TensorCore gaps track t has work for other steps in, and that work's last end."""
        gi = np.flatnonzero(tc_gaps & ((chip == a.track_chip[t]) | (a.track_chip[t] < 0)))
        found = last_end(ix, t, g["end"][gi], g["start"][gi], lambda s, i: s != out["blocker_step"][gi[i]])
        hit = found >= 0
        return gi[hit], ix.end[found[hit]]

    work = [t for t in np.flatnonzero(a.track_kind != HOST).tolist() if ix.bounds[t] < ix.bounds[t + 1]]
    for gi, last in _each_track(unrelated, work):
        out["unrelated_ps"][gi] = np.maximum(out["unrelated_ps"][gi], last)
    return out


def _each_track(fn: Callable[[int], T], tracks: list[int]) -> Iterator[T]:
    """fn(t) for each track, in order, computed on a thread per core (numpy releases the GIL
    in its loops); each result can be dropped once consumed."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(tracks), os.cpu_count() or 1))) as pool:
        yield from pool.map(fn, tracks)


def first_by_group(
    keys: list[np.ndarray], values: np.ndarray, last: bool = False
) -> tuple[list[np.ndarray], np.ndarray]:
    """The smallest (or, with `last`, largest) value per distinct combination of keys."""
    if len(values) == 0:
        return [k[:0] for k in keys], values[:0]
    order = np.lexsort((values, *reversed(keys)))
    ks = [k[order] for k in keys]
    new = np.zeros(len(order), bool)
    new[0] = True
    for k in ks:
        new[1:] |= k[1:] != k[:-1]
    pick = np.flatnonzero(new)
    if last:
        pick = np.concatenate([pick[1:] - 1, [len(order) - 1]])
    return [k[pick] for k in ks], values[order][pick]

"""Lanes: overlapping slices of one line spread over sibling tracks on which each nests strictly.

A Perfetto slice track only holds slices that nest strictly; the UI draws sibling tracks of one
name as one track, so nothing is dropped. Vectorised where a slice starts after its line went idle.
"""

from __future__ import annotations

import numpy as np


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

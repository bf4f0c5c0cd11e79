"""Summary figures of a Simulation: step time and where chip time goes."""

from __future__ import annotations

import numpy as np

from sim_backend.emulator import Simulation
from sim_backend.stepgraph import (
    A2A_BWD,
    A2A_FWD,
    HOST,
    INFEED,
    INIT,
    SC_BWD,
    SC_FWD,
    TC_BWD,
    TC_COLLECTIVES,
    TC_FWD,
)


def tc_step_starts(sim: Simulation, chip: int = 0) -> np.ndarray:
    """Start of each step's dense forward on one chip (the TC step markers' starts)."""
    cols = sim.graph.columns()
    m = (cols["kind"] == TC_FWD) & (cols["chip"] == chip)
    starts = np.zeros(sim.cfg.steps, dtype=np.int64)
    starts[cols["step"][m]] = sim.schedule.start_ps[m]
    return starts


def step_time_ps(sim: Simulation, chip: int = 0) -> float:
    """Steady-state device step time: mean interval between dense forwards, step 0 excluded."""
    s = tc_step_starts(sim, chip)
    return steady_step_time_ps(s[:2].tolist(), int(s[-1]), len(s), int(sim.schedule.end_ps.max()))


def steady_step_time_ps(first_two: list[int], last: int, steps: int, end_ps: int) -> float:
    """step_time_ps from the dense forward starts of steps 0, 1 and steps - 1 (and, for a
    one-step run, the end of the last task)."""
    if steps >= 3:
        return float(last - first_two[1]) / (steps - 2)
    if steps == 2:
        return float(first_two[1] - first_two[0])
    return float(end_ps)


def union_length(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> int:
    """Length of the union of [start, end) intervals, clipped to [lo, hi)."""
    start, end = np.clip(start, lo, hi), np.clip(end, lo, hi)
    if not len(start):
        return 0
    o = np.argsort(start, kind="stable")
    st, en = start[o], np.maximum.accumulate(end[o])
    gaps = np.maximum(st[1:] - en[:-1], 0).sum()
    return int(en[-1] - st[0] - gaps)


class RunningUnion:
    """Length of the union of [start, end) intervals given in parts, in order of start."""

    def __init__(self) -> None:
        self.closed = 0  # length of the runs no later interval can reach
        self._run: tuple[int, int] | None = None  # (start, end) of the last run

    def add(self, start: np.ndarray, end: np.ndarray) -> None:
        """Intervals sorted by start, none starting before the previous part's."""
        if not len(start):
            return
        if self._run is not None:
            start, end = np.append(self._run[0], start), np.append(self._run[1], end)
        en = np.maximum.accumulate(end)
        cut = np.flatnonzero(start[1:] > en[:-1]) + 1  # first interval of each later run
        first, last = np.append(0, cut), np.append(cut - 1, len(start) - 1)
        self.closed += int((en[last[:-1]] - start[first[:-1]]).sum())
        self._run = (int(start[first[-1]]), int(en[-1]))

    @property
    def length(self) -> int:
        return self.closed + (self._run[1] - self._run[0] if self._run else 0)


class TimeShares:
    """time_shares() of a run whose tasks come in parts, in order of start (recording/stream.py).

    `lo` (the end of table initialisation) must be set before the shares are read; parts
    given before it is known are held until then.
    """

    CLASSES = ("tc", "sc", "host")

    def __init__(self, chip: int = 0):
        self.chip = chip
        self.lo: int | None = None
        self.hi = 0
        self._unions = [RunningUnion() for _ in self.CLASSES]  # tc; tc or sc; tc, sc or host
        self._held: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, kind: np.ndarray, chip: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Tasks (kind, chip, start, end) sorted by start, none before the previous part's."""
        if len(end):
            self.hi = max(self.hi, int(end.max()))
        if self.lo is None:
            self._held.append((kind, chip, start, end))
            return
        mine = chip == self.chip
        cum = np.zeros(len(kind), bool)
        for union, kinds in zip(self._unions, _CLASS_KINDS, strict=True):
            cum |= np.isin(kind, kinds) & mine
            union.add(np.maximum(start[cum], self.lo), np.maximum(end[cum], self.lo))

    def set_lo(self, lo: int) -> None:
        self.lo = lo
        held, self._held = self._held, []
        for part in held:
            self.add(*part)

    def shares(self) -> dict[str, float]:
        lo, hi = self.lo or 0, self.hi
        if hi <= lo:
            return {"host": 0.0, "sc": 0.0, "tc": 0.0, "idle": 1.0}
        covered = 0
        shares = {}
        for name, union in zip(self.CLASSES, self._unions, strict=True):
            shares[name] = (union.length - covered) / (hi - lo)
            covered = union.length
        shares["idle"] = 1.0 - covered / (hi - lo)
        return shares


_CLASS_KINDS = ((TC_FWD, TC_BWD, *TC_COLLECTIVES), (SC_FWD, SC_BWD, A2A_FWD, A2A_BWD), (HOST, INFEED))


def time_shares(sim: Simulation, chip: int = 0) -> dict[str, float]:
    """Share of the run's span on one chip (after table initialisation, if recorded):
    TensorCore busy, else SparseCore busy, else waiting on host input (preprocessing or
    transfer running), else idle."""
    cols = sim.graph.columns()
    s = sim.schedule
    o = np.argsort(s.start_ps, kind="stable")
    acc = TimeShares(chip)
    acc.set_lo(int(s.end_ps[cols["kind"] == INIT].max(initial=0)))
    acc.add(cols["kind"][o], cols["chip"][o], s.start_ps[o], s.end_ps[o])
    return acc.shares()

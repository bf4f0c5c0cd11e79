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
    if len(s) >= 3:
        return float(s[-1] - s[1]) / (len(s) - 2)
    if len(s) == 2:
        return float(s[1] - s[0])
    return float(sim.schedule.end_ps.max())


def union_length(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> int:
    """Length of the union of [start, end) intervals, clipped to [lo, hi)."""
    start, end = np.clip(start, lo, hi), np.clip(end, lo, hi)
    if not len(start):
        return 0
    o = np.argsort(start, kind="stable")
    st, en = start[o], np.maximum.accumulate(end[o])
    gaps = np.maximum(st[1:] - en[:-1], 0).sum()
    return int(en[-1] - st[0] - gaps)


def time_shares(sim: Simulation, chip: int = 0) -> dict[str, float]:
    """Share of the run's span on one chip (after table initialisation, if recorded):
    TensorCore busy, else SparseCore busy, else waiting on host input (preprocessing or
    transfer running), else idle."""
    cols = sim.graph.columns()
    s = sim.schedule
    kind, c = cols["kind"], cols["chip"]
    init = kind == INIT
    lo, hi = int(s.end_ps[init].max(initial=0)), int(s.end_ps.max())
    if hi <= lo:
        return {"host": 0.0, "sc": 0.0, "tc": 0.0, "idle": 1.0}
    classes = {
        "tc": np.isin(kind, (TC_FWD, TC_BWD, *TC_COLLECTIVES)) & (c == chip),
        "sc": np.isin(kind, (SC_FWD, SC_BWD, A2A_FWD, A2A_BWD)) & (c == chip),
        "host": np.isin(kind, (HOST, INFEED)) & (c == chip),
    }
    covered = 0
    shares = {}
    cum_mask = np.zeros(len(kind), dtype=bool)
    for name, mask in classes.items():
        cum_mask = cum_mask | mask
        u = union_length(s.start_ps[cum_mask], s.end_ps[cum_mask], lo, hi)
        shares[name] = (u - covered) / (hi - lo)
        covered = u
    shares["idle"] = 1.0 - covered / (hi - lo)
    return shares

"""Step-time breakdown: where each step's time goes, per chip.

Two views: the wall-time split (each instant of a step to the highest-priority
category active, so categories sum to the step time; analyzers/timeline.py) and
per-core busy time (the union of each core's events per step and category, so
overlapping events on one core count once).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis
from analyzers.timeline import split_timeline

NAME = "breakdown"
QUESTION = "Where does each step's time go: host, SparseCore, TensorCore, collectives or idle?"



def step_breakdown(ctx: RunContext) -> pa.Table:
    """chip, step, category, dur_ps: the wall-time split of every step window (cached)."""

    def compute() -> pa.Table:
        windows = ctx.store.query(f"SELECT chip, step, start_ps, end_ps FROM {ctx.temp('step_windows')}")
        return split_timeline(ctx.query("timeline_events"), windows)

    return ctx.memo("step_breakdown", compute)


def _why_no_steps(ctx: RunContext) -> str:
    """Why step_windows is empty: no steps at all, or steps only on a host-only capture."""
    r = ctx.store.rows(
        """SELECT (SELECT count(DISTINCT step) FROM steps WHERE run_id = $run) AS steps,
                  (SELECT count(*) FROM tracks WHERE run_id = $run AND kind IN ('tensorcore', 'sparsecore')) AS device""",
        {"run": ctx.run_id},
    )[0]
    if not r["device"]:
        return (f"no TensorCore or SparseCore tracks (a host-only capture, e.g. JAX on the CPU; {r['steps']} steps "
                "marked on the host): step time and its split are measured on device chips")  # fmt: skip
    return "the run has no steps (no step markers and no events tagged with a step)"


def analyze(ctx: RunContext) -> Analysis:
    split = step_breakdown(ctx)
    result = Analysis(NAME, tables={"step_breakdown": split})
    steps = ctx.step_times()
    result.tables["step_times"] = steps
    if steps.num_rows == 0:
        result.notes.append(_why_no_steps(ctx))
        return result
    step_ps = steps.column("step_ps").to_numpy()
    total = max(int(pc.sum(split.column("dur_ps")).as_py() or 0), 1)
    share = {
        c: int(pc.sum(pc.filter(split.column("dur_ps"), pc.equal(split.column("category"), c))).as_py() or 0) / total
        for c in sorted(set(split.column("category").to_pylist()))
    }
    result.figures = {
        "steps": len(step_ps),
        "step_ps_mean": float(np.mean(step_ps)),
        "step_ps_p50": float(np.percentile(step_ps, 50)),
        "step_ps_p90": float(np.percentile(step_ps, 90)),
        "share": share,
    }
    return result

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
from analyzers.findings import Analysis, Finding
from analyzers.timeline import split_timeline

NAME = "breakdown"
QUESTION = "Where does each step's time go: host, SparseCore, TensorCore, collectives or idle?"

HOST_BOUND_SHARE = 0.10  # host-only time above this share of the step: host-bound input
IDLE_SHARE = 0.20  # device idle above this share of the step


def step_breakdown(ctx: RunContext) -> pa.Table:
    """chip, step, category, dur_ps: the wall-time split of every step window (cached)."""

    def compute() -> pa.Table:
        windows = ctx.store.query(f"SELECT chip, step, start_ps, end_ps FROM {ctx.temp('step_windows')}")
        return split_timeline(ctx.query("timeline_events"), windows)

    return ctx.memo("step_breakdown", compute)


def analyze(ctx: RunContext) -> Analysis:
    split = step_breakdown(ctx)
    result = Analysis(NAME, tables={"step_breakdown": split})
    steps = ctx.query("step_times")
    result.tables["step_times"] = steps
    if steps.num_rows == 0:
        result.notes.append("the run has no steps (no step markers and no events tagged with a step)")
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
    host_share = share.get("host_preprocess", 0) + share.get("host_to_device", 0) + share.get("host_other", 0)
    if host_share > HOST_BOUND_SHARE:
        result.findings.append(
            Finding(
                rule="host_bound",
                severity="critical" if host_share > 0.3 else "warning",
                title=f"Host-bound input: the device waits on the host for {host_share:.0%} of step time",
                metric="host_only_share", value=host_share, unit="share of step time",
                recommendation=(
                    "Raise maximum_parallel_iterations so more steps are preprocessed ahead, "
                    "or speed up host preprocessing (more input threads, fewer IDs per sample)."
                ),
                evidence={k: share.get(k, 0.0) for k in ("host_preprocess", "host_to_device", "idle")},
                evidence_sql=_split_sql(ctx),
            )
        )
    idle = share.get("idle", 0.0)
    if idle > IDLE_SHARE:
        result.findings.append(
            Finding(
                rule="device_idle",
                severity="warning",
                title=f"Devices idle for {idle:.0%} of step time",
                metric="idle_share", value=idle, unit="share of step time",
                recommendation="See the idle-gap analysis for what the devices wait on.",
                evidence={"idle_share": idle},
                evidence_sql=_split_sql(ctx),
            )
        )
    return result


def _split_sql(ctx: RunContext) -> str:
    return f"-- step time per chip and step\nSELECT * FROM step_markers WHERE run_id = {ctx.run_id} ORDER BY chip, step"

"""Idle share and what bounds a run's devices, with or without steps (an inference capture, a
capture cut mid-step): the store's device_idle rows per device core (analyzers/core_busy.py
computes them from the shared op scan, equal to the view's).

Idle share, two ways (profiler/sql/stdlib/ops.sql: device_idle): over each core's active interval
(first op to last: XProf's device idle, summed over the cores of the run's main device kind)
and over the capture's span. A run without steps gets the idle finding here (a run with steps
gets its idle split per step from breakdown and idle_gaps). "Bound by" follows XProf's
overview: the roofline (FLOPs over bytes accessed of the device ops, against the device's
ridge point, peak FLOP/s over HBM bytes/s) where the capture records FLOPs and bytes and the
device's peaks; collective where collectives take most of the busy time; host where the
devices idle more than they work.
"""

from __future__ import annotations

import pyarrow as pa

from analyzers.context import RunContext
from analyzers.core_busy import device_idle_rows
from analyzers.findings import Analysis, Finding
from profiler import sqltree
from profiler.units import format_value

NAME = "utilization"
QUESTION = "How much of the capture does each device sit idle, and what bounds it (compute, memory bandwidth, collectives, host)?"

IDLE_SHARE = 0.10  # idle over the capture's span above this share, in a run without steps, is a finding
CRITICAL_IDLE_SHARE = 0.40
HOST_IDLE_SHARE = 0.5  # devices idle more than they work (over their active interval): bound by the host
COLLECTIVE_SHARE = 0.5  # collectives take more than this share of the busy time: bound by collectives
KIND_ORDER = ("tensorcore", "gpu", "device", "cpu", "sparsecore")  # the main device kind: the first present
COLLECTIVES = (
    "tc_collective",
    "device_collective",
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)


def devices(ctx: RunContext) -> list[dict]:
    """The device_idle rows of the run (every device core, empty ones too), by kind, chip, core."""
    return ctx.memo("device_idle", lambda: device_idle_rows(ctx))


def main_kind(rows: list[dict]) -> str | None:
    """The run's main device kind: the first of KIND_ORDER with a core that ran ops."""
    kinds = {r["track_kind"] for r in rows if r["busy_ps"]}
    return next((k for k in KIND_ORDER if k in kinds), None)


def idle_shares(rows: list[dict], kind: str) -> dict[str, float | int]:
    """Idle over the active intervals (XProf's: busy and active summed over the kind's cores with
    ops) and over the capture's span (summed over every core of the kind, empty ones too)."""
    own = [r for r in rows if r["track_kind"] == kind]
    ran = [r for r in own if r["busy_ps"]]
    busy = sum(r["busy_ps"] for r in ran)
    active = sum(r["active_ps"] for r in ran)
    span = sum(r["span_ps"] or 0 for r in own)
    return {
        "devices": len(own),
        "devices_with_ops": len(ran),
        "busy_ps": busy,
        "idle_share": 1 - busy / active if active else 0.0,
        "idle_share_of_span": 1 - busy / span if span else 0.0,
        "idle_share_of_span_with_ops": 1 - busy / sum(r["span_ps"] for r in ran) if ran else 0.0,
    }


def bound_by(ctx: RunContext, kind: str, shares: dict) -> dict:
    """What bounds the main device kind: host, collective, HBM, compute or unknown (with the figures)."""
    r = ctx.sql("analysis.ops.device_work", collectives=list(COLLECTIVES), kind=kind).to_pylist()[0]
    peak, hbm_bw = ctx.hardware("tc_peak_flops"), ctx.hardware("hbm_bandwidth_bytes_per_s")
    flops, nbytes = r["flops"] or 0.0, r["bytes"] or 0.0
    out = {
        "flops": flops,
        "bytes_accessed": nbytes,
        "operational_intensity_flop_per_byte": flops / nbytes if nbytes else None,
        "ridge_flop_per_byte": peak / hbm_bw if peak and hbm_bw else None,
        "collective_share": (r["coll_ps"] or 0.0) / r["op_ps"] if r["op_ps"] else 0.0,
    }
    if shares["idle_share"] > HOST_IDLE_SHARE:
        out["bound_by"] = "host"
    elif out["collective_share"] > COLLECTIVE_SHARE:
        out["bound_by"] = "collective"
    elif out["operational_intensity_flop_per_byte"] is not None and out["ridge_flop_per_byte"]:
        out["bound_by"] = (
            "HBM" if out["operational_intensity_flop_per_byte"] < out["ridge_flop_per_byte"] else "compute"
        )
    else:
        out["bound_by"] = "unknown"
    return out


def analyze(ctx: RunContext) -> Analysis:
    rows = devices(ctx)
    result = Analysis(NAME)
    kind = main_kind(rows)
    if kind is None:
        result.notes.append(
            "no device ran ops (TensorCore, SparseCore, GPU, a CPU running XLA ops): idle share and "
            "bound-by are measured on devices"
        )
        return result
    shares = idle_shares(rows, kind)
    result.figures = {
        "device_kind": kind,
        **shares,
        **bound_by(ctx, kind, shares),
        "per_kind": {k: idle_shares(rows, k) for k in sorted({r["track_kind"] for r in rows})},
    }
    result.tables["device_idle"] = pa.Table.from_pylist(rows)
    if len(ctx.step_times()) == 0 and shares["idle_share_of_span_with_ops"] > IDLE_SHARE:
        result.findings.append(_idle(ctx, kind, shares, [r for r in rows if r["track_kind"] == kind and r["busy_ps"]]))
    return result


def _idle(ctx: RunContext, kind: str, shares: dict, ran: list[dict]) -> Finding:
    """Devices idle for much of a capture without steps: a wait for work (requests, host input)."""
    share = shares["idle_share_of_span_with_ops"]
    worst = max(ran, key=lambda r: r["idle_share_span"])
    return Finding(
        rule="device_idle",
        severity="critical" if share > CRITICAL_IDLE_SHARE else "warning",
        title=f"The {kind} cores sit idle {format_value(share, 'share')} of the capture ({shares['devices_with_ops']} with ops)",
        metric="idle_share_of_span",
        value=share,
        unit=f"share of the capture's span, summed over the {kind} cores that ran ops",
        recommendation=(
            "The devices wait between their ops for most of this idle time: batch more work per call (larger "
            "batches or requests, several steps per call), keep the next input ready before the device finishes "
            "(prefetch, asynchronous dispatch), and look at the host threads in the gaps for what they wait on."
        ),
        evidence={
            "active_span_idle_share": shares["idle_share"],
            "worst_core": worst["plane"],
            "worst_core_idle_share": worst["idle_share_span"],
            "devices": shares["devices"],
        },
        entities={"chips": sorted({r["chip"] for r in ran})},
        evidence_sql=sqltree.show("analysis.ops.device_idle_evidence", run=ctx.run_id),
    )

"""Async work as async: how much of each async op's window (a copy, a collective, from its start
to its done) the core's compute hides, and how much is exposed (the store's async_spans view).

A window is hidden when compute covers at least 90% of it, exposed at 10% or less, partial
between (XProf's analyze_async_overlap thresholds). Windows are spans of their own kind: not
op time, not device busy time (op_tracks in profiler/sql/stdlib/ops.sql leaves the `Async XLA Ops` line out).
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding
from profiler import sqltree
from profiler.units import format_value

NAME = "async_overlap"
QUESTION = "Do async copies and collectives overlap compute, or does the device wait for them?"

EXPOSED_SHARE = 0.5  # exposed time above this share of the async windows' time is a finding
TOP = 20


def analyze(ctx: RunContext) -> Analysis:
    result = Analysis(NAME)
    total = {"count": 0}
    if _has_async_ops(ctx):  # else async_spans is empty: its compute islands are not worth building
        (total,) = ctx.sql("analysis.async.async_total").to_pylist()
    if not total["count"]:
        result.notes.append("no async ops (an `Async XLA Ops` line, or <op>-start / <op>-done pairs)")
        return result
    by_plane = ctx.sql("analysis.async.async_by_plane")
    by_op = ctx.sql("analysis.async.async_by_op").to_pylist()
    result.tables = {
        "async_by_plane": by_plane,
        "top_exposed": ctx.sql("analysis.async.top_exposed", top=TOP),
    }
    share = total["exposed_ps"] / total["span_ps"] if total["span_ps"] else 0.0
    result.figures = {**total, "exposed_share": share, "by_op": {r.pop("op"): r for r in by_op}}
    if share > EXPOSED_SHARE:
        result.findings.append(
            Finding(
                rule="exposed_async",
                severity="warning",
                title=f"Async ops are exposed: no compute overlaps {format_value(share, 'share')} of their {total['count']} windows' time",
                metric="exposed_share",
                value=share,
                unit="share of the async windows' time",
                recommendation=(
                    "The core has nothing to compute while these copies or collectives run: start them earlier (XLA's "
                    "latency-hiding scheduler, more independent work between start and done), overlap them with the "
                    "next step's compute, or move less data (smaller copies, fewer host offloads)."
                ),
                evidence={k: total[k] for k in ("count", "span_ps", "exposed_ps", "hidden", "partial", "exposed")},
                evidence_sql=sqltree.show("analysis.async.exposed_evidence", run=ctx.run_id),
            )
        )
    return result


def _has_async_ops(ctx: RunContext) -> bool:
    """Whether the run has an `Async XLA Ops` line or an op named like an async start or done."""
    return bool(ctx.sql("analysis.async.has_async_ops").column("has")[0].as_py())

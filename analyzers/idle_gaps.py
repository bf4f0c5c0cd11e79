"""Idle gaps on every device track, each attributed to what the core waited for.

A gap is the time between consecutive ops on a TensorCore or SparseCore op line,
longer than 1% of the median step time. Its cause is read off the event that
ended last before the gap closed, following one hop back to the host when that
event was SparseCore work that itself waited for input (sql/idle_gaps.sql): host
input, the other kind of core, a collective, or unknown. Findings judge the
TensorCore's gaps: it runs the step's critical path, while a SparseCore idling
ahead of its next input costs nothing unless the TensorCore then waits.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding

NAME = "idle_gaps"
QUESTION = "When a TensorCore or SparseCore sits idle inside a step, what is it waiting for?"

MIN_GAP_SHARE = 0.01  # of the median step time
INPUT_TOLERANCE_SHARE = 0.01  # a SparseCore forward starting this soon after its input landed waited for it
MIN_GAP_PS = 1  # runs without steps: every gap
HOST_SHARE = 0.05  # host-caused TensorCore idle above this share of its time is a finding


def gaps(ctx: RunContext) -> pa.Table:
    """All gaps with their cause (cached per context)."""

    def compute() -> pa.Table:
        median = ctx.step_median_ps() or 0
        min_gap = max(MIN_GAP_PS, int(median * MIN_GAP_SHARE))
        return ctx.query("idle_gaps", min_gap_ps=min_gap, tol_ps=int(median * INPUT_TOLERANCE_SHARE))

    return ctx.memo("idle_gaps", compute)


def track_time_ps(ctx: RunContext, track_kind: str) -> int:
    """Time the op tracks of one kind were observed: step windows x op tracks of each chip."""
    rows = ctx.store.rows(
        f"""SELECT sum(w.end_ps - w.start_ps)::BIGINT AS t FROM {ctx.temp("step_windows")} w
            JOIN (SELECT DISTINCT chip, track_id FROM {ctx.temp("op_base")}
                  WHERE line IN ('XLA Ops', 'Sparse Core Ops') AND track_kind = ?) d USING (chip)""",
        [track_kind],
    )
    return int(rows[0]["t"] or 0)


def causes(ctx: RunContext, track_kind: str) -> dict[str, dict]:
    """Gap count, time and share of the kind's observed time, per cause, for one kind of core."""
    total = track_time_ps(ctx, track_kind)
    rows = ctx.store.rows(
        """SELECT cause, count(*) AS gaps, sum(cause_ps)::BIGINT AS gap_ps FROM t WHERE track_kind = ?
           GROUP BY cause ORDER BY gap_ps DESC""",
        [track_kind],
        t=gaps(ctx),
    )
    return {r["cause"]: {"gaps": r["gaps"], "gap_ps": r["gap_ps"], "share": r["gap_ps"] / total if total else 0.0}
            for r in rows}  # fmt: skip


def analyze(ctx: RunContext) -> Analysis:
    table = gaps(ctx)
    result = Analysis(NAME, tables={"idle_gaps": table})
    if not ctx.store.rows("SELECT count(*) AS n FROM tracks WHERE run_id = ? AND kind IN ('tensorcore', 'sparsecore')",
                          [ctx.run_id])[0]["n"]:  # fmt: skip
        result.notes.append("no TensorCore or SparseCore tracks: idle gaps are measured on device cores")
    result.figures = {"gaps": table.num_rows, "tensorcore": causes(ctx, "tensorcore"),
                      "sparsecore": causes(ctx, "sparsecore")}  # fmt: skip
    result.tables["idle_by_step"] = ctx.store.query(
        "SELECT step, chip, track_kind, cause, count(*) AS gaps, sum(gap_ps)::BIGINT AS gap_ps FROM t GROUP BY ALL ORDER BY ALL",
        t=table,
    )
    host = result.figures["tensorcore"].get("host")
    if host and host["share"] > HOST_SHARE:
        host_gaps = table.filter(pc.and_(pc.equal(table.column("cause"), "host"),
                                         pc.equal(table.column("track_kind"), "tensorcore")))  # fmt: skip
        steps = sorted(set(host_gaps.column("step").to_pylist()) - {None})
        chips = sorted(set(host_gaps.column("chip").to_pylist()))
        result.findings.append(
            Finding(
                rule="host_bound",
                severity="critical" if host["share"] > 0.2 else "warning",
                title=f"Host-bound input: the TensorCores wait for host input {host['share']:.0%} of the time",
                metric="host_wait_share", value=host["share"], unit="share of TensorCore time",
                recommendation=(
                    "Prefetch more steps (raise maximum_parallel_iterations) so preprocessing runs ahead of "
                    "the device, and/or make host preprocessing cheaper (more input threads, fewer IDs per sample)."
                ),
                evidence={"gaps": host["gaps"], "idle_ps": host["gap_ps"],
                          "sparsecore_input_wait_share": result.figures["sparsecore"].get("host", {}).get("share", 0.0)},
                entities={"chips": chips, "steps": steps},
                evidence_sql=(
                    "-- device gaps closed by host work (what the device waited for)\n"
                    f"SELECT * FROM slices WHERE run_id = {ctx.run_id} AND track_kind = 'host' ORDER BY start_ps"
                ),
            )  # fmt: skip
        )
    return result

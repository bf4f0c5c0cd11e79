"""Idle gaps on every device track, each attributed to what the core waited for.

A gap is the time between consecutive ops on a TensorCore or SparseCore op line,
longer than 1% of the median step time. Its cause is read off the event that
ended last before the gap closed (sql/idle_gaps.sql): host input, the other
kind of core, a collective, or unknown.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding

NAME = "idle_gaps"
QUESTION = "When a TensorCore or SparseCore sits idle inside a step, what is it waiting for?"

MIN_GAP_SHARE = 0.01  # of the median step time
MIN_GAP_PS = 100_000  # 100 ns floor
HOST_SHARE = 0.05  # host-caused idle above this share of device time is a finding


def gaps(ctx: RunContext) -> pa.Table:
    """All gaps with their cause (cached per context)."""

    def compute() -> pa.Table:
        median = ctx.step_median_ps()
        min_gap = max(MIN_GAP_PS, int(median * MIN_GAP_SHARE)) if median else MIN_GAP_PS
        return ctx.query("idle_gaps", min_gap_ps=min_gap)

    return ctx.memo("idle_gaps", compute)


def device_time_ps(ctx: RunContext) -> int:
    """Time the device op tracks were observed: step windows x op tracks of each chip."""
    rows = ctx.store.rows(
        f"""SELECT sum(w.end_ps - w.start_ps) AS t FROM {ctx.temp("step_windows")} w
            JOIN (SELECT DISTINCT chip, track_id FROM {ctx.temp("op_events")}
                  WHERE line IN ('XLA Ops', 'Sparse Core Ops')) d USING (chip)"""
    )
    return int(rows[0]["t"] or 0)


def analyze(ctx: RunContext) -> Analysis:
    table = gaps(ctx)
    result = Analysis(NAME, tables={"idle_gaps": table})
    by_cause = ctx.store.rows(
        "SELECT cause, count(*) AS gaps, sum(gap_ps)::BIGINT AS gap_ps FROM t GROUP BY cause ORDER BY gap_ps DESC",
        [],
        t=table,
    )
    total = device_time_ps(ctx)
    result.figures = {
        "gaps": table.num_rows,
        "device_time_ps": total,
        "by_cause": {r["cause"]: {"gaps": r["gaps"], "gap_ps": r["gap_ps"], "share": r["gap_ps"] / total if total else 0}
                     for r in by_cause},
    }  # fmt: skip
    result.tables["idle_by_step"] = ctx.store.query(
        "SELECT step, chip, track_kind, cause, count(*) AS gaps, sum(gap_ps)::BIGINT AS gap_ps FROM t GROUP BY ALL ORDER BY ALL",
        t=table,
    )
    host = result.figures["by_cause"].get("host")
    if host and host["share"] > HOST_SHARE:
        host_gaps = table.filter(pc.equal(table.column("cause"), "host"))
        steps = sorted(set(host_gaps.column("step").to_pylist()) - {None})
        chips = sorted(set(host_gaps.column("chip").to_pylist()))
        result.findings.append(
            Finding(
                rule="host_bound",
                severity="critical" if host["share"] > 0.2 else "warning",
                title=f"Host-bound input: devices wait for host input {host['share']:.0%} of the time",
                metric="host_wait_share", value=host["share"], unit="share of device time",
                recommendation=(
                    "Prefetch more steps (raise maximum_parallel_iterations) so preprocessing runs ahead of "
                    "the device, and/or make host preprocessing cheaper (more input threads, fewer IDs per sample)."
                ),
                evidence={"gaps": host["gaps"], "idle_ps": host["gap_ps"], "device_time_ps": total},
                entities={"chips": chips, "steps": steps},
                evidence_sql=(
                    "-- device gaps closed by host work (what the device waited for)\n"
                    f"SELECT * FROM slices WHERE run_id = {ctx.run_id} AND track_kind = 'host' ORDER BY start_ps"
                ),
            )  # fmt: skip
        )
    return result

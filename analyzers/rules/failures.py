"""Failures recorded with a run: compile errors (SPMEM, gather operand) and HBM out of memory.

A failed run still has a profile up to the failure (static memory, or the timeline
until HBM ran out); this analyzer turns the recorded failure into a finding, so
`scprof analyze` says why the run stopped rather than "no problems found".
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding
from profiler import sqltree

NAME = "failures"
QUESTION = "Did the run fail to compile or run out of memory, and why?"

ADVICE = {
    "spmem_overflow": "Lower max_ids_per_partition / max_unique_ids_per_partition (they size SPMEM statically), "
    "or split the stacked table so each group's buffers fit the tile scratchpad.",
    "gather_operand_too_large": "Use a smaller per-chip batch or more chips, so (samples x feature width) / tiles fits.",
    "hbm_oom": "Serialize tables (xla_sc_num_serialized_tables_to_optimize_hbm) if the stack dominates; prefetch fewer "
    "steps (maximum_parallel_iterations), shrink dense weights or use more chips if the heap does.",
    "nan_detected": "Clean or filter the input weights of the features named (the input pipeline produced NaNs); "
    "keep xla_sc_detect_nan on until a run passes.",
}


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.sql("analysis.checks.failures")
    result = Analysis(NAME, tables={"failures": table})
    rows = table.to_pylist()
    if rows:  # the failures' facts as figures (a failed compile's bytes asked for against the room there was)
        result.figures = {
            "failures": [
                {k: r[k] for k in ("kind", "start_ps", "requested_bytes", "capacity_bytes", "message")} for r in rows
            ]
        }
    for row in rows:
        result.findings.append(
            Finding(
                rule=f"failure_{row['kind']}",
                severity="critical",
                title=f"The run failed: {row['kind'].replace('_', ' ')}",
                metric="failed_at_ps",
                value=row["start_ps"],
                unit="ps",
                recommendation=ADVICE.get(row["kind"], "See the message for the limit that was exceeded."),
                evidence={"message": row["message"]},
                evidence_sql=sqltree.show("analysis.checks.failure_evidence", run=ctx.run_id, event_id=row["event_id"]),
            )
        )
    return result

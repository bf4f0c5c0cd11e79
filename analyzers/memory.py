"""HBM heap and stack pressure: peaks against the chip's capacity.

Reads the memory counters a run recorded (HBM heap, HBM stack, SPMEM, any
counter in bytes) and the HBM capacity from the run's hardware header; the
combined HBM peak adds heap and stack as sampled together.
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding

NAME = "memory"
QUESTION = "How close do HBM heap and stack come to the chip's capacity, and what drives the peak?"

WARN_SHARE = 0.85
CRITICAL_SHARE = 0.95


def analyze(ctx: RunContext) -> Analysis:
    peaks = ctx.query("memory_peaks")
    result = Analysis(NAME, tables={"memory_peaks": peaks})
    rows = peaks.to_pylist()
    if not rows:
        result.notes.append("the run recorded no memory counters (HBM heap/stack) in bytes")
        return result
    capacity = ctx.hardware("hbm_bytes")
    if not capacity:
        result.notes.append("the run's hardware header has no HBM capacity: peaks are shown without a limit")
    worst = max(rows, key=lambda r: r["hbm_peak_bytes"] or r["peak_bytes"] or 0)
    peak = worst["hbm_peak_bytes"] or worst["peak_bytes"]
    result.figures = {"hbm_peak_bytes": peak, "hbm_capacity_bytes": capacity,
                      "hbm_peak_share": peak / capacity if capacity else None}  # fmt: skip
    if capacity and peak / capacity >= WARN_SHARE:
        heap = max((r["peak_bytes"] for r in rows if r["counter"] == "HBM heap"), default=0)
        stack = max((r["peak_bytes"] for r in rows if r["counter"] == "HBM stack"), default=0)
        driver = "stack" if stack > heap else "heap"
        lever = (
            "Serialize more tables (raise xla_sc_num_serialized_tables_to_optimize_hbm) to lower the peak HBM stack, "
            "or lower the per-partition limits, which size the stack."
            if driver == "stack"
            else "Lower maximum_parallel_iterations (each prefetched step holds its inputs in HBM), shrink dense "
            "weights/optimizer state, or spread tables over more chips."
        )
        result.findings.append(
            Finding(
                rule=f"hbm_{driver}_pressure",
                severity="critical" if peak / capacity >= CRITICAL_SHARE else "warning",
                title=f"HBM peaks at {peak / capacity:.0%} of capacity on chip {worst['chip']} (driven by the {driver})",
                metric="hbm_peak_share", value=peak / capacity, unit="share of HBM capacity",
                recommendation=lever,
                evidence={"hbm_peak_bytes": peak, "hbm_capacity_bytes": capacity, "heap_peak_bytes": heap,
                          "stack_peak_bytes": stack},
                entities={"chips": sorted({r["chip"] for r in rows if (r["hbm_peak_bytes"] or 0) >= WARN_SHARE * capacity})},
                evidence_sql=(
                    "-- HBM counters over time\n"
                    f"SELECT chip, counter, ts_ps, value FROM counter_samples WHERE run_id = {ctx.run_id} "
                    "AND unit = 'bytes' ORDER BY chip, counter, ts_ps"
                ),
            )  # fmt: skip
        )
    return result

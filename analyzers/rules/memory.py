"""HBM heap and stack pressure: peaks against the chip's capacity, what drives them, which lever.

Reads the memory counters a run recorded (HBM heap, its contributors `HBM heap: <name>`,
HBM stack, SPMEM, any counter in bytes) and the HBM peak per chip with the capacity from
the run's hardware header (the store's hbm_peaks view: heap and stack as sampled together). At the worst
chip's peak it splits HBM into its static part (the heap before any step) and what grew
since (the stack, prefetched inputs): when the static heap alone is over the threshold
the largest static contributor names the lever, otherwise the top growing one does.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix
from profiler import sqltree
from profiler.units import format_value

NAME = "memory"
QUESTION = "How close do the heap and stack in device memory come to its capacity, and what drives the peak?"

WARN_SHARE = 0.85
CRITICAL_SHARE = 0.95
HEAP, STACK, PART = "HBM heap", "HBM stack", "HBM heap: "
GiB = 1 << 30

STACK_LEVER = (
    "Serialize more table groups (raise xla_sc_num_serialized_tables_to_optimize_hbm): a serialized group's "
    "stack is live alone, the others' at once, so the peak stack falls (SparseCore time per step rises). Or lower "
    "max_unique_ids_per_partition towards the observed unique IDs: it sizes each group's stack."
)
GENERIC_HEAP_LEVER = (
    "Lower maximum_parallel_iterations (each prefetched step holds its inputs in HBM), shrink dense "
    "weights/optimizer state, or spread tables over more chips."
)
# heap contributor (as the emulator names its counters) -> the lever that shrinks it
HEAP_LEVERS = {
    "prefetched inputs": "Lower maximum_parallel_iterations (the prefetch depth): every prefetched step holds its "
    "input buffers in HBM at their compiled shape until its SparseCore forward is done, so fewer steps in flight "
    "lower the peak. Lower per-partition limits also shrink each step's buffers.",
    "embedding tables": "Spread the tables over more chips (mod-sharded rows: each chip holds vocab / chips of "
    "every table), or use narrower or bf16 tables.",
    "embedding optimizer state": "Use an optimizer with fewer slots per row (SGD 0, Adagrad 1, Adam 2) or spread "
    "the tables over more chips.",
    "dense weights": "Shrink the dense part (narrower MLP or cross layers) or shard it instead of replicating it.",
    "dense optimizer state": "Shrink the dense part or use a dense optimizer with fewer slots.",
    "constants": "Move large constants out of the program (feed them as inputs or compute them on the device).",
}


def _drivers(parts: list[dict[str, Any]], capacity: float) -> tuple[str, str, str, list[dict[str, Any]]]:
    """(rule driver, contributor that names the lever, why, contributors at the peak) for one chip."""
    by = {r["counter"]: r for r in parts}
    named = [r for r in parts if r["contributor"]]
    static_heap = (by[HEAP]["first_bytes"] or 0) if HEAP in by else sum(r["first_bytes"] or 0 for r in named)
    heap_parts = named if named else [by[HEAP]] if HEAP in by else []  # contributors, else the total
    contributors = [
        {
            "name": r["contributor"] or r["counter"],
            "bytes": r["bytes_at_peak"] or 0,
            "growth_bytes": r["growth_bytes"] or 0,
        }
        for r in heap_parts + ([by[STACK]] if STACK in by else [])
    ]
    contributors.sort(key=lambda c: (-c["bytes"], c["name"]))
    if static_heap >= WARN_SHARE * capacity:  # the heap is over the threshold before any step runs
        top = max((c for c in contributors if c["name"] != STACK), key=lambda c: c["bytes"], default=None)
        return "heap", top["name"] if top else HEAP, "static", contributors
    top = max(contributors, key=lambda c: (c["growth_bytes"], c["name"] == STACK))
    return ("stack" if top["name"] == STACK else "heap"), top["name"], "growing", contributors


def stack_estimate_table(ctx: RunContext) -> pa.Table:
    """Per table group: the doc's stack formulas per chip (analysis.memory.stack_estimate; cached)."""
    return ctx.memo("stack_estimate", lambda: ctx.sql("analysis.memory.stack_estimate"))


def stack_estimate(ctx: RunContext) -> dict[str, int | None]:
    """The doc's stack formulas over every table group at once (analysis.memory.stack_estimate), per chip.

    `one_pass`: the larger of all groups' forward or backward stacks; `both_passes`: forward
    and backward together, as when a pipelined step's forward overlaps the previous step's
    backward. Each with the compiled max_unique_ids_per_partition and (`observed_`) with
    the most unique IDs a partition saw. None when the run lacks table layout or
    partition statistics (e.g. an imported capture).
    """
    rows = stack_estimate_table(ctx).to_pylist()
    out: dict[str, int | None] = {}
    for suffix in ("", "_observed"):
        fwd = sum(r[f"forward{suffix}_bytes"] for r in rows)
        bwd = sum(r[f"backward{suffix}_bytes"] for r in rows)
        out[f"stack_estimate{suffix}_one_pass_bytes"] = max(fwd, bwd) if rows else None
        out[f"stack_estimate{suffix}_both_passes_bytes"] = fwd + bwd if rows else None
    return out


def analyze(ctx: RunContext) -> Analysis:
    peaks = ctx.sql("analysis.memory.memory_peaks")
    result = Analysis(NAME, tables={"memory_peaks": peaks, "stack_estimate": stack_estimate_table(ctx)})
    rows = peaks.to_pylist()
    estimate = stack_estimate(ctx)
    if not any(r["hbm_peak_bytes"] is not None for r in rows):
        what = "memory counters (HBM heap/stack)" if ctx.memory_word() == "HBM" else "device memory counters"
        result.notes.append(f"the run recorded no {what} in bytes")
        return result
    capacity = ctx.hardware("hbm_bytes")
    if not capacity:
        result.notes.append("the run's hardware header has no HBM capacity: peaks are shown without a limit")
    # the run's HBM peak (the store's hbm_peaks view): its highest chip's, the lowest chip on a tie
    worst = max((r for r in rows if r["hbm_peak_bytes"] is not None), key=lambda r: r["hbm_peak_bytes"])
    peak = worst["hbm_peak_bytes"]
    stack = max((r["peak_bytes"] for r in rows if r["counter"] == STACK), default=0)
    result.figures = {
        "hbm_peak_bytes": peak,
        "hbm_capacity_bytes": capacity,
        "hbm_peak_share": peak / capacity if capacity else None,
        "stack_peak_bytes": stack,
        **estimate,
    }
    if not capacity or peak / capacity < WARN_SHARE:
        return result
    chip, ts = worst["chip"], worst["hbm_peak_ts_ps"] or 0
    parts_table = ctx.sql("analysis.memory.memory_contributors", chip=chip, ts=ts)
    result.tables["memory_contributors"] = parts_table
    driver, lever_of, why, contributors = _drivers(parts_table.to_pylist(), capacity)
    heap = max((r["peak_bytes"] for r in rows if r["counter"] == HEAP), default=0)
    if driver == "stack":
        lever = STACK_LEVER
        groups = ctx.sql("analysis.memory.table_groups").to_pylist()[0]["n"]
        if groups:
            lever += f" The run has {groups} table group(s) on its SparseCores."
        if estimate["stack_estimate_one_pass_bytes"]:
            e = {k: v / GiB for k, v in estimate.items()}
            lever += (
                f" The doc's stack formulas give {e['stack_estimate_one_pass_bytes']:.1f} GiB per chip (one pass of every "
                f"group) to {e['stack_estimate_both_passes_bytes']:.1f} GiB (forward and backward at once, as pipelined "
                f"steps overlap) with the compiled limits, against {stack / GiB:.1f} GiB recorded; with "
                f"max_unique_ids_per_partition at the most unique IDs a partition saw, "
                f"{e['stack_estimate_observed_one_pass_bytes']:.1f} to {e['stack_estimate_observed_both_passes_bytes']:.1f} GiB."
            )
        cause = "the stack"
    else:
        lever = HEAP_LEVERS.get(lever_of, GENERIC_HEAP_LEVER)
        cause = f"the heap, {lever_of}" + (" growing" if why == "growing" else " before any step runs")
    top = next((c for c in contributors if c["name"] == lever_of), None)
    fix = _fix(ctx, driver, lever_of)
    result.findings.append(
        Finding(
            rule=f"hbm_{driver}_pressure",
            severity="critical" if peak / capacity >= CRITICAL_SHARE else "warning",
            title=f"HBM peaks at {format_value(peak / capacity, 'share')} of capacity on chip {chip} (driven by {cause})",
            metric="hbm_peak_share",
            value=peak / capacity,
            unit="share of HBM capacity",
            recommendation=lever,
            evidence={
                "hbm_peak_bytes": peak,
                "hbm_capacity_bytes": capacity,
                "heap_peak_bytes": heap,
                "stack_peak_bytes": stack,
                **estimate,
                "peak_ts_ps": ts,
                "driver": lever_of,
                "driver_bytes": top["bytes"] if top else None,
                "driver_growth_bytes": top["growth_bytes"] if top else None,
                "top_contributors": [c["name"] for c in contributors[:3]],
            },
            entities={
                "chips": sorted({r["chip"] for r in rows if (r["hbm_peak_bytes"] or 0) >= WARN_SHARE * capacity})
            },
            evidence_sql=sqltree.show("evidence.memory.hbm_counters", run=ctx.run_id),
            fix=fix,
        )
    )
    return result


def _fix(ctx: RunContext, driver: str, lever_of: str) -> dict | None:
    """The config lever of the driver: serialize table groups (the stack), a shallower
    prefetch (prefetched inputs); other heap contributors need model or hardware changes."""
    flags = ctx.config.get("flags") or {}
    if driver == "stack":
        groups = ctx.sql("analysis.memory.table_groups").to_pylist()[0]["n"]
        now = flags.get("xla_sc_num_serialized_tables_to_optimize_hbm") or 0
        most = max(groups - 1, 1) if groups else now + 1  # k serialized groups + the rest: all apart at n - 1
        if now >= most:
            return None
        key = "flags.xla_sc_num_serialized_tables_to_optimize_hbm"
        return make_fix(set={key: most}, explore={key: list(range(now + 1, most + 1))[-4:]})
    if lever_of == "prefetched inputs":
        depth = flags.get("maximum_parallel_iterations")
        if depth is not None and depth <= 1:
            return None
        lower = [d for d in (1, 2, 4) if depth is None or d < depth]
        # the default depth (2) keeps one step prepared ahead; 1 only when already at 2
        return make_fix(
            set={"flags.maximum_parallel_iterations": 2 if 2 in lower else 1},
            explore={"flags.maximum_parallel_iterations": lower},
        )
    return None

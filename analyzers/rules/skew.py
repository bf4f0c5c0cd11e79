"""SparseCore load skew: a few partitions receive far more IDs than the rest.

Mod sharding (`id % num_sparsecores`) spreads uniform IDs evenly, but hot IDs
land on the partitions their values map to. Per step and table: max/mean of the
partition loads and their coefficient of variation; the hot partitions, and how
persistently the same partition is the hottest across steps.

A skewed table is a problem only when it costs step time (docs/analyzers.md, sc_load_skew):
  - the hot partition is persistent (the same SparseCore is the table's hottest in at least
    PERSISTENT of the steps): hot IDs, which land on the same partition every step, not the
    sampling noise of small per-SparseCore batches, which moves and no ID shuffle removes;
  - its SparseCore is on the step's critical path, measured per counted step and chip
    (analysis.sparsecore.core_step_busy, the idle gaps): the SparseCore's excess over the slice's mean
    SparseCore busy time counts as far as the SparseCore is the chip's busiest core beyond
    the mean (the TensorCore's op line and its collectives less busy: the step is paced by
    it) or as far as the TensorCore sat idle waiting for SparseCore work (a gap whose
    blocker is a SparseCore op or the embedding all-to-all that waits for the slowest
    SparseCore). cost = min(excess, max(bottleneck margin, TensorCore wait)).
Warning from COSTLY of the step time, critical from VERY_COSTLY; a skew that costs less (or a
run without SparseCore op events to measure it on, or one whose IDs are shuffled already, where
what stays hot is single rows no remapping spreads) is reported at info, from MAX_OVER_MEAN only
(a milder one, from COSTLY_MAX_OVER_MEAN, only where it costs).
"""

from __future__ import annotations

import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import (
    Analysis,
    Finding,
    make_fix,
    per_counted_step,
    spread_severity,
    spread_text,
    step_distribution,
)
from analyzers.rules import idle_gaps
from profiler import sqltree
from profiler.units import format_ratio

NAME = "skew"
QUESTION = "Are some SparseCore partitions overloaded by hot IDs while others idle?"

MAX_OVER_MEAN = 1.5  # the hottest partition carries 1.5x the mean load or more
# From 1.25x a skew is reported only where it is persistent and costs step time: where half the
# partitions are hot (SparseCore 0 of each chip on v6e's 2 per chip), max/mean stays under 1.5
# even when a hot SparseCore carries twice a cold one's load.
COSTLY_MAX_OVER_MEAN = 1.25
PERSISTENT = 0.5  # the same partition is the hottest in at least half of the steps: hot IDs
COSTLY = 0.02  # the skew costs this share of the step time or more: warning
VERY_COSTLY = 0.10  # ... critical
SC_WORK = ("sc_forward", "sc_backward", "sc_collective")  # what a TensorCore waiting on SparseCores waits for


def skew_cost(ctx: RunContext) -> dict[tuple[int, int], dict[str, float]]:
    """Per SparseCore (chip, sc): the step time its excess load costs, summed over the counted
    steps (cost_ps), its excess over the slice's mean SparseCore busy time (excess_ps), the
    counted steps' time (step_ps) and the cost's share of each counted step's time (share_by_step,
    step -> share). Empty for a run without SparseCore op events in steps."""
    busy = ctx.sql(
        "analysis.sparsecore.skew_busy", {"core_step_busy": ctx.sql("analysis.sparsecore.core_step_busy")}
    ).to_pylist()
    if not busy:
        return {}
    gaps = idle_gaps.gaps(ctx)
    waits = {
        (r["chip"], r["step"]): float(r["wait"])
        for r in ctx.sql(
            "analysis.sparsecore.skew_tc_waits", {"gaps": gaps}, blocker_categories=list(SC_WORK)
        ).to_pylist()
    }
    steps = {r["step"]: float(r["step_ps"]) for r in ctx.step_times().to_pylist() if r["counted"]}
    out: dict[tuple[int, int], dict[str, float]] = {}
    for r in busy:
        excess = max(0.0, r["busy"] - r["mean_sc"])
        margin = max(0.0, r["busy"] - max(r["mean_sc"], r["other"]))  # the SparseCore paces the chip
        cost = min(excess, max(margin, waits.get((r["chip"], r["step"]), 0.0)))
        acc = out.setdefault(
            (r["chip"], r["sc"]), {"cost_ps": 0.0, "excess_ps": 0.0, "step_ps": 0.0, "share_by_step": {}}
        )
        acc["cost_ps"] += cost
        acc["excess_ps"] += excess
        acc["step_ps"] += steps.get(r["step"], 0.0)
        if steps.get(r["step"]):
            acc["share_by_step"][r["step"]] = cost / steps[r["step"]]
    return out


def analyze(ctx: RunContext) -> Analysis:
    loads = ctx.sql("analysis.sparsecore.partition_load")
    result = Analysis(NAME, tables={"partition_load": loads})
    if loads.num_rows == 0:
        result.notes.append("the run has no SparseCore partition statistics (sc_partition_stats)")
        return result
    per_table = ctx.sql("analysis.sparsecore.skew_per_table", {"partition_load": loads}).to_pylist()
    result.figures = {
        "tables": {r["table_name"]: {"max_over_mean": r["max_over_mean"], "cv": r["cv"]} for r in per_table}
    }
    sc_config = ctx.config.get("sparsecore") or {}
    # the emulator's ID shuffle (sparsecore.shuffle_ids): each table's IDs shifted to other
    # partitions, so different tables' hot rows stop sharing a SparseCore; only where it is off
    fix = make_fix(set={"sparsecore.shuffle_ids": True}) if sc_config.get("shuffle_ids") is False else None
    shuffled = sc_config.get("shuffle_ids") is True  # the remedy applied: what is left has none (info)
    skewed = [r for r in per_table if r["max_over_mean"] and r["max_over_mean"] >= COSTLY_MAX_OVER_MEAN]
    costs = skew_cost(ctx) if skewed else {}
    counted = ctx.counted_steps()
    by_step = ctx.sql("analysis.sparsecore.skew_by_step", {"partition_load": loads}) if skewed else None
    for r in skewed:
        chip, sc = divmod(int(r["hot"]), 1000)
        c = costs.get((chip, sc))
        share = c["cost_ps"] / c["step_ps"] if c and c["step_ps"] else None
        persistent = r["persistence"] >= PERSISTENT
        mine = by_step.filter(pc.equal(by_step.column("table_name"), r["table_name"]))
        dist = step_distribution(
            per_counted_step(counted, mine.column("step").to_numpy(), mine.column("max_over_mean").to_numpy()),
            COSTLY_MAX_OVER_MEAN,
        )
        severity = "info"
        if persistent and share is not None and share >= COSTLY and not shuffled:
            severity = "critical" if share >= VERY_COSTLY else "warning"
            cost_by_step = c["share_by_step"] if c else {}
            per_step_cost = per_counted_step(counted, list(cost_by_step), list(cost_by_step.values()))
            # a cost's mean carried by a few steps is not critical on its own
            severity = spread_severity(severity, per_step_cost, VERY_COSTLY)
        elif r["max_over_mean"] < MAX_OVER_MEAN:
            continue  # a milder skew only where it costs
        if share is None:
            cost_note = " The run has no SparseCore op events in counted steps to measure what it costs."
        else:
            cost_note = (
                f" It costs {share:.1%} of the step time: the SparseCore's excess load over the mean, as far as "
                "the step waits for that SparseCore."
            )
        if shuffled:
            cost_note += (
                " The IDs are shuffled already (sparsecore.shuffle_ids): what stays hot is single rows, "
                "which no remapping of IDs to partitions spreads."
            )
        if not persistent:
            cost_note += (
                " The hottest partition moves between steps: sampling noise of small per-SparseCore "
                "batches rather than hot IDs, which no ID shuffle spreads."
            )
        result.findings.append(
            Finding(
                rule="sc_load_skew",
                severity=severity,
                title=(
                    f"Table {r['table_name']}: the hottest SparseCore partition gets {format_ratio(r['max_over_mean'])} "
                    f"the mean load (chip {chip}, SparseCore {sc} hottest in {r['persistence']:.0%} of steps"
                    + (
                        f"; {spread}"
                        if (spread := spread_text(dist, format_ratio, format_ratio(COSTLY_MAX_OVER_MEAN)))
                        else ""
                    )
                    + ")"
                ),
                metric="max_over_mean_ids",
                value=r["max_over_mean"],
                unit="x mean partition load",
                recommendation=(
                    "Spread hot IDs: shuffle or rotate the ID space of the table (for stacked tables, shift each "
                    "table's IDs before stacking, step 8 of the limit procedure) so hot rows do not share a "
                    "SparseCore; then re-derive the limits, which the hottest partition currently sets for all."
                    + (" In the emulator: sparsecore.shuffle_ids=true." if fix else "")
                    + cost_note
                ),
                evidence={
                    "cv_ratio": r["cv"],
                    "worst_max_over_mean": r["worst_max_over_mean"],
                    "persistence_share": r["persistence"],
                    "steps_with_stats": r["steps"],
                    "per_step_median_max_over_mean": dist["median"],
                    "steps_affected": dist["steps_affected"],
                    "steps": dist["steps"],
                    "step_time_cost_share": share,
                    "hot_sc_excess_ps": c["excess_ps"] if c else None,
                },
                entities={"tables": [r["table_name"]], "chips": [chip], "scs": [sc]},
                evidence_sql=sqltree.show("evidence.skew.partition_loads", run=ctx.run_id, table=r["table_name"]),
                fix=fix if persistent else None,
            )
        )
    return result

"""ID dropping: with allow_id_dropping, IDs past the limits are silently discarded.

Dropped counts come from the partition statistics; the share is taken against
all IDs the table's SparseCore forward ops processed plus those dropped.
IDs the chip-level cap (`max_ids_per_chip_per_sample`) dropped before partitioning
appear in no partition's statistics: they are the host's dropped IDs (the `Dropped IDs`
counter, or the host preprocessing events' dropped_ids) less those the partitions dropped.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix, per_counted_step, spread_severity, step_distribution
from analyzers.rules import minibatching
from profiler import sqltree
from profiler.units import format_value

NAME = "id_dropping"
QUESTION = "Are embedding IDs silently dropped because they exceed the compiled limits?"

CRITICAL_SHARE = 0.01  # more than 1% of IDs dropped


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.sql("analysis.sparsecore.dropped_by_step")
    result = Analysis(NAME, tables={"dropped_by_step": table})
    cap = _chip_cap(ctx)
    if cap is not None:
        result.findings.append(cap)
    if table.num_rows == 0:  # no dropped-ID counts at all: "0 dropped" would claim what was never measured
        result.notes.append(
            "the run has no SparseCore partition statistics with dropped-ID counts (sc_partition_stats.dropped_ids)"
        )
        return result
    totals = ctx.sql("analysis.sparsecore.dropped_by_table", {"dropped_by_step": table}).to_pylist()
    # the run's total: the store's step_minibatches view, as every other place reads it
    result.figures = {"dropped_ids": minibatching.step_totals(ctx)["dropped_ids"]}
    counted = ctx.counted_steps()
    for r in totals:
        if not r["dropped"]:
            continue
        kept = r["kept"]
        share = r["dropped"] / (kept + r["dropped"]) if kept is not None else None
        mine = table.filter(pc.equal(table.column("table_name"), r["table_name"]))
        step = mine.column("step").to_numpy()
        dropped = per_counted_step(counted, step, mine.column("dropped_ids").to_numpy())
        received = per_counted_step(counted, step, mine.column("all_ids").to_numpy())
        dist = step_distribution(dropped, 0)
        severity = "critical" if share is None or share > CRITICAL_SHARE else "warning"
        if share is not None:  # the share of a step's IDs dropped, step by step
            per_step = np.divide(dropped, received, out=np.zeros(len(counted)), where=received > 0)
            severity = spread_severity(severity, per_step, CRITICAL_SHARE)
        result.findings.append(
            Finding(
                rule="id_dropping",
                severity=severity,
                title=(
                    f"Table {r['table_name']}: {r['dropped']:,} IDs dropped in "
                    + (
                        f"{dist['steps_affected']} of {dist['steps']} steps"
                        if dist["steps"]
                        else f"{r['steps_dropping']} of {r['steps']} steps"
                    )
                    + (f" ({format_value(share, 'share')} of its IDs)" if share is not None else "")
                ),
                metric="dropped_share" if share is not None else "dropped_ids",
                value=share if share is not None else r["dropped"],
                unit="share of IDs" if share is not None else "IDs",
                recommendation=(
                    f"Dropped IDs train nothing. Raise max_ids_per_partition / max_unique_ids_per_partition for "
                    f"{r['table_name']} to the observed maximum (or let scprof derive a limits file with "
                    "--set flags.xla_sparse_core_estimate_max_ids=true), and keep allow_id_dropping=false "
                    "while tuning so overflows are errors, not silent losses."
                ),
                evidence={
                    "dropped_ids": r["dropped"],
                    "kept_ids": kept,
                    "max_ids_per_partition": r["max_ids_per_partition"],
                    "per_step_median_dropped_ids": dist["median"],
                    "steps_affected": dist["steps_affected"],
                    "steps": dist["steps"],
                },
                entities={"tables": [r["table_name"]]},
                confidence="high" if share is not None else "medium",
                # limits from the observed maxima, overflow an error: every ID trains (numerics change)
                fix=make_fix(set={"sparsecore.allow_id_dropping": False}, derive_limits=True, changes_numerics=True),
                evidence_sql=sqltree.show("evidence.id_dropping.dropped_ids", run=ctx.run_id, table=r["table_name"]),
            )
        )
    return result


def host_drops(ctx: RunContext) -> dict[str, int | None]:
    """IDs the host dropped over every step (the `Dropped IDs` counter, else the preprocessing
    events' dropped_ids), those the partitions dropped (sc_partition_stats), the IDs kept after
    dedup (preprocessing events' unique_ids) and before dedup (their ids); None where unrecorded."""
    return ctx.sql("analysis.sparsecore.host_drops").to_pylist()[0]


def _chip_cap(ctx: RunContext) -> Finding | None:
    """IDs dropped by max_ids_per_chip_per_sample: dropped on the host, in no partition's count."""
    d = host_drops(ctx)
    dropped = d["counter_dropped"] if d["counter_dropped"] is not None else d["host_dropped"]
    if not dropped:
        return None
    cap_dropped = dropped - (d["partition_dropped"] or 0)
    if cap_dropped <= 0:
        return None
    sc = ctx.config.get("sparsecore") or {}
    cap = sc.get("max_ids_per_chip_per_sample")
    features = ctx.config.get("features") or []
    # the most IDs one sample carries before dedup: every feature's bag at its largest (with
    # fixed-size bags every sample carries exactly this; the host events' mean confirms it)
    most = sum(int(f.get("multi_hot") or 1) for f in features) or None
    samples = (ctx.config.get("global_batch") or 0) * (d["steps"] or 0)
    mean = d["raw"] / samples if d["raw"] and samples else None
    share = cap_dropped / (d["kept"] + dropped) if d["kept"] is not None else None
    target = max(most, cap or 0) if most else None
    fix = (
        make_fix(set={"sparsecore.max_ids_per_chip_per_sample": target}, changes_numerics=True)
        if target and cap and target > cap
        else None
    )
    return Finding(
        rule="chip_cap_dropping",
        severity="critical" if share is None or share > CRITICAL_SHARE else "warning",
        title=(
            f"{cap_dropped:,} IDs dropped by the chip-level cap max_ids_per_chip_per_sample"
            + (f"={cap}" if cap else "")
            + (f" ({format_value(share, 'share')} of the IDs after dedup)" if share is not None else "")
        ),
        metric="dropped_share" if share is not None else "dropped_ids",
        value=share if share is not None else cap_dropped,
        unit="share of IDs" if share is not None else "IDs",
        recommendation=(
            "Dropped IDs train nothing: their rows are neither looked up nor updated, silently. "
            + (
                f"Samples carry up to {most} IDs over all features (before dedup) against a cap of {cap}: raise "
                f"sparsecore.max_ids_per_chip_per_sample to {target} "
                if fix
                else "Raise sparsecore.max_ids_per_chip_per_sample to the most IDs a sample carries "
            )
            + "(the run then computes with every ID, which changes its numerics against this run's), or keep "
            "allow_id_dropping=false so an overflow is an error, not a silent loss."
        ),
        evidence={
            "chip_cap_dropped_ids": cap_dropped,
            "dropped_ids": dropped,
            "partition_dropped_ids": d["partition_dropped"],
            "kept_ids": d["kept"],
            "max_ids_per_chip_per_sample": cap,
            "max_ids_per_sample": most,
            "mean_ids_per_sample": mean,
            "allow_id_dropping": sc.get("allow_id_dropping"),
        },
        entities={},
        confidence="high" if share is not None else "medium",
        evidence_sql=sqltree.show("evidence.id_dropping.host_dropped_ids", run=ctx.run_id),
        fix=fix,
    )

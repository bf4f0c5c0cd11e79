"""Minibatching: compiled limits set below what the partitions receive.

When a partition's observed IDs or unique IDs exceed `max_ids_per_partition` /
`max_unique_ids_per_partition`, host preprocessing splits the step into several
minibatches: more, smaller SparseCore ops than the batch implies, each paying the
fixed per-op cost. As in jax-tpu-embedding, the count is one for every stack of a step, so
only the stacks over their limits get a finding (naming the stacks that ran the minibatches
within theirs). Evidence comes from the partition statistics (minibatches, observed vs
compiled) and from the ops themselves (forward ops per step; the fixed cost per op from a
linear fit of op duration on IDs).
"""

from __future__ import annotations

import math

import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import (
    Analysis,
    Finding,
    make_fix,
    per_counted_step,
    spread_severity,
    step_distribution,
)
from analyzers.rules import spmem
from profiler import sqltree
from profiler.units import format_ratio, format_value

NAME = "minibatching"
QUESTION = "Do compiled limits split steps into SparseCore minibatches, and what limits would avoid it?"

FIT_R2 = 0.5  # the op-duration fit must explain this much variance to estimate the per-op cost
CRITICAL_MINIBATCHES = 3  # a table whose steps need this many minibatches (the median counted step too) is critical


def round_up(n: float, to: int = 8) -> int:
    """A limit to suggest: the observed maximum rounded up to a multiple of 8."""
    return int(math.ceil(n / to) * to)


def step_totals(ctx: RunContext) -> dict[str, float | int | None]:
    """Minibatches per step (mean and max over the counted steps) and dropped IDs (total over
    every step), from the store's step_minibatches view; None where nothing is recorded."""
    return ctx.memo(
        "step_minibatches",
        lambda: ctx.sql("analysis.sparsecore.step_totals").to_pylist()[0],
    )


# Limits at least this many times the largest observed load are "oversized" when the empty
# slots cost at least 2% of the step (a warning from 10%).
OVERSIZED_RATIO = 2.0
OVERSIZED_MIN_SHARE = 0.02
OVERSIZED_WARNING_SHARE = 0.10


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.sql("analysis.sparsecore.minibatching")
    result = Analysis(NAME, tables={"minibatching": table})
    per_step = step_totals(ctx)
    result.figures = {
        k: per_step[k] for k in ("minibatches_per_step_mean", "minibatches_per_step_max") if per_step[k] is not None
    }
    rows = table.to_pylist()
    if not rows:
        result.notes.append("the run has no SparseCore partition statistics (sc_partition_stats)")
        return result
    step_ps = ctx.step_median_ps() or 0
    result.figures |= {"tables": len(rows), "tables_minibatched": sum((r["max_minibatches"] or 1) > 1 for r in rows)}
    # One minibatch count for every stack of a step (jax-tpu-embedding ORs the stacks' splits):
    # a stack within its limits runs the minibatches another stack needs. Only a stack over
    # its limits is the cause; the others are named in its finding.
    carried = [r["table_name"] for r in rows if (r["max_minibatches"] or 1) > 1 and not _over(r)]
    by_step = ctx.sql("analysis.sparsecore.minibatches_by_step")
    counted = ctx.counted_steps()
    for r in rows:
        if (r["max_minibatches"] or 1) <= 1 or not _over(r):
            continue
        # Each extra minibatch costs every SparseCore one more fixed-cost op forward and one
        # backward; the SparseCores run in parallel, so that is the step's overhead. Only
        # when the duration-on-IDs fit explains the ops well enough to trust its intercept.
        fixed = r["fixed_ps_per_op"] if (r["fit_r2"] or 0) >= FIT_R2 and (r["fixed_ps_per_op"] or 0) > 0 else None
        overhead = fixed * (r["mean_minibatches"] - 1) * 2 if fixed is not None else None
        share = overhead / step_ps if overhead is not None and step_ps else None
        ids_over = r["max_ids_per_partition"] is not None and r["observed_max_ids"] > r["max_ids_per_partition"]
        uniq_over = (
            r["max_unique_ids_per_partition"] is not None
            and r["observed_max_unique_ids"] > r["max_unique_ids_per_partition"]
        )
        advice = []
        if ids_over:
            advice.append(
                f"max_ids_per_partition from {r['max_ids_per_partition']} to {round_up(r['observed_max_ids'])}"
            )
        if uniq_over:
            advice.append(
                f"max_unique_ids_per_partition from {r['max_unique_ids_per_partition']} "
                f"to {round_up(r['observed_max_unique_ids'])}"
            )
        g = spmem.headroom(ctx).get(r["table_name"]) or {}
        fix, recommendation = _fix(r, g, advice)
        mine = by_step.filter(pc.equal(by_step.column("table_name"), r["table_name"]))
        per_step = per_counted_step(counted, mine.column("step").to_numpy(), mine.column("minibatches").to_numpy())
        dist = step_distribution(per_step, 1)
        if carried:
            recommendation += (
                f" The step's minibatch count is shared by every stack: {len(carried)} other stack(s) within "
                f"their limits ({', '.join(carried[:3])}{', ...' if len(carried) > 3 else ''}) ran them too."
            )
        result.findings.append(
            Finding(
                rule="minibatching",
                severity=spread_severity(
                    "critical" if r["max_minibatches"] >= CRITICAL_MINIBATCHES else "warning",
                    per_step,
                    CRITICAL_MINIBATCHES - 1,
                ),
                title=(
                    f"Table {r['table_name']}: limits below the observed load split "
                    + (
                        f"{dist['steps_affected']} of {dist['steps']} steps"
                        if dist["steps"]
                        else f"{r['steps_minibatched']} of {r['steps']} steps"
                    )
                    + f" into up to {r['max_minibatches']} minibatches"
                    + (f" (median step {dist['median']:g})" if dist["steps"] else "")
                ),
                metric="max_minibatches",
                value=r["max_minibatches"],
                unit="minibatches per step",
                recommendation=recommendation,
                evidence={
                    "observed_max_ids": r["observed_max_ids"],
                    "max_ids_per_partition": r["max_ids_per_partition"],
                    "observed_max_unique_ids": r["observed_max_unique_ids"],
                    "max_unique_ids_per_partition": r["max_unique_ids_per_partition"],
                    "mean_minibatches": r["mean_minibatches"],
                    "fwd_ops_per_step": r["fwd_ops_per_step"],
                    "sparsecores": r["sparsecores"],
                    "fixed_ps_per_op": fixed,
                    "estimated_overhead_ps_per_step": overhead,
                    "estimated_overhead_share": share,
                    "spmem_at_observed_bytes": g.get("spmem_at_observed_bytes"),
                    "spmem_capacity_bytes": g.get("capacity_bytes"),
                    "stacks_minibatched_within_limits": len(carried),
                    "per_step_median_minibatches": dist["median"],
                    "steps_affected": dist["steps_affected"],
                    "steps": dist["steps"],
                },
                entities={"tables": [r["table_name"]]},
                evidence_sql=sqltree.show(
                    "evidence.minibatching.partition_load_vs_limits", run=ctx.run_id, table=r["table_name"]
                ),
                fix=fix,
            )
        )
    oversized = _oversized(ctx, [r for r in rows if (r["max_minibatches"] or 1) <= 1])
    if oversized is not None:
        result.findings.append(oversized)
    return result


def _over(r: dict) -> bool:
    """A stack whose observed IDs or unique IDs per partition exceed its compiled limits."""
    ids, uniq = r["observed_max_ids"] or 0, r["observed_max_unique_ids"] or 0
    return (r["max_ids_per_partition"] is not None and ids > r["max_ids_per_partition"]) or (
        r["max_unique_ids_per_partition"] is not None and uniq > r["max_unique_ids_per_partition"]
    )


def _oversized(ctx: RunContext, rows: list[dict]) -> Finding | None:
    """Limits far above anything a partition received, over every table group that never
    minibatched: the SparseCore still works on buffers of the compiled size (lower
    limits are faster, less data per step and less SPMEM), so limits derived from the observed
    load (the document's procedure) are the lever. One finding for the run (one fix for all)."""
    step_ps = ctx.step_median_ps()
    groups = []
    for r in rows:
        ratio = max(
            (
                limit / observed
                for limit, observed in (
                    (r["max_ids_per_partition"], r["observed_max_ids"]),
                    (r["max_unique_ids_per_partition"], r["observed_max_unique_ids"]),
                )
                if limit and observed
            ),
            default=0.0,
        )
        slack_ps = empty_slot_ps_per_step(ctx, r) if ratio >= OVERSIZED_RATIO else None
        if slack_ps:
            groups.append((r, ratio, slack_ps))
    slack_ps = sum(g[2] for g in groups)
    if not step_ps or slack_ps < OVERSIZED_MIN_SHARE * step_ps:
        return None  # what the empty slots cost is unknown (a real capture) or too small to matter
    share = slack_ps / step_ps
    groups.sort(key=lambda g: -g[2])
    r, ratio, _ = groups[0]
    names = [g[0]["table_name"] for g in groups]
    which = f"Table {names[0]}" if len(names) == 1 else f"{len(names)} table groups (most: {names[0]})"
    return Finding(
        rule="oversized_limits",
        severity="warning" if share >= OVERSIZED_WARNING_SHARE else "info",
        title=(
            f"{which}: compiled limits up to {format_ratio(ratio)} the largest load a partition received; "
            f"the empty buffer slots cost up to {format_value(share, 'share')} of the step"
        ),
        metric="empty_slot_share_of_step",
        value=share,
        unit="share of step time",
        recommendation=(
            f"The SparseCore sorts and deduplicates IDs in buffers sized by the compiled limits, filled or not "
            f"({names[0]}: max_ids_per_partition {r['max_ids_per_partition']:,} against at most "
            f"{r['observed_max_ids']:,} IDs seen; max_unique_ids_per_partition {r['max_unique_ids_per_partition']:,} "
            f"against {r['observed_max_unique_ids']:,}): lower limits are faster and take less SPMEM. Derive limits "
            "from the observed load (--set flags.xla_sparse_core_estimate_max_ids=true writes a limits file; use it "
            "with flags.xla_sparse_core_max_ids_file), with headroom if later batches can carry more IDs."
        ),
        evidence={
            "groups": len(names),
            "largest_limit_over_observed": ratio,
            "observed_max_ids": r["observed_max_ids"],
            "max_ids_per_partition": r["max_ids_per_partition"],
            "observed_max_unique_ids": r["observed_max_unique_ids"],
            "max_unique_ids_per_partition": r["max_unique_ids_per_partition"],
            "empty_slot_ps_per_step": slack_ps,
        },
        entities={"tables": names},
        evidence_sql=sqltree.show("evidence.minibatching.group_load_vs_limits", run=ctx.run_id),
        fix=make_fix(derive_limits=True),
    )


def empty_slot_ps_per_step(ctx: RunContext, r: dict) -> float | None:
    """Upper bound of the SparseCore time per step spent on buffer slots no ID filled: every
    source SparseCore's buffer of max_ids (and max_unique_ids) slots is swept by each forward and
    backward op at the cost constants the trace header records (sc_cycles_per_id per slot,
    sc_cycles_per_unique_slot), spread over the tiles at the SparseCore clock. An op bound by
    HBM bandwidth hides part of it. None without those facts (real captures)."""
    resolved = ctx.config.get("resolved") or {}
    c, hw = resolved.get("cost_constants") or {}, resolved.get("hardware") or {}
    needed = (
        c.get("sc_cycles_per_id"),
        c.get("sc_cycles_per_unique_slot"),
        hw.get("num_chips"),
        hw.get("sparsecores_per_chip"),
        hw.get("tiles_per_sparsecore"),
        hw.get("sc_clock_hz"),
    )
    if any(v is None for v in needed) or not r["max_ids_per_partition"] or not r["max_unique_ids_per_partition"]:
        return None
    per_id, per_unique, chips, scs, tiles, clock = needed
    empty = (
        max(r["max_ids_per_partition"] - r["observed_max_ids"], 0) * per_id
        + max(r["max_unique_ids_per_partition"] - r["observed_max_unique_ids"], 0) * per_unique
    )
    ops_per_step = 2  # one forward and one backward op per SparseCore, table group and step
    return ops_per_step * chips * scs * empty / tiles / clock * 1e12


def _fix(r: dict, g: dict, advice: list[str]) -> tuple[dict | None, str]:
    """The fix for one minibatched group and the advice text: derive limits from the observed
    load (the document's procedure) when SPMEM can hold it; when it cannot, a stack of several
    tables is split (then its limits derived), and a lone table has no config fix."""
    name = r["table_name"]
    raise_text = (
        f"Raise {' and '.join(advice) or 'the per-partition limits'} for {name} (the observed maximum, rounded up): "
        "derive a limits file from the observed IDs (--set flags.xla_sparse_core_estimate_max_ids=true writes one; "
        "use it with flags.xla_sparse_core_max_ids_file)."
    )
    if not g.get("binding"):
        room = (
            f" Buffers at the observed load take about {g['spmem_at_observed_bytes']:,} of a tile's "
            f"{g['capacity_bytes']:,} bytes of SPMEM."
            if g.get("spmem_at_observed_bytes") and g.get("capacity_bytes")
            else " Check SPMEM still fits."
        )
        return make_fix(derive_limits=True), raise_text + room
    over = (
        f"Buffers sized to the observed load would need about {g['spmem_at_observed_bytes']:,} bytes of SPMEM per "
        f"tile, more than its {g['capacity_bytes']:,}: no limits avoid the minibatches of {name} as it is."
    )
    tables = g.get("tables") or 1
    if tables < 2:
        return None, over + " Spread its IDs over more SparseCores (more chips) or send fewer IDs per sample."
    split = -(-tables // spmem.pieces_to_fit(g))
    return make_fix(set={"sparsecore.max_tables_per_stack": split}, derive_limits=True), (
        over + f" Split the stack (--set sparsecore.max_tables_per_stack={split}), then derive the limits."
    )

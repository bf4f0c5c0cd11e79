"""Pipelining: how much SparseCore work overlaps TensorCore work, per chip.

With full embedding pipelining the SparseCores work on step i+1 while the
TensorCore finishes step i; without it, SC forward -> TC forward -> TC backward
-> SC backward run strictly in turn and the two kinds of core take turns idling.
Busy time is the union of each kind's op events per chip (overlaps count once);
one exact sweep (analyzers/time_split.py, sets mode) gives the time with only TC,
only SC, or both busy.
"""

from __future__ import annotations

import pyarrow as pa

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix
from analyzers.rules import idle_gaps
from analyzers.rules.breakdown import timeline_splits
from profiler import sqltree
from profiler.units import format_ratio, format_value

NAME = "overlap"
QUESTION = "Do SparseCore and TensorCore work overlap (pipelining), or does each wait for the other?"

LOW_OVERLAP = 0.15  # share of SC busy time overlapped by TC busy time
BUSY_ENOUGH = 0.15  # both kinds busy at least this share of step time for the finding
NEAR_BOUND = 0.8  # overlap this close to min(TC, SC) / SC: the smaller TC work is what limits it


def per_chip(ctx: RunContext) -> pa.Table:
    """chip, step, tc_busy_ps, sc_busy_ps, overlap_ps, step_ps (time by the set of busy core kinds,
    from the sweep the breakdown shares)."""
    by_set = timeline_splits(ctx)["core_kind"]
    return ctx.sql("analysis.split.overlap_by_step", {"core_sets": by_set})


def analyze(ctx: RunContext) -> Analysis:
    table = per_chip(ctx)
    result = Analysis(NAME, tables={"overlap_by_step": table})
    if table.num_rows == 0:
        result.notes.append("no TensorCore or SparseCore op events inside steps")
        return result
    chips = ctx.sql("analysis.split.overlap_by_chip", {"overlap_steps": table}).to_pylist()
    tc = sum(r["tc"] for r in chips)
    sc = sum(r["sc"] for r in chips)
    if not tc and not sc:  # steps on other devices (a GPU, a CPU): nothing to overlap
        result.notes.append("no TensorCore or SparseCore op events inside steps")
        return result
    ov = sum(r["ov"] for r in chips)
    total = sum(r["total"] for r in chips) or 1
    share = ov / sc if sc else 0.0
    result.figures = {
        "overlap_share_of_sc": share,
        "tc_busy_share": tc / total,
        "sc_busy_share": sc / total,
        "per_chip": {str(r["chip"]): (r["ov"] / r["sc"] if r["sc"] else 0.0) for r in chips},  # JSON keys
    }
    # When the TensorCore's waits trace back to host input, the SparseCores could not
    # run ahead whatever the pipelining flag says: that is the host-bound finding's.
    tc_gaps = idle_gaps.causes(ctx, "tensorcore")
    waited = sum(c["gap_ps"] for c in tc_gaps.values())
    for_input = tc_gaps.get("host", {}).get("gap_ps", 0) / waited if waited else 0.0
    result.figures["tc_idle_share_waiting_for_input"] = for_input
    disabled = (ctx.config.get("flags") or {}).get("tf_xla_disable_full_embedding_pipelining")
    # What the SparseCores take turns with: with pipelining off (the config says so), everything
    # else of the step's chain (TensorCore ops and the all-to-alls and dense collectives between
    # SparseCore forward and backward), all of which the next step's SparseCore work could overlap
    # once pipelined; otherwise the TensorCore's ops (the overlap the share measures).
    partner = total - sc if disabled is True else tc
    if share < LOW_OVERLAP and partner / total > BUSY_ENOUGH and sc / total > BUSY_ENOUGH and for_input < 0.5:
        low = [r["chip"] for r in chips if r["sc"] and r["ov"] / r["sc"] < LOW_OVERLAP]
        args = (ctx, share, tc, sc, ov, total, low)
        if disabled is not False:
            result.findings.append(_not_pipelined(*args, disabled))
        else:
            result.findings.append(_low_overlap(*args, tensorcore_waits(ctx)))
    return result


def tensorcore_waits(ctx: RunContext) -> dict[str, float]:
    """TensorCore idle time inside steps (idle_gaps), by what it waited for: SparseCore work
    (`sparsecore`: a SparseCore op or the embedding all-to-all, which waits for the slowest
    SparseCore) or the TensorCore's own collectives (`collective`: the dense gradient
    all-reduce and the sharded dense part's collectives)."""
    rows = ctx.sql("analysis.split.tensorcore_waits", {"gaps": idle_gaps.gaps(ctx)}).to_pylist()[0]
    return {"sparsecore": rows["sparsecore"] or 0.0, "collective": rows["collective"] or 0.0}


def _evidence_sql(ctx: RunContext) -> str:
    return sqltree.show("analysis.split.overlap_evidence", run=ctx.run_id)


def _not_pipelined(
    ctx: RunContext, share: float, tc: float, sc: float, ov: float, total: float, low: list, disabled: bool | None
) -> Finding:
    """Pipelining is off (or the run does not say): turning it on lets the cores overlap."""
    return Finding(
        rule="not_pipelined",
        severity="critical" if share < 0.05 else "warning",
        title=f"SparseCore and TensorCore take turns: only {format_value(share, 'share')} of SparseCore time overlaps TensorCore work",
        metric="sc_tc_overlap_share",
        value=share,
        unit="share of SparseCore busy time",
        recommendation=(
            ("Pipelining is off (tf_xla_disable_full_embedding_pipelining=true). " if disabled else "")
            + "Enable full embedding pipelining (tf_xla_disable_full_embedding_pipelining=false) so step i+1's "
            "SparseCore work overlaps step i's TensorCore work; it can cut device step time up to 2x, with "
            "gradients applied one step later (stale by one step)."
        ),
        evidence={
            "tc_busy_share": tc / total,
            "sc_busy_share": sc / total,
            "overlap_ps": ov,
            "pipelining_disabled": disabled,
        },
        entities={"chips": low},
        confidence="high" if disabled else "medium",
        evidence_sql=_evidence_sql(ctx),
        fix=make_fix(set={"flags.tf_xla_disable_full_embedding_pipelining": False}),
    )


def _low_overlap(
    ctx: RunContext, share: float, tc: float, sc: float, ov: float, total: float, low: list, waits: dict[str, float]
) -> Finding:
    """Pipelining is on, yet little SparseCore time overlaps TensorCore work: say what limits it.

    A warning only where the cores wait on each other: the TensorCore's idle time goes to
    SparseCore work more than to its own collectives, and the step is not SparseCore-bound
    (SparseCores carrying more work than the TensorCore, which then paces nothing: at most
    tc / sc of their time can overlap, and the overlap is near that or the TensorCore work
    left un-overlapped, all that a better overlap could hide, is under BUSY_ENOUGH of the step). Where the dense collectives keep the TensorCore waiting, the
    step is collective-bound: the overlap is low because both cores wait on the interconnect.
    Both are info: pipelining is on, and no overlap setting shortens such a step."""
    bound = min(tc, sc) / sc  # the most of the SparseCore time that TensorCore work could cover
    collective_bound = waits["collective"] > waits["sparsecore"]
    # overlap near its ceiling, or so little TensorCore work left un-overlapped (under BUSY_ENOUGH of
    # the step, the floor the finding sets for TensorCore work) that no better overlap could save more
    sc_bound = not collective_bound and sc > tc and (share >= NEAR_BOUND * bound or (tc - ov) / total < BUSY_ENOUGH)
    why = (
        f"the SparseCore work is {format_ratio(sc / tc)} the TensorCore work it could hide behind, so at most {bound:.0%} of "
        "it can overlap: the step is SparseCore-bound. Shorten the SparseCore work instead (the SparseCore findings: "
        "limits and minibatches, stacking, padding, skew)"
        if sc_bound
        else "the TensorCore waits for its own collectives (the dense gradient all-reduce, the sharded dense part's "
        f"collectives: {waits['collective'] / total:.0%} of the step time, against {waits['sparsecore'] / total:.0%} "
        "waiting for SparseCore work), so both cores wait on the interconnect: the step is collective-bound. "
        "Shrink or hide the dense collectives (the dense part's sharding, fewer or smaller dense gradients)"
        if collective_bound
        else f"TensorCore work could cover up to {bound:.0%} of it, so the cores still wait on each other through "
        "a dependency pipelining does not relax (idle_gaps shows what each gap waited for). Look for what "
        "serializes the step: serialized table groups (xla_sc_num_serialized_tables_to_optimize_hbm), minibatches, "
        "collectives between the SparseCore and TensorCore work"
    )
    return Finding(
        rule="low_overlap",
        severity="info" if sc_bound or collective_bound else "warning",
        title=(
            f"Pipelining is on, yet only {format_value(share, 'share')} of SparseCore time overlaps TensorCore work"
            + (" (SparseCore-bound)" if sc_bound else " (collective-bound)" if collective_bound else "")
        ),
        metric="sc_tc_overlap_share",
        value=share,
        unit="share of SparseCore busy time",
        recommendation=(
            f"Full embedding pipelining is already on (tf_xla_disable_full_embedding_pipelining=false): {why}."
        ),
        evidence={
            "tc_busy_share": tc / total,
            "sc_busy_share": sc / total,
            "overlap_ps": ov,
            "overlap_bound_share_of_sc": bound,
            "tc_wait_for_sc_ps": waits["sparsecore"],
            "tc_wait_for_collectives_ps": waits["collective"],
            "pipelining_disabled": False,
        },
        entities={"chips": low},
        confidence="medium",
        evidence_sql=_evidence_sql(ctx),
    )

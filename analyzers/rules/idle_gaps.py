"""Idle gaps on every device track, each attributed to what the core waited for.

A gap is the time between consecutive ops on a TensorCore or SparseCore op line,
longer than 1% of the median step time. Its cause is read off the event that
ended last before the gap closed, following one hop back to the host when that
event was SparseCore work that itself waited for input (profiler/sql/analysis/idle.sql): host
input, the other kind of core, a collective, or unknown. Findings judge the
TensorCore's gaps: it runs the step's critical path, while a SparseCore idling
ahead of its next input costs nothing unless the TensorCore then waits.
GPUs, CPUs running XLA ops and other devices of real captures: analyzers/rules/device_wait.py.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers import gap_search
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
from analyzers.op_arrays import KIND_CODES, NO_STEP, op_arrays
from analyzers.rules import device_wait
from profiler import sqltree
from profiler.units import format_value

NAME = "idle_gaps"
QUESTION = "When a device (TensorCore, SparseCore, GPU, CPU) sits idle inside a step, what is it waiting for?"

MIN_GAP_SHARE = 0.01  # of the median step time
INPUT_TOLERANCE_SHARE = 0.01  # a SparseCore forward starting this soon after its input landed waited for it
MIN_GAP_PS = 1  # runs without steps: every gap
HOST_SHARE = 0.05  # host-caused TensorCore idle above this share of its time is a finding
HOST_CRITICAL_SHARE = 0.2  # ... critical above this share, when the median counted step waits that long too
SATURATED = 0.9  # input threads busy this share of the step time: the host lacks throughput
DEFAULT_DEPTH = 2  # maximum_parallel_iterations when the run's config does not say
DEPTHS = (2, 4, 8)  # prefetch depths a tuner tries
INPUT_EVENTS = 20  # host input work names in the host_input_events figure, longest first


def gaps(ctx: RunContext) -> pa.Table:
    """All gaps with their cause (cached per context)."""

    def compute() -> pa.Table:
        median = ctx.step_median_ps() or 0
        a = op_arrays(ctx)
        forward = a.with_category(ctx, "sc_forward")
        g = gap_search.find_gaps(a, max(MIN_GAP_PS, int(median * MIN_GAP_SHARE)), forward)
        b = gap_search.find_blockers(a, gap_search.end_index(a), g)
        blocker = np.maximum(b["blocker_row"], 0)  # what the classification reads of each blocker
        has = b["blocker_row"] >= 0
        b_track = np.where(has, a.track_id[a.track_of(blocker)], -1)
        b_category = np.where(has, a.category_scan[a.source[blocker]], -1)
        b_name = np.where(has, a.name_scan[a.source[blocker]], -1)
        h2d = np.flatnonzero(a.with_category(ctx, "host_to_device") & (a.step != NO_STEP))
        (ready_step,), ready = gap_search.first_by_group([a.step[h2d]], a.end[h2d], last=True)
        fwd = np.flatnonzero(forward & (a.step != NO_STEP))
        fwd_chip = a.track_chip[a.track_of(fwd)]
        (f_chip, f_step), f_first = gap_search.first_by_group([fwd_chip, a.step[fwd]], a.start[fwd])
        bwd = np.flatnonzero(a.with_category(ctx, "sc_backward") & (a.step != NO_STEP))
        bwd_chip = a.track_chip[a.track_of(bwd)]
        (u_chip, u_step), u_end = gap_search.first_by_group([bwd_chip, a.step[bwd]], a.end[bwd], last=True)
        tables = {
            "found_gaps": _table(
                {
                    "track_id": a.track_id[g["track"]],
                    "step": g["step"],
                    "gap_start_ps": g["start"],
                    "gap_end_ps": g["end"],
                    "next_fwd_step": g["next_fwd_step"],
                    "blocker_track_id": b_track,
                    "blocker_category_id": b_category,
                    "blocker_name_id": b_name,
                    "blocker_step": b["blocker_step"],
                    "blocker_end_ps": b["blocker_end_ps"],
                    "unrelated_ps": b["unrelated_ps"],
                },
                nulls=(
                    "step",
                    "next_fwd_step",
                    "blocker_track_id",
                    "blocker_category_id",
                    "blocker_name_id",
                    "blocker_step",
                    "blocker_end_ps",
                    "unrelated_ps",
                ),
            ),
            "input_ready": _table({"step": ready_step, "ready_ps": ready}),
            "first_forward": _table({"chip": f_chip, "step": f_step, "first_ps": f_first}),
            "embedding_updates": _table({"chip": u_chip, "step": u_step, "end_ps": u_end}),
        }
        return ctx.sql(
            "analysis.idle.idle_gaps", tables, tol_ps=int(median * INPUT_TOLERANCE_SHARE), lag=update_lag(ctx)
        )

    return ctx.memo("idle_gaps", compute)


def update_lag(ctx: RunContext) -> int:
    """How many steps back lies the embedding update a SparseCore forward waits for: 2 with the
    embedding pipeline on (gradients visible two steps later), 1 with it off (the run's config,
    flags.tf_xla_disable_full_embedding_pipelining; on when the run does not say)."""
    flags = ctx.config.get("flags") or {}
    return 1 if flags.get("tf_xla_disable_full_embedding_pipelining") else 2


def _busy_chips(ctx: RunContext, track_kind: str) -> pa.Table:
    """The chip of each op track of one kind that has events (one row per track)."""
    a = op_arrays(ctx)
    busy = (np.diff(a.bounds) > 0) & a.track_op_line & (a.track_kind == KIND_CODES[track_kind])
    return pa.table({"chip": a.track_chip[busy]})


def track_time_ps(ctx: RunContext, track_kind: str) -> int:
    """Time the op tracks of one kind were observed: step windows x op tracks with events, per chip."""
    rows = ctx.sql("analysis.idle.observed_ps", {"busy_chips": _busy_chips(ctx, track_kind)}).to_pylist()
    return int(rows[0]["t"] or 0)


def host_wait_rows(ctx: RunContext) -> pa.Table:
    """step, wait_ps, observed_ps: per counted step, the TensorCores' time waiting for host input
    and their op tracks' observed time (cached per context)."""
    return ctx.memo(
        "host_wait_rows",
        lambda: ctx.sql(
            "analysis.idle.host_wait_by_step", {"gaps": gaps(ctx), "busy_chips": _busy_chips(ctx, "tensorcore")}
        ),
    )


def host_wait_by_step(ctx: RunContext) -> np.ndarray:
    """Per counted step (in order), the share of the TensorCores' observed time they waited for
    host input: the per-step series of the host_bound finding's share."""
    t = host_wait_rows(ctx)
    wait = t.column("wait_ps").to_numpy().astype(np.float64)
    observed = t.column("observed_ps").to_numpy().astype(np.float64)
    return per_counted_step(
        ctx.counted_steps(),
        t.column("step").to_numpy(),
        np.divide(wait, observed, out=np.zeros(len(wait)), where=observed > 0),
    )


def tensorcore_by_step(ctx: RunContext) -> list[dict]:
    """Per counted step: `host_wait_ps` (the TensorCores' time waiting for host input) and
    `observed_ps` (their op tracks' time in the step's windows); summed over the steps, the
    tensorcore.host figure's gap_ps and its share's denominator (the Input page's series).
    Empty without TensorCore tracks."""
    if not len(_busy_chips(ctx, "tensorcore")):
        return []
    t = host_wait_rows(ctx).to_pylist()
    return [
        {"step": int(r["step"]), "host_wait_ps": int(r["wait_ps"]), "observed_ps": int(r["observed_ps"])} for r in t
    ]


def _table(cols: dict[str, np.ndarray], nulls: tuple[str, ...] = ()) -> pa.Table:
    """Columns as an Arrow table; in the `nulls` columns, -1 (no step, no event) is NULL."""
    return pa.table({k: pa.array(v, mask=(v == -1)) if k in nulls else pa.array(v) for k, v in cols.items()})


def causes(ctx: RunContext, track_kind: str) -> dict[str, dict]:
    """Gap count, time and share of the kind's observed time, per cause, for one kind of core,
    over the counted steps (the steps every summary covers)."""
    total = track_time_ps(ctx, track_kind)
    rows = ctx.sql("analysis.idle.gap_causes", {"gaps": gaps(ctx)}, track_kind=track_kind).to_pylist()
    return {
        r["cause"]: {"gaps": r["gaps"], "gap_ps": r["gap_ps"], "share": r["gap_ps"] / total if total else 0.0}
        for r in rows
    }


def analyze(ctx: RunContext) -> Analysis:
    table = gaps(ctx)
    result = Analysis(NAME, tables={"idle_gaps": table})
    waits = device_wait.waits(ctx)
    if not waits and not ctx.sql("analysis.idle.tpu_tracks").column("n")[0].as_py():
        result.notes.append(
            "no device tracks (TensorCore, SparseCore, GPU or a CPU running XLA ops): idle gaps are measured on devices"
        )
    result.figures = {
        "gaps": table.num_rows,
        "tensorcore": causes(ctx, "tensorcore"),
        "sparsecore": causes(ctx, "sparsecore"),
    }
    if events := device_wait.host_input_events(ctx, limit=INPUT_EVENTS):
        result.figures["host_input_events"] = events
    if tc_steps := tensorcore_by_step(ctx):
        result.figures["tensorcore_by_step"] = tc_steps
    if waits:
        result.figures["device"] = waits
        result.figures["device_by_step"] = device_wait.by_step(ctx, waits)
        if f := device_wait.host_bound_finding(ctx, waits):
            result.findings.append(f)
    result.tables["idle_by_step"] = ctx.sql("analysis.idle.idle_by_step", {"gaps": table})
    host = result.figures["tensorcore"].get("host")
    if host and host["share"] > HOST_SHARE:
        counted = pa.array(ctx.counted_steps(), table.column("step").type)
        host_gaps = table.filter(
            pc.and_(
                pc.and_(pc.equal(table.column("cause"), "host"), pc.equal(table.column("track_kind"), "tensorcore")),
                pc.is_in(table.column("step"), value_set=counted),
            )
        )
        steps = sorted(set(host_gaps.column("step").to_pylist()) - {None})
        chips = sorted(set(host_gaps.column("chip").to_pylist()))
        result.findings.append(_host_bound(ctx, result.figures, host, chips, steps))
    return result


def host_throughput(ctx: RunContext) -> dict[str, float | int | None]:
    """How busy the input threads are: host preprocessing time of the counted steps over
    (input threads x the counted steps' time). Near 1 the threads cannot prepare steps any
    faster, so only more threads (or cheaper preprocessing) help; well below 1 they idle
    while the device waits, so preparing further ahead (prefetch depth) helps. Threads are
    the host tracks that ran preprocessing."""
    r = ctx.sql("analysis.idle.host_throughput").to_pylist()[0]
    threads, host_ps, step_ps, steps = r["threads"], r["host_ps"], r["step_ps"], r["steps"]
    if not threads or not host_ps or not step_ps:
        return {"input_threads": threads or None, "host_ps_per_step": None, "input_thread_busy_share": None}
    return {
        "input_threads": int(threads),
        "host_ps_per_step": host_ps / threads / steps,  # one step's preprocessing, spread over the threads
        "input_thread_busy_share": host_ps / (threads * step_ps),
    }


def _deeper(depth: int | None) -> list[int]:
    """Prefetch depths beyond the current one (DEPTHS), or twice and four times it."""
    now = depth or DEFAULT_DEPTH
    return [d for d in DEPTHS if d > now] or [now * 2, now * 4]


def _host_bound(ctx: RunContext, figures: dict, host: dict, chips: list, steps: list) -> Finding:
    """The TensorCores wait for host input: short of input throughput (threads saturated: more
    threads) or of prefetch depth (threads idle while the device waits: prefetch further ahead)."""
    thr = host_throughput(ctx)
    busy = thr["input_thread_busy_share"]
    flags = ctx.config.get("flags") or {}
    depth = flags.get("maximum_parallel_iterations")
    threads = (ctx.config.get("host") or {}).get("num_threads") or thr["input_threads"]
    evidence = {
        "gaps": host["gaps"],
        "idle_ps": host["gap_ps"],
        "sparsecore_input_wait_share": figures["sparsecore"].get("host", {}).get("share", 0.0),
        **thr,
        "prefetch_depth": depth,
    }
    if busy is not None and busy >= SATURATED and threads:
        cause = "throughput"
        more = [threads * k for k in (2, 4)]
        # the other input lever, explored second: a deeper prefetch helps once threads keep up
        fix = make_fix(
            set={"host.num_threads": more[0]},
            explore={
                "host.num_threads": [-(-threads * 3 // 2), *more],
                "flags.maximum_parallel_iterations": _deeper(depth),
            },
        )
        recommendation = (
            f"The host lacks throughput: its {threads} input threads are busy {busy:.0%} of the step time "
            f"(one step's preprocessing takes {thr['host_ps_per_step'] / 1e6:.0f} us of thread time per thread), so "
            "they cannot prepare steps as fast as the device runs them and a deeper prefetch changes nothing. "
            f"Run more input threads (host.num_threads={more[0]}) or make preprocessing cheaper (fewer IDs per sample)."
        )
    else:
        cause = "prefetch_depth"
        deeper = _deeper(depth)
        explore: dict = {"flags.maximum_parallel_iterations": deeper}
        if threads:  # the other input lever, explored second: more threads once the prefetch is deep enough
            explore["host.num_threads"] = [threads * 2, threads * 4]
        fix = make_fix(set={"flags.maximum_parallel_iterations": deeper[0]}, explore=explore)
        recommendation = (
            "The prefetch is too short: "
            + (
                f"the input threads are busy only {busy:.0%} of the step time, so the host has the throughput, "
                if busy is not None
                else ""
            )
            + f"but it starts a step's preprocessing too late (maximum_parallel_iterations={depth if depth else '?'}). "
            f"Prefetch more steps (flags.maximum_parallel_iterations={deeper[0]}) so preprocessing runs ahead of the "
            "device; each prefetched step holds its inputs in HBM."
        )
    evidence["cause"] = cause
    per_step = host_wait_by_step(ctx)
    dist = step_distribution(per_step, HOST_SHARE)
    evidence |= {
        "per_step_median_share": dist["median"],
        "per_step_p90_share": dist["p90"],
        "steps_affected": dist["steps_affected"],
        "steps": dist["steps"],
    }
    spread = spread_text(dist, "{:.0%}", f"{HOST_SHARE:.0%}")
    return Finding(
        rule="host_bound",
        severity=spread_severity(
            "critical" if host["share"] > HOST_CRITICAL_SHARE else "warning", per_step, HOST_CRITICAL_SHARE
        ),
        title=(
            f"Host-bound input: the TensorCores wait for host input {format_value(host['share'], 'share')} of the time ("
            + (f"{spread}; " if spread else "")
            + ("the input threads are saturated)" if cause == "throughput" else "the prefetch is too short)")
        ),
        metric="host_wait_share",
        value=host["share"],
        unit="share of TensorCore time",
        recommendation=recommendation,
        evidence=evidence,
        entities={"chips": chips, "steps": steps},
        evidence_sql=sqltree.show("analysis.idle.host_bound_evidence", run=ctx.run_id),
        fix=fix,
    )

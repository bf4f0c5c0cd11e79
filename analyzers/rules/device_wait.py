"""What a GPU, a CPU running XLA ops or another device waits for inside its steps.

On these devices (profiler/xspace/map_kinds.py: real captures) a step is its host's step, and
the device is idle for every instant the step breakdown (analyzers/rules/breakdown.py) gives to no
device category: device work outranks host work in the split, so the split's host
categories *are* the device's idle time, classed by what the host did meanwhile:

    host_preprocess  the host ran input work (reading, preprocessing, an input iterator):
                     the device waited for its input, the host-bound case
    host_to_device   only a host-to-device copy ran: the device waited for the transfer
    host_launch      the host launched or dispatched device work (kernel launches, XLA's
                     executable dispatch): launch overhead
    host_other       the host ran other work (the training loop, the runtime)
    idle             nothing anywhere

Shares are of the counted steps' device time (step_times.counted), summed over the chips.

What the host ran is not always what the device waited for: input work prepared ahead (a
prefetching thread pool) runs during the device's idle time without holding it up. The
host-bound figure, host_input_wait_share, counts only input work the device *awaited*: in
each idle gap of a chip (no device op active, inside a counted step), the input events that
ended inside the gap, from the first one's start (or the gap's) to the last one's end.
TensorCore and SparseCore gaps have their own, op-by-op attribution (analyzers/rules/idle_gaps.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Finding, per_counted_step, spread_severity, spread_text, step_distribution
from analyzers.rules.breakdown import counted_rows, step_breakdown
from profiler import sqltree
from profiler.units import format_value

DEVICE_KINDS = ("gpu", "cpu", "device")
DEVICE_CATEGORIES = ("device_compute", "device_collective", "device_memcpy")
WAIT_CAUSES = {
    "host_preprocess": "host_input",
    "host_to_device": "input_transfer",
    "host_launch": "launch",
    "host_other": "host_other",
    "idle": "idle",
}  # breakdown category -> cause of the device's wait
HOST_INPUT_SHARE = 0.05  # device time spent waiting for host input above this share is a finding
CRITICAL_SHARE = 0.2  # ... critical above this share, when the median counted step waits that long too


def device_chips(ctx: RunContext) -> list[int]:
    """The run's chips that are GPUs, CPUs running XLA ops or other non-TPU devices."""
    return ctx.sql("analysis.idle.device_chips", kinds=list(DEVICE_KINDS)).column("chip").to_pylist()


def waits(ctx: RunContext) -> dict | None:
    """Device time, busy share and wait shares by cause over the counted steps (None: no such device)."""
    chips = device_chips(ctx)
    if not chips:
        return None
    split = counted_rows(step_breakdown(ctx), ctx.step_times())
    split = split.filter(pc.is_in(split.column("chip"), value_set=pa.array(chips, split.column("chip").type)))
    total = int(pc.sum(split.column("dur_ps")).as_py() or 0)
    sums = split.group_by("category").aggregate([("dur_ps", "sum")])
    by_cat = dict(zip(sums.column("category").to_pylist(), sums.column("dur_ps_sum").to_pylist(), strict=True))
    share = {c: (by_cat.get(c, 0) / total if total else 0.0) for c in (*DEVICE_CATEGORIES, *WAIT_CAUSES)}
    awaited = awaited_input_ps(ctx, chips)
    return {
        "chips": chips,
        "device_ps": total,
        "busy_share": sum(share[c] for c in DEVICE_CATEGORIES),
        "wait_share": {cause: share[cat] for cat, cause in WAIT_CAUSES.items()},
        "host_input_wait_ps": awaited,
        "host_input_wait_share": awaited / total if total else 0.0,
    }


def awaited_input_ps(ctx: RunContext, chips: list[int]) -> int:
    """Device idle time spent awaiting host input, summed over `chips` and the counted steps' windows."""
    return int(awaited_input_by_step(ctx, chips)[1].sum())


def awaited_input_by_step(ctx: RunContext, chips: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(step, awaited_ps): device idle time spent awaiting host input per counted step window,
    one row per chip and window (cached per context and chips)."""
    return ctx.memo(f"awaited_input_by_step{sorted(chips)}", lambda: _awaited_by_window(ctx, chips))


def _awaited_by_window(ctx: RunContext, chips: list[int]) -> tuple[np.ndarray, np.ndarray]:
    windows = ctx.sql("analysis.idle.counted_windows")
    ops = ctx.sql("analysis.idle.device_ops")
    inputs = ctx.sql("analysis.idle.host_inputs")
    i_start, i_end = inputs.column("start_ps").to_numpy(), inputs.column("end_ps").to_numpy()
    steps, awaited = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for chip in chips:
        w = windows.filter(pc.equal(windows.column("chip"), chip))
        o = ops.filter(pc.equal(ops.column("chip"), chip))
        g_start, g_end, g_win = free_intervals(
            o.column("start_ps").to_numpy(),
            o.column("end_ps").to_numpy(),
            w.column("start_ps").to_numpy(),
            w.column("end_ps").to_numpy(),
            with_window=True,
        )
        if not len(g_start):  # a chip without counted step windows, or never idle in them
            continue
        # Each input event ending inside a gap (start, end] was awaited by it.
        k = np.searchsorted(g_start, i_end, side="left") - 1
        inside = (k >= 0) & (i_end <= g_end[np.maximum(k, 0)]) & (i_end > g_start[np.maximum(k, 0)])
        first = np.full(len(g_start), np.iinfo(np.int64).max)
        last = np.zeros(len(g_start), np.int64)
        np.minimum.at(first, k[inside], i_start[inside])
        np.maximum.at(last, k[inside], i_end[inside])
        has = last > 0
        per_window = np.zeros(w.num_rows, np.int64)
        np.add.at(per_window, g_win[has], last[has] - np.maximum(first[has], g_start[has]))
        steps.append(w.column("step").to_numpy())
        awaited.append(per_window)
    return np.concatenate(steps), np.concatenate(awaited)


def free_intervals(
    op_start: np.ndarray, op_end: np.ndarray, w_start: np.ndarray, w_end: np.ndarray, with_window: bool = False
):
    """(start, end) of the instants inside the windows (sorted, disjoint) where no op is active;
    with `with_window`, also each piece's window (its index in w_start)."""
    order = np.argsort(op_start, kind="stable")
    s, e = op_start[order], np.maximum.accumulate(op_end[order])
    # busy intervals: a new one starts where an op starts after every earlier op ended; each
    # ends at the running maximum of the ends at its last op
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    b_start, b_end = s[new], e[np.r_[new[1:], True]] if len(s) else e
    # idle = each window minus the busy intervals: the complement's pieces, clipped to windows
    edges_s = np.concatenate([[np.iinfo(np.int64).min], b_end])
    edges_e = np.concatenate([b_start, [np.iinfo(np.int64).max]])
    lo = np.searchsorted(edges_e, w_start, side="right")  # first free piece that ends after the window starts
    hi = np.searchsorted(edges_s, w_end, side="left")  # pieces that start before the window ends
    counts = np.maximum(hi - lo, 0)
    idx = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    win = np.repeat(np.arange(len(w_start)), counts)
    gs = np.maximum(edges_s[idx], w_start[win])
    ge = np.minimum(edges_e[idx], w_end[win])
    keep = ge > gs
    return (gs[keep], ge[keep], win[keep]) if with_window else (gs[keep], ge[keep])


def host_input_events(ctx: RunContext, limit: int = 3) -> list[dict]:
    """The host input work of the counted steps, by name, longest first (what the device waited for)."""
    return ctx.sql("analysis.idle.host_input_events", limit=int(limit)).to_pylist()


def by_step(ctx: RunContext, w: dict) -> list[dict]:
    """Per counted step (in order), the devices' time summed over the chips: `device_ps` (the step's
    device time), `busy_ps` (device categories), `host_input_idle_ps` (idle while the host ran input
    work: the host_preprocess category) and `host_input_wait_ps` (idle awaiting host input, as
    host_input_wait_ps). Summed over the steps they are the totals behind device_ps, busy_share,
    wait_share.host_input and host_input_wait_ps: the Input page's series."""
    counted = ctx.counted_steps()
    split = counted_rows(step_breakdown(ctx), ctx.step_times())
    split = split.filter(pc.is_in(split.column("chip"), value_set=pa.array(w["chips"], split.column("chip").type)))
    step, cat, dur = (split.column(c).to_numpy(zero_copy_only=False) for c in ("step", "category", "dur_ps"))
    device_ps = per_counted_step(counted, step, dur)
    busy_ps = per_counted_step(counted, step, np.where(np.isin(cat, DEVICE_CATEGORIES), dur, 0))
    input_ps = per_counted_step(counted, step, np.where(cat == "host_preprocess", dur, 0))
    a_step, awaited = awaited_input_by_step(ctx, w["chips"])
    awaited_ps = per_counted_step(counted, a_step, awaited)
    return [
        {
            "step": int(s),
            "device_ps": int(d),
            "busy_ps": int(b),
            "host_input_idle_ps": int(i),
            "host_input_wait_ps": int(a),
        }
        for s, d, b, i, a in zip(counted, device_ps, busy_ps, input_ps, awaited_ps, strict=True)
    ]


def host_input_wait_by_step(ctx: RunContext, w: dict) -> np.ndarray:
    """Per counted step (in order), the share of the step's device time (summed over the chips)
    the devices spent awaiting host input: the per-step series of host_input_wait_share."""
    rows = by_step(ctx, w)
    device_ps = np.array([r["device_ps"] for r in rows], np.float64)
    awaited_ps = np.array([r["host_input_wait_ps"] for r in rows], np.float64)
    return np.divide(awaited_ps, device_ps, out=np.zeros(len(rows)), where=device_ps > 0)


def host_bound_finding(ctx: RunContext, w: dict) -> Finding | None:
    """The host-bound finding when the device waits for host input more than HOST_INPUT_SHARE
    of its time; critical above CRITICAL_SHARE when the median counted step waits more than
    CRITICAL_SHARE too (findings.spread_severity: a few slow steps may carry the mean)."""
    share = w["host_input_wait_share"]
    if share <= HOST_INPUT_SHARE:
        return None
    per_step = host_input_wait_by_step(ctx, w)
    dist = step_distribution(per_step, HOST_INPUT_SHARE)
    top = host_input_events(ctx)
    named = ", ".join(r["name"] for r in top) or "host input work"
    steps = ctx.step_times()
    return Finding(
        rule="host_bound",
        severity=spread_severity("critical" if share > CRITICAL_SHARE else "warning", per_step, CRITICAL_SHARE),
        title=(
            f"Host-bound input: the device waits for host input {format_value(share, 'share')} of its step time"
            + (f" ({spread})" if (spread := spread_text(dist, "{:.0%}", f"{HOST_INPUT_SHARE:.0%}")) else "")
        ),
        metric="host_wait_share",
        value=share,
        unit="share of device step time",
        recommendation=(
            f"The device sits idle while the host prepares the next batch ({named}). Prefetch: prepare "
            "batches ahead of the training loop in background threads or processes (a thread pool, "
            "tf.data prefetch, a grain/DataLoader with workers); use more input workers; or make the "
            "preprocessing cheaper (vectorise it, move it to the device, cache its results)." + _few_steps_note(dist)
        ),
        evidence={
            "device_busy_share": w["busy_share"],
            "host_input_wait_ps": w["host_input_wait_ps"],
            "wait_share": {f"{cause}_share": v for cause, v in w["wait_share"].items()},
            "device_ps": w["device_ps"],
            "host_input_events": top,
            "counted_steps": int(pc.sum(steps.column("counted")).as_py() or 0),
            "per_step_median_share": dist["median"],
            "per_step_p90_share": dist["p90"],
            "steps_affected": dist["steps_affected"],
            "steps": dist["steps"],
        },
        entities={"chips": w["chips"], "steps": pc.filter(steps.column("step"), steps.column("counted")).to_pylist()},
        evidence_sql=sqltree.show("analysis.idle.host_input_evidence", run=int(ctx.run_id)),
    )


def _few_steps_note(dist: dict) -> str:
    """A sentence for a recommendation whose mean a minority of the steps carries."""
    if not dist["steps"] or dist["steps_affected"] * 2 >= dist["steps"]:
        return ""
    return (
        f" Only {dist['steps_affected']} of {dist['steps']} steps wait this long: the typical step waits "
        f"{dist['median']:.0%}, so look at what the slow steps do differently (a cold cache, a larger batch, "
        "a pause of the input workers)."
    )

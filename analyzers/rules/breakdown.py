"""Step-time breakdown: where each step's time goes, per chip.

The one definition of the breakdown is `split_windows`: the store's step windows
(profiler/sql/stdlib/steps.sql: step_windows) split by a sweep over the op events (analyzers/
time_split.py: each instant of a window to the highest-priority category active, so a
window's categories sum to its length). The analyzers split the whole run at once; the
Perfetto export calls the same function span by span (the split is additive over time);
the UI reads the analyzers' table. A second view of the same sweep, per-core-kind busy
time (CORE_SETS), feeds the overlap analysis. Summaries of the split (shares) cover the
counted steps (step_times.counted), like every per-step summary.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis
from analyzers.op_arrays import OpArrays, op_arrays
from analyzers.time_split import CATEGORIES, split_runs
from profiler.stdlib import steps_covered

NAME = "breakdown"
QUESTION = "Where does each step's time go: host, SparseCore, TensorCore, collectives or idle?"


# The sets the overlap analysis splits time into (bit 0: a TensorCore op, bit 1: a SparseCore op).
CORE_SETS = ("none", "tc_only", "sc_only", "both")
# The views of the sweep: "priority", the wall-time split into timeline.CATEGORIES (the
# breakdown); "core_kind", the time by the set of busy core kinds (the overlap analysis).
PRIORITY = {"priority": (CATEGORIES, False)}
VIEWS = {**PRIORITY, "core_kind": (CORE_SETS, True)}


def split_windows(
    ctx: RunContext, windows: pa.Table, span: tuple[int, int] | None = None, views: dict = PRIORITY
) -> dict[str, pa.Table]:
    """THE step breakdown: chip, step, category, dur_ps per step window of `windows` (chip,
    step, start_ps, end_ps; a chip's windows never overlap), one table per view of `views`.

    The op events are the whole run's (op_arrays, cached per context) or, with `span`
    (lo, hi), those overlapping [lo, hi), for windows inside the span."""
    return _prepare(ctx, windows, span, views)()


def _prepare(ctx: RunContext, windows: pa.Table, span: tuple[int, int] | None, views: dict):
    """Read what split_windows needs from the store (in the caller's thread, which owns the
    connection); return the computation (numpy and C only, safe in another thread).

    Each op_arrays track is time-ordered already: a chip's runs are its tracks and the host's."""
    # a scan of the run's events: once per context (the Perfetto export prepares span by span)
    kinds = ctx.memo("timeline_kinds", lambda: ctx.sql("analysis.split.timeline_kinds"))
    a = op_arrays(ctx, span)
    tracks = np.column_stack([a.bounds[:-1], a.bounds[1:]])
    runs = {
        c: tracks[(a.track_chip == c) | (a.track_chip < 0)]  # the host's work counts on every chip
        for c in np.unique(windows.column("chip").to_numpy()).tolist()
    }
    row = row_kinds(a, kinds)
    return lambda: split_runs(a.start, a.end, {v: row[v] for v in views}, runs, windows, views)


def timeline_splits(ctx: RunContext) -> dict[str, pa.Table]:
    """split_windows of the run's step windows, both VIEWS, from one sweep (cached)."""
    return start_timeline_splits(ctx).result()


def start_timeline_splits(ctx: RunContext) -> Future:
    """Start timeline_splits' sweep in a background thread (cached per context): the C sweep
    releases the GIL, so analyzers that run meanwhile overlap it (registry.analyze_run)."""

    def start() -> Future:
        windows = ctx.sql("analysis.split.step_windows")
        split = _prepare(ctx, windows, None, VIEWS)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timeline_splits")
        future = pool.submit(split)
        pool.shutdown(wait=False)  # the thread ends with its task
        return future

    return ctx.memo("timeline_splits", start)


def row_kinds(a: OpArrays, kinds: pa.Table) -> dict[str, np.ndarray]:
    """Per op_arrays row, its priority and core_kind (int8), looked up by (track, category) in
    `kinds` (the rows of analysis.split.timeline_kinds)."""
    cats = np.unique(kinds.column("category_id").to_numpy())  # string ids, -1 for none
    cat_of = np.zeros(int(cats.max()) + 2 if len(cats) else 1, np.int32)
    cat_of[cats + 1] = np.arange(len(cats))
    cell = (
        np.searchsorted(a.track_id, kinds.column("track_id").to_numpy()) * len(cats)
        + cat_of[kinds.column("category_id").to_numpy() + 1]
    )
    # per row, its cell in the (track, category) tables
    key = np.repeat(np.arange(len(a.track_id), dtype=np.int32) * len(cats), np.diff(a.bounds))
    if len(cats) > 1:
        key += cat_of[a.category_scan + 1][a.source]
    out = {}
    for view in ("priority", "core_kind"):
        table = np.full(len(a.track_id) * len(cats), -1, np.int8)
        table[cell] = kinds.column(view).to_numpy()
        out[view] = table[key]
    return out


def step_breakdown(ctx: RunContext) -> pa.Table:
    """chip, step, category, dur_ps: the wall-time split of every step window (cached)."""
    return timeline_splits(ctx)["priority"]


def step_stats(step_ps: np.ndarray) -> dict[str, float]:
    """THE summary of step times (pass the counted ones, step_times.counted): step_ps_mean,
    step_ps_p50 and step_ps_p90 (numpy's linear percentiles), as analyze, compare and the UI show them."""
    ps = np.asarray(step_ps, np.float64)
    return {
        "step_ps_mean": float(np.mean(ps)),
        "step_ps_p50": float(np.percentile(ps, 50)),
        "step_ps_p90": float(np.percentile(ps, 90)),
    }


def counted_rows(split: pa.Table, step_times: pa.Table) -> pa.Table:
    """The rows of a split (chip, step, ...) whose step step_times (step, counted) counts."""
    counted = pc.filter(step_times.column("step"), step_times.column("counted"))
    return split.filter(pc.is_in(split.column("step"), value_set=counted.combine_chunks()))


def shares(split: pa.Table) -> dict[str, float]:
    """Each category's share of the split's time (categories sorted by name)."""
    total = max(int(pc.sum(split.column("dur_ps")).as_py() or 0), 1)
    return {
        c: int(pc.sum(pc.filter(split.column("dur_ps"), pc.equal(split.column("category"), c))).as_py() or 0) / total
        for c in sorted(set(split.column("category").to_pylist()))
    }


def _why_no_split(ctx: RunContext) -> str:
    """Why step_windows is empty: no steps at all, or steps only on a host-only capture."""
    r = ctx.sql("analysis.split.run_shape").to_pylist()[0]
    if not r["device"]:
        return (
            f"no device tracks (a host-only capture without XLA ops; {r['steps']} steps marked on the host): "
            "step time is the host's, and its split by category is measured on device chips only"
        )
    return "the run has no steps (no step markers and no events tagged with a step)"


def analyze(ctx: RunContext) -> Analysis:
    split = step_breakdown(ctx)
    result = Analysis(NAME, tables={"step_breakdown": split})
    steps = ctx.step_times()
    result.tables["step_times"] = steps
    if split.num_rows == 0:
        result.notes.append(_why_no_split(ctx))
    if steps.num_rows == 0:
        return result
    step_ps = ctx.counted_step_ps().to_numpy()
    result.figures = {
        "steps": len(step_ps),  # counted steps: what the summaries below cover
        "steps_recorded": steps.num_rows,
        "covers": steps_covered(steps.column("step").to_pylist(), steps.column("counted").to_pylist()),
        **step_stats(step_ps),
        **ctx.sql("analysis.run.slow_steps").to_pylist()[0],  # slow_steps, slow_steps_time_share
    }
    if split.num_rows:
        result.figures["share"] = shares(counted_rows(split, steps))
    result.figures.update(hbm_bandwidth(ctx, steps))
    return result


def hbm_bandwidth(ctx: RunContext, steps: pa.Table) -> dict[str, float | None]:
    """HBM traffic of the counted steps (analysis.split.hbm_traffic): bytes per chip and step, the
    bandwidth that is per step (bytes / step time, mean over chips and steps) and its share
    of the chip's `hbm_bandwidth_bytes_per_s` (None when the run does not know it). Empty when
    no op records bytes (a capture without them)."""
    traffic = ctx.sql("analysis.split.hbm_traffic")
    step_ps = dict(zip(steps.column("step").to_pylist(), steps.column("step_ps").to_pylist(), strict=True))
    counted = set(pc.filter(steps.column("step"), steps.column("counted")).to_pylist())
    rows = [
        (b, step_ps[s])
        for s, b in zip(traffic.column("step").to_pylist(), traffic.column("hbm_bytes").to_pylist(), strict=True)
        if s in counted and step_ps.get(s)
    ]
    if not rows:
        return {}
    bw = float(np.mean([b / (ps / 1e12) for b, ps in rows]))
    peak = ctx.hardware("hbm_bandwidth_bytes_per_s")
    return {
        "hbm_bytes_per_step": float(np.mean([b for b, _ in rows])),
        "hbm_bandwidth_bytes_per_s": bw,
        "hbm_bandwidth_share": bw / peak if peak else None,
    }

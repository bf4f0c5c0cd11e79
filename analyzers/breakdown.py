"""Step-time breakdown: where each step's time goes, per chip.

Two views: the wall-time split (each instant of a step to the highest-priority
category active, so categories sum to the step time; analyzers/timeline.py) and
per-core busy time (the union of each core's events per step and category, so
overlapping events on one core count once).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.context import RunContext
from analyzers.findings import Analysis
from analyzers.op_arrays import OpArrays, op_arrays
from analyzers.timeline import CATEGORIES, split_runs

NAME = "breakdown"
QUESTION = "Where does each step's time go: host, SparseCore, TensorCore, collectives or idle?"


# The sets the overlap analysis splits time into (bit 0: a TensorCore op, bit 1: a SparseCore op).
CORE_SETS = ("none", "tc_only", "sc_only", "both")


def timeline_splits(ctx: RunContext) -> dict[str, pa.Table]:
    """chip, step, category, dur_ps per step window, from one sweep over the op events (cached):
    "priority", the wall-time split into timeline.CATEGORIES; "core_kind", the time by the
    set of busy core kinds (CORE_SETS) that the overlap analysis reads."""
    return start_timeline_splits(ctx).result()


def start_timeline_splits(ctx: RunContext) -> Future:
    """Start timeline_splits' sweep in a background thread (cached per context): the C sweep
    releases the GIL, so analyzers that run meanwhile overlap it (registry.analyze_run).

    The events are op_arrays' (loaded once per context, for the idle-gap search too), each
    track already in time order: a chip's runs are its tracks and the host's. The store is
    read here, in the caller's thread; the background thread only computes (numpy and C)."""

    def start() -> Future:
        windows = ctx.store.query(f"SELECT chip, step, start_ps, end_ps FROM {ctx.temp('step_windows')}")
        kinds = ctx.store.query(f"SELECT track_id, category_id, priority, core_kind FROM {ctx.temp('timeline_kinds')}")
        a = op_arrays(ctx)
        tracks = np.column_stack([a.bounds[:-1], a.bounds[1:]])
        runs = {c: tracks[(a.track_chip == c) | (a.track_chip < 0)]  # the host's work counts on every chip
                for c in np.unique(windows.column("chip").to_numpy()).tolist()}  # fmt: skip
        views = {"priority": (CATEGORIES, False), "core_kind": (CORE_SETS, True)}

        def split() -> dict[str, pa.Table]:
            return split_runs(a.start, a.end, row_kinds(a, kinds), runs, windows, views)

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timeline_splits")
        future = pool.submit(split)
        pool.shutdown(wait=False)  # the thread ends with its task
        return future

    return ctx.memo("timeline_splits", start)


def row_kinds(a: OpArrays, kinds: pa.Table) -> dict[str, np.ndarray]:
    """Per op_arrays row, its priority and core_kind (int8, as sql/timeline_events.sql gives them),
    looked up by (track, category) in `kinds` (the rows of sql/timeline_kinds.sql)."""
    cats = np.unique(kinds.column("category_id").to_numpy())  # string ids, -1 for none
    cat_of = np.zeros(int(cats.max()) + 2 if len(cats) else 1, np.int32)
    cat_of[cats + 1] = np.arange(len(cats))
    cell = (np.searchsorted(a.track_id, kinds.column("track_id").to_numpy()) * len(cats)
            + cat_of[kinds.column("category_id").to_numpy() + 1])  # fmt: skip
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


def _why_no_steps(ctx: RunContext) -> str:
    """Why step_windows is empty: no steps at all, or steps only on a host-only capture."""
    r = ctx.store.rows(
        """SELECT (SELECT count(DISTINCT step) FROM steps WHERE run_id = $run) AS steps,
                  (SELECT count(*) FROM tracks WHERE run_id = $run AND kind IN ('tensorcore', 'sparsecore')) AS device""",
        {"run": ctx.run_id},
    )[0]
    if not r["device"]:
        return (f"no TensorCore or SparseCore tracks (a host-only capture, e.g. JAX on the CPU; {r['steps']} steps "
                "marked on the host): step time and its split are measured on device chips")  # fmt: skip
    return "the run has no steps (no step markers and no events tagged with a step)"


def analyze(ctx: RunContext) -> Analysis:
    split = step_breakdown(ctx)
    result = Analysis(NAME, tables={"step_breakdown": split})
    steps = ctx.step_times()
    result.tables["step_times"] = steps
    if steps.num_rows == 0:
        result.notes.append(_why_no_steps(ctx))
        return result
    step_ps = steps.column("step_ps").to_numpy()
    total = max(int(pc.sum(split.column("dur_ps")).as_py() or 0), 1)
    share = {
        c: int(pc.sum(pc.filter(split.column("dur_ps"), pc.equal(split.column("category"), c))).as_py() or 0) / total
        for c in sorted(set(split.column("category").to_pylist()))
    }
    result.figures = {
        "steps": len(step_ps),
        "step_ps_mean": float(np.mean(step_ps)),
        "step_ps_p50": float(np.percentile(step_ps, 50)),
        "step_ps_p90": float(np.percentile(step_ps, 90)),
        "share": share,
    }
    return result

"""The store's device_idle rows, with each core's busy time computed from the shared op scan.

The definition is the stdlib's (profiler/sql/stdlib/ops.sql: device_busy, device_idle): a device
core is busy during the union of its ops' intervals (ops of positive length on a device
chip, less a CPU device's host work). In SQL that union takes window functions over every
event (about 13 s at 10 M events); here it reuses the run's OpArrays, which the other
analyzers load anyway, already ordered by (start, end) within each track, so a running
maximum of the ends per core gives it: each op adds what it reaches past the ends before it,
max(0, end - max(start, reach so far)). The loop is per core, never per event.
tests/analyzers/test_core_busy.py checks the rows equal the view's on emulated runs, real
captures and random overlapping intervals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analyzers.context import RunContext
from analyzers.op_arrays import op_arrays

DEVICE_KINDS = ("tensorcore", "sparsecore", "gpu", "cpu", "device")


def union_busy(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of the intervals [start, end), given sorted by (start, end)."""
    if not len(start):
        return 0
    reach = np.maximum.accumulate(end)
    before = np.concatenate([start[:1], reach[:-1]])
    return int(np.maximum(end - np.maximum(start, before), 0).sum())


def device_idle_rows(ctx: RunContext) -> list[dict[str, Any]]:
    """device_idle's rows of the run (same columns, same values), by kind, chip, core."""
    # every device core (empty device planes too) and the capture's span; the busy columns come from the op scan
    cores = ctx.sql("analysis.ops.device_cores", kinds=list(DEVICE_KINDS)).to_pylist()
    busy = _busy_by_core(ctx) if cores else {}
    out = []
    for c in cores:
        b, first, last = busy.get((c["chip"], c["core"], c["track_kind"]), (0, None, None))
        active = None if first is None else last - first
        span = c["span_ps"]
        out.append(
            {
                "run_id": c["run_id"],
                "chip": c["chip"],
                "core": c["core"],
                "track_kind": c["track_kind"],
                "plane": c["plane"],
                "busy_ps": b,
                "first_ps": first,
                "last_ps": last,
                "active_ps": active,
                "span_ps": span,
                "idle_share_active": (1 - b / active) if active else None,
                "idle_share_span": (1 - b / span) if span else None,
            }
        )
    return out


def _busy_by_core(ctx: RunContext) -> dict[tuple[int, int, str], tuple[int, int, int]]:
    """(chip, core, kind) -> (busy_ps, first op's start, last op's end) for cores that ran ops."""
    tracks = ctx.sql("analysis.ops.device_op_tracks", kinds=list(DEVICE_KINDS)).to_pylist()
    if not tracks:
        return {}
    ops = op_arrays(ctx)
    rank = {int(t): i for i, t in enumerate(ops.track_id.tolist())}
    host_work = np.asarray(ctx.sql("analysis.ops.host_work_categories").column("string_id").to_pylist(), np.int64)
    not_host = ~np.isin(ops.category_scan, host_work)[ops.source] if len(host_work) else None
    by_core: dict[tuple[int, int, str], list[int]] = {}
    for t in tracks:
        by_core.setdefault((t["chip"], t["core"], t["track_kind"]), []).append(rank[int(t["track_id"])])
    out = {}
    for key, ranks in by_core.items():
        parts = [slice(int(ops.bounds[r]), int(ops.bounds[r + 1])) for r in ranks]
        start = np.concatenate([ops.start[p] for p in parts])
        end = np.concatenate([ops.end[p] for p in parts])
        keep = end > start
        if not_host is not None:
            keep &= np.concatenate([not_host[p] for p in parts])
        if not keep.all():
            start, end = start[keep], end[keep]
        if not len(start):
            continue
        if len(ranks) > 1:  # several tracks (GPU streams, CPU threads): one order over all
            order = np.lexsort((end, start))
            start, end = start[order], end[order]
        out[key] = (union_busy(start, end), int(start[0]), int(end.max()))
    return out

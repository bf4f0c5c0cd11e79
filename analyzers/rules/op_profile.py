"""The op profile: which ops take a run's time, as XProf's op profile shows it.

Per kind of track (tensorcore, sparsecore, gpu, cpu, device, host), op name and category:
how often the op ran, its total and *self* time (its duration less the time of the ops
nested directly inside it on its track: a host scope around a launch, an executor thunk
around a CPU op), its share of the kind's self time, and the FLOPs and bytes its events
record (typed columns; NULL when none does). Device rows come first, by self time.

Self time in numpy over op_arrays, per track that nests (device op lines rarely do), by
the rule of op_self_times (profiler/sql/stdlib/ops.sql): events of a track in (start, longest first,
event id) order, an event's parent is the last earlier event still open at its start
(found for all events at once by binary lifting over block maxima of the ends: Python runs
per track and per power of two, never per event). Events that overlap without nesting
(threads merged on one line) count as nested; self time never goes below 0.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from analyzers.context import RunContext
from analyzers.findings import Analysis
from analyzers.op_arrays import OpArrays, op_arrays

NAME = "ops"
QUESTION = "Which ops take the time: self time, count, share, FLOPs and bytes per op?"
TOP = 20  # rows of the profile kept in the figures (the table holds all)
DEVICE_KINDS = ("tensorcore", "sparsecore", "gpu", "cpu", "device")


def self_times(a: OpArrays) -> np.ndarray:
    """Per op_arrays row: its self time in ps (its duration less its direct children's, >= 0)."""
    dur = a.end - a.start
    out = dur.copy()
    for t in range(len(a.track_id)):
        lo, hi = int(a.bounds[t]), int(a.bounds[t + 1])
        if hi - lo < 2:
            continue
        s, e = a.start[lo:hi], a.end[lo:hi]
        if np.all(s[1:] >= np.maximum.accumulate(e)[:-1]):  # nothing starts before an earlier op ends
            continue
        rows = lo + np.flatnonzero(e > s)  # events that take time
        rows = rows[np.lexsort((a.event_ids(rows), -dur[rows], a.start[rows]))]  # start, longest first, id
        parent = _last_open_before(a.start[rows], a.end[rows])
        child_ps = np.zeros(len(rows), np.int64)
        nested = parent >= 0
        np.add.at(child_ps, parent[nested], dur[rows][nested])
        out[rows] = np.maximum(dur[rows] - child_ps, 0)
    return out


def _last_open_before(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per position i: the last j < i with end[j] > start[i] (still open when i starts), else -1.

    Binary lifting over a table of block maxima of `end`: from i - 1, skip back over the longest
    run of events that all ended by start[i], one power of two at a time (largest first)."""
    n = len(start)
    levels = [end]  # levels[k][j] = max(end[j : j + 2**k])
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-half], prev[half:]))
    p = np.arange(n) - 1
    for k in range(len(levels) - 1, -1, -1):
        first = p - (1 << k) + 1  # the block [first, p]
        ok = first >= 0
        skip = np.zeros(n, bool)
        skip[ok] = levels[k][first[ok]] <= start[ok]
        p[skip] -= 1 << k
    found = p >= 0
    found[found] = end[p[found]] > start[found]
    return np.where(found, p, -1)


def profile(ctx: RunContext) -> pa.Table:
    """The run's op profile (cached): track_kind, name, category, host_work, events, total_ps, self_ps, share
    (of the kind's self time, device and host work apart), flops, bytes, flop_per_byte (flops / bytes), flop_per_s
    (flops over self time); device work first, then by self time."""

    def compute() -> pa.Table:
        a = op_arrays(ctx)
        rows = pa.table(
            {
                "track_id": np.repeat(a.track_id, np.diff(a.bounds)),
                "name_id": a.name_scan[a.source],
                "category_id": a.category_scan[a.source],
                "dur_ps": a.end - a.start,
                "self_ps": self_times(a),
            }
        )
        return ctx.sql("analysis.ops.op_profile", {"rows": rows}, step_lo=None, step_hi=None)

    return ctx.memo("op_profile", compute)


def analyze(ctx: RunContext) -> Analysis:
    table = profile(ctx)
    result = Analysis(NAME, tables={"op_profile": table})
    if table.num_rows == 0:
        result.notes.append("no op events that take time")
        return result
    rows = table.to_pylist()
    result.figures = {
        "ops": table.num_rows,
        "top": rows[:TOP],
        "device_self_ps": sum(r["self_ps"] for r in rows if r["track_kind"] in DEVICE_KINDS),
    }
    return result

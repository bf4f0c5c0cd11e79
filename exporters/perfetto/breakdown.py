"""The "Step breakdown" track of each chip: each step window split into the analyzers' wall-time categories.

Its slices are the figures of analyzers.breakdown (the same split, computed per export window so that
memory follows the window), laid out one after the other in priority order; they join the stream as
rows of kind 3 from a temp table.
"""

from __future__ import annotations

import string

import numpy as np
import pyarrow as pa

from analyzers.context import RunContext, load_sql
from analyzers.timeline import CATEGORIES as TIMELINE_CATEGORIES
from analyzers.timeline import split_timeline
from exporters.perfetto.context import ExportContext
from exporters.perfetto.tracks import TrackLayout

BREAKDOWN_TRACK = "Step breakdown"


class _Breakdown:
    """What the breakdown's planning reads and writes: the export's store, filters and figures, the
    track layout (a track per chip) and the category names' iids, by the names _plan_breakdown uses."""

    def __init__(self, ex: ExportContext, layout: TrackLayout, bd_name_iid: dict[str, int]):
        self.store, self.con, self.run_id, self.steps = ex.store, ex.con, ex.run_id, ex.steps
        self.breakdown, self.filters, self.stats, self._rows = ex.breakdown, ex.filters, ex.stats, ex.rows
        self.bd_name_iid = bd_name_iid
        self._process_of, self._describe, self.descriptors = layout.process_of, layout.describe, layout.descriptors
        self.bd_key0, self.key_parent, self.lane0 = layout.bd_key0, layout.key_parent, layout.lane0

    def _plan_breakdown(self, cuts: list[int]) -> None:
        """The "Step breakdown" slices as a temp table, and a track per chip that has some.

        analyzers.breakdown.step_breakdown() splits whole-run arrays; here the same split
        (analyzers.timeline.split_timeline over sql/timeline_events.sql, per step window of
        sql/step_windows.sql) is computed per export window with the step windows clipped to
        it, and the parts summed: the split is additive over time, so the figures are the
        analyzer's, while memory follows the window rather than the run.
        """
        if not self.breakdown:
            return
        ctx = RunContext(self.store, self.run_id)
        windows = self.store.query(
            f"SELECT chip, step, start_ps, end_ps FROM {ctx.temp('step_windows')} WHERE end_ps > start_ps"
            + (" AND step >= $a AND step < $b" if self.steps else "")
            + " ORDER BY chip, start_ps",
            {"a": self.steps[0], "b": self.steps[1]} if self.steps else None,
        )
        if windows.num_rows == 0:
            return
        w = {k: windows.column(k).to_numpy().astype(np.int64) for k in ("chip", "step", "start_ps", "end_ps")}
        sql = load_sql("timeline_events").strip().rstrip(";")
        deps = {d: ctx.temp(d) for _, d, _, _ in string.Formatter().parse(sql) if d}
        max_dur = self._rows("SELECT coalesce(max(dur_ps), 0) FROM events WHERE run_id = $run")[0][0]
        # the span's filter on op_base itself, where DuckDB pushes it into the events scan (whose
        # zonemaps skip the row groups outside the span): filtering the query's result instead
        # scanned every event once per span
        deps["op_base"] = (
            f"(SELECT * FROM {deps['op_base']} WHERE start_ps >= $lo - $max_dur AND start_ps < $hi AND end_ps > $lo)"
        )
        events_sql = f"SELECT chip, start_ps, end_ps, priority FROM ({sql.format(**deps)})"
        parts = []
        bounds = [int(w["start_ps"].min()), *[c * 1000 for c in cuts], int(w["end_ps"].max())]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            inside = (w["start_ps"] < hi) & (w["end_ps"] > lo)
            if hi <= lo or not inside.any():
                continue
            clipped = pa.table(
                {
                    "chip": w["chip"][inside],
                    "step": w["step"][inside],
                    "start_ps": np.maximum(w["start_ps"][inside], lo),
                    "end_ps": np.minimum(w["end_ps"][inside], hi),
                }
            )
            events = self.con.sql(events_sql, params={"lo": lo, "hi": hi, "max_dur": max_dur}).to_arrow_table()
            parts.append(split_timeline(events, clipped, TIMELINE_CATEGORIES))
            del events
        if not parts:
            return
        split = pa.concat_tables(parts).group_by(["chip", "step", "category"]).aggregate([("dur_ps", "sum")])
        chip = split.column("chip").to_numpy().astype(np.int64)
        step = split.column("step").to_numpy().astype(np.int64)
        dur = split.column("dur_ps_sum").to_numpy().astype(np.int64)
        prio_of = {c: i for i, c in enumerate(TIMELINE_CATEGORIES)}
        cats = split.column("category").to_pylist()
        prio = np.array([prio_of[c] for c in cats], np.int64)
        o = np.lexsort((prio, step, chip))
        chip, step, dur, prio = chip[o], step[o], dur[o], prio[o]
        # consecutive inside the window, in priority order: start = window start + earlier categories
        wkey = w["chip"] * (int(w["step"].max()) + 1) + w["step"]
        wo = np.argsort(wkey)
        at = wo[np.searchsorted(wkey[wo], chip * (int(w["step"].max()) + 1) + step)]
        first = np.ones(len(chip), bool)
        first[1:] = (chip[1:] != chip[:-1]) | (step[1:] != step[:-1])
        before = np.cumsum(dur) - dur
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(chip)), 0))
        start = w["start_ps"][at] + before - before[group_start]
        names = np.array([self.bd_name_iid[TIMELINE_CATEGORIES[p]] for p in range(len(TIMELINE_CATEGORIES))], np.int64)[
            prio
        ]
        keep = dur > 0
        table = pa.table(
            {
                "id": np.arange(int(keep.sum()), dtype=np.int64),
                "chip": chip[keep],
                "name_iid": names[keep],
                "start_ps": start[keep],
                "dur_ps": dur[keep],
                "step": step[keep],
            }
        )
        name = f"scprof_perfetto_breakdown_{self.run_id}"
        self.con.register("scprof_perfetto_breakdown_arrow", table)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM scprof_perfetto_breakdown_arrow")
        finally:
            self.con.unregister("scprof_perfetto_breakdown_arrow")
        self.filters["breakdown"] = name
        for c in np.unique(chip[keep]).tolist():
            _, parent = self._process_of(c < 0, c)
            key = self.bd_key0 + c
            self.key_parent[key] = (parent, BREAKDOWN_TRACK, -1)
            self.lane0[key] = self._describe(name=BREAKDOWN_TRACK, parent_uuid=parent, sibling_order_rank=-1)
        self.stats.tracks = len(self.descriptors)


def plan_breakdown(ex: ExportContext, layout: TrackLayout, bd_name_iid: dict[str, int], cuts: list[int]) -> None:
    """Plan the breakdown slices (ex.filters["breakdown"] names their table) and describe their tracks.

    `cuts` are the export windows' cut points (ns) at which the split is computed piecewise.
    """
    _Breakdown(ex, layout, bd_name_iid)._plan_breakdown(cuts)

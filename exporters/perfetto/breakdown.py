"""The "Step breakdown" track of each chip: each step window split into the analyzers' wall-time categories.

Its slices are the figures of analyzers.rules.breakdown (the split stored with the run's analysis, or for a
run whose analysis is stale the same split computed per export window), laid out one after the other in priority order; they join the stream as
rows of kind 3 (export.perfetto's stream reads them as its `breakdown` input).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from analyzers import runstats
from analyzers.context import RunContext
from analyzers.rules.breakdown import split_windows
from analyzers.time_split import CATEGORIES as TIMELINE_CATEGORIES
from exporters.perfetto.context import ExportContext
from exporters.perfetto.tracks import TrackLayout

BREAKDOWN_TRACK = "Step breakdown"


class _Breakdown:
    """What the breakdown's planning reads and writes: the export's store, filters and figures, the
    track layout (a track per chip) and the category names' iids, by the names _plan_breakdown uses."""

    def __init__(self, ex: ExportContext, layout: TrackLayout, bd_name_iid: dict[str, int]):
        self.store, self.run_id = ex.store, ex.run_id
        self.ex, self.breakdown, self.stats = ex, ex.breakdown, ex.stats
        self.bd_name_iid = bd_name_iid
        self._process_of, self._describe, self.descriptors = layout.process_of, layout.describe, layout.descriptors
        self.bd_key0, self.key_parent, self.lane0 = layout.bd_key0, layout.key_parent, layout.lane0

    def _plan_breakdown(self, cuts: list[int]) -> None:
        """The "Step breakdown" slices (the export's breakdown_slices), and a track per chip that has some.

        The split is the analyzers' (analyzers.rules.breakdown.split_windows over the store's
        step_windows): the one stored with the run's analysis (run_step_split) when current, else
        computed afresh per export span (_split).
        """
        if not self.breakdown:
            return
        f = self.ex.filter
        windows = self.ex.q(
            "step_windows", run=self.run_id, all_steps=f["all_steps"], step_a=f["step_a"], step_b=f["step_b"]
        )
        if windows.num_rows == 0:
            return
        w = {k: windows.column(k).to_numpy().astype(np.int64) for k in ("chip", "step", "start_ps", "end_ps")}
        split = self._stored_split(w) if runstats.is_current(self.store, self.run_id) else self._split(w, cuts)
        if split is None or split.num_rows == 0:
            return
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
        self.ex.breakdown_slices = table
        for c in np.unique(chip[keep]).tolist():
            _, parent = self._process_of(c < 0, c)
            key = self.bd_key0 + c
            self.key_parent[key] = (parent, BREAKDOWN_TRACK, -1)
            self.lane0[key] = self._describe(name=BREAKDOWN_TRACK, parent_uuid=parent, sibling_order_rank=-1)
        self.stats.tracks = len(self.descriptors)

    def _stored_split(self, w: dict[str, np.ndarray]) -> pa.Table:
        """The run's stored split (run_step_split: the analyzers' figures, made when the run was
        stored) of the exported step windows: chip, step, category, dur_ps_sum."""
        split = runstats.step_split(self.store, self.run_id)
        exported = pa.table({"chip": w["chip"].astype(np.int32), "step": w["step"].astype(np.int32)})
        split = split.join(exported, keys=["chip", "step"], join_type="inner")
        return split.rename_columns(["chip", "step", "category", "dur_ps_sum"])

    def _split(self, w: dict[str, np.ndarray], cuts: list[int]) -> pa.Table | None:
        """The split computed afresh (a run whose stored analysis is stale), per export span with
        the step windows clipped to it and the parts summed: the split is additive over time, so
        the figures are the analyzer's, while memory follows the span rather than the run."""
        ctx = RunContext(self.store, self.run_id)
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
            parts.append(split_windows(ctx, clipped, span=(lo, hi))["priority"])
        if not parts:
            return None
        return pa.concat_tables(parts).group_by(["chip", "step", "category"]).aggregate([("dur_ps", "sum")])


def plan_breakdown(ex: ExportContext, layout: TrackLayout, bd_name_iid: dict[str, int], cuts: list[int]) -> None:
    """Plan the breakdown slices (ex.breakdown_slices) and describe their tracks.

    `cuts` are the export windows' cut points (ns) at which the split is computed piecewise.
    """
    _Breakdown(ex, layout, bd_name_iid)._plan_breakdown(cuts)

"""Debug-check and quantization results into the trace, and the NaN checker's error.

Per step and table, zero-length events on the host (`/host:CPU`) at the moment the
table's SparseCore forward pass of that step is done everywhere (the checks run in
it): on line `Debug Checks`, `id_bound_check` (with the bound check on: `ids`
checked, `oov_ids`, `vocab`) and `nan_check` (with the NaN checker on: `ids`,
`samples`, `nan_samples`, `nan_values`), category `debug_check`; on line
`Quantization`, `quantization` for every quantized table (`values` looked up,
`clipped_values`, `rms_error`, the range and bucket count), category `quantization`.
Checks that are off write nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from profiler.recorder import Recorder
from sim_backend.config import RunConfig
from sim_backend.debug_checks import StepChecks
from sim_backend.memory import Failure
from sim_backend.stacking import StackGroup
from sim_backend.stepgraph import SC_FWD

if TYPE_CHECKING:
    from sim_backend.emulator import Simulation

CHECKS_LINE = "Debug Checks"
QUANT_LINE = "Quantization"
CHECK_CATEGORY = "debug_check"
QUANT_CATEGORY = "quantization"
BOUND_CHECK = "id_bound_check"
NAN_CHECK = "nan_check"
QUANTIZATION = "quantization"
NAN_DETECTED = "nan_detected"  # failure kind (the failure event's name)


def forward_done_ps(cols: dict[str, np.ndarray], end_ps: np.ndarray, groups: int) -> np.ndarray:
    """int64 [groups]: when each group's SparseCore forward ends, over the tasks in `cols`
    (one step's; 0 for a group with none)."""
    m = cols["kind"] == SC_FWD
    out = np.zeros(groups, np.int64)
    np.maximum.at(out, cols["group"][m], end_ps[m])
    return out


class CheckEvents:
    """The check and quantization events of a run, gathered step by step, written in batches
    (each emit() is one events chunk per kind: their arguments make them chunks of their own)."""

    def __init__(self, cfg: RunConfig, groups: list[StackGroup], plane: str):
        flags = cfg.flags
        self.bound, self.nan = flags.xla_sparse_core_enable_id_bound_check, flags.xla_sc_detect_nan
        self.quant = [t for t in cfg.tables if t.quantization_config_low is not None]
        self.tables = [t.name for t in cfg.tables]
        self.vocab = {t.name: t.vocab for t in cfg.tables}
        self.group = {t: g.index for g in groups for t in g.tables}
        self.plane = plane
        self._steps: list[tuple[StepChecks, np.ndarray]] = []  # (checks, forward done per group)

    @property
    def on(self) -> bool:
        return self.bound or self.nan or bool(self.quant)

    def add_step(self, checks: StepChecks | None, forward_done: np.ndarray) -> None:
        """One step's results; `forward_done[g]`: when group g's SparseCore forward ended."""
        if checks is not None and self.on:
            self._steps.append((checks, forward_done))

    def emit(self, rec: Recorder) -> int:
        """Write the events of the steps gathered since the last emit(); returns how many."""
        steps, self._steps = sorted(self._steps, key=lambda x: x[0].step), []
        if not steps:
            return 0
        n = 0
        if self.bound or self.nan:
            track = rec.track(self.plane, CHECKS_LINE, "host")
            for name, on in ((BOUND_CHECK, self.bound), (NAN_CHECK, self.nan)):
                if on:
                    n += self._emit(rec, track, name, CHECK_CATEGORY, steps, self.tables, bound=name == BOUND_CHECK)
        if self.quant:
            track = rec.track(self.plane, QUANT_LINE, "host")
            tables = [t.name for t in self.quant]
            n += self._emit(rec, track, QUANTIZATION, QUANT_CATEGORY, steps, tables, quant=self.quant)
        return n

    def _emit(
        self,
        rec: Recorder,
        track: int,
        name: str,
        category: str,
        steps: list[tuple[StepChecks, np.ndarray]],
        tables: list[str],
        *,
        bound: bool = False,
        quant: list | None = None,
    ) -> int:
        """One event per (step, table) with the check's figures as arguments: the bound
        check's (`bound`), the quantization's (`quant`: the quantized tables) or the NaN
        checker's (neither)."""
        rows = [(sc.step, t, sc.tables[t], done[self.group[t]]) for sc, done in steps for t in tables]
        args: dict[str, list] = {}
        if quant is not None:
            cfg = {t.name: t for t in quant}
            clip = [tc.clipping for _, _, tc, _ in rows]
            args = {
                "values": [c.values for c in clip],
                "clipped_values": [c.clipped for c in clip],
                "rms_error": [math.sqrt(c.squared_error / c.values) if c.values else 0.0 for c in clip],
                "quantization_config_low": [cfg[t].quantization_config_low for _, t, _, _ in rows],
                "quantization_config_high": [cfg[t].quantization_config_high for _, t, _, _ in rows],
                "quantization_config_num_buckets": [cfg[t].quantization_config_num_buckets for _, t, _, _ in rows],
            }
        elif bound:
            args = {"oov_ids": [tc.oov_ids for _, _, tc, _ in rows], "vocab": [self.vocab[t] for _, t, _, _ in rows]}
        else:
            args = {
                "samples": [tc.samples for _, _, tc, _ in rows],
                "nan_samples": [tc.nan_samples for _, _, tc, _ in rows],
                "nan_values": [tc.nan_values for _, _, tc, _ in rows],
            }
        start = np.array([d for _, _, _, d in rows], np.int64)
        order = np.argsort(start, kind="stable")
        rec.emit(
            track=np.full(len(rows), track, np.uint32),
            name=[name] * len(rows),
            category=[category] * len(rows),
            start_ps=start[order],
            dur_ps=np.zeros(len(rows), np.int64),
            step=np.array([s for s, _, _, _ in rows], np.int32)[order],
            table=[rows[i][1] for i in order],
            ids=np.array([tc.ids for _, _, tc, _ in rows], np.int64)[order],
            args={k: [v[i] for i in order] for k, v in args.items()},
        )
        return len(rows)


def first_nan(cfg: RunConfig, checks: StepChecks | None) -> str | None:
    """With xla_sc_detect_nan, the first table (in config order) with NaN values in a step."""
    if not cfg.flags.xla_sc_detect_nan or checks is None:
        return None
    return next((t for t, tc in checks.tables.items() if tc.nan_values), None)


def nan_failure_at(
    groups: list[StackGroup], checks: StepChecks, table: str, cols: dict[str, np.ndarray], end_ps: np.ndarray
) -> Failure:
    """The NaN checker's error for the first NaN of the run (in step `checks.step`, table
    `table`): at the first SparseCore forward op of its table's group to finish in that
    step (the checker raises an error saying where the NaN was found).
    `cols` hold (at least) that step's tasks."""
    tc = checks.tables[table]
    gi = next(g.index for g in groups if table in g.tables)
    m = np.flatnonzero((cols["kind"] == SC_FWD) & (cols["step"] == checks.step) & (cols["group"] == gi))
    first = m[np.argmin(end_ps[m])]
    chip, core = int(cols["chip"][first]), int(cols["sc"][first])
    group = groups[gi].name
    message = (
        f"NaN detected (xla_sc_detect_nan) in the input values of SparseDenseMatmulOp of "
        f"table group {group!r} on TPU:{chip} SparseCore {core} at step {checks.step}: "
        f"{tc.nan_values} NaN values in {tc.nan_samples} samples of table {table!r} "
        f"(features {', '.join(tc.features_with_nan)}); clean the input pipeline's "
        f"weights for these features"
    )
    return Failure(NAN_DETECTED, message, int(end_ps[first]), chip, checks.step)


def nan_failure(sim: Simulation) -> Failure | None:
    """With xla_sc_detect_nan, the first NaN stops the run (nan_failure_at)."""
    for checks in sim.checks:
        table = first_nan(sim.cfg, checks)
        if table is not None:
            return nan_failure_at(sim.groups, checks, table, sim.graph.columns(), sim.schedule.end_ps)
    return None

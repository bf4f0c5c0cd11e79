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
from sim_backend.debug_checks import StepChecks
from sim_backend.memory import Failure
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


def forward_done_ps(sim: Simulation) -> np.ndarray:
    """int64 [steps, groups]: when each group's SparseCore forward of each step ends."""
    cols = sim.graph.columns()
    m = cols["kind"] == SC_FWD
    out = np.zeros((sim.cfg.steps, len(sim.groups)), np.int64)
    np.maximum.at(out, (cols["step"][m], cols["group"][m]), sim.schedule.end_ps[m])
    return out


def _group_of(sim: Simulation) -> dict[str, int]:
    return {t: g.index for g in sim.groups for t in g.tables}


def emit_check_events(rec: Recorder, sim: Simulation, plane: str) -> int:
    """Write the check and quantization events of every step; returns how many."""
    checks = [c for c in sim.checks if c is not None]
    flags = sim.cfg.flags
    bound, nan = flags.xla_sparse_core_enable_id_bound_check, flags.xla_sc_detect_nan
    quant = [t for t in sim.cfg.tables if t.quantization_config_low is not None]
    if not checks or not (bound or nan or quant):
        return 0
    done = forward_done_ps(sim)
    group = _group_of(sim)
    vocab = {t.name: t.vocab for t in sim.cfg.tables}
    n = 0
    if bound or nan:
        track = rec.track(plane, CHECKS_LINE, "host")
        for name, on in ((BOUND_CHECK, bound), (NAN_CHECK, nan)):
            if on:
                n += _emit(
                    rec,
                    track,
                    name,
                    CHECK_CATEGORY,
                    checks,
                    done,
                    group,
                    [t.name for t in sim.cfg.tables],
                    name == BOUND_CHECK,
                    vocab,
                )
    if quant:
        track = rec.track(plane, QUANT_LINE, "host")
        n += _emit(
            rec, track, QUANTIZATION, QUANT_CATEGORY, checks, done, group, [t.name for t in quant], False, vocab, quant
        )
    return n


def _emit(
    rec: Recorder,
    track: int,
    name: str,
    category: str,
    checks: list[StepChecks],
    done: np.ndarray,
    group: dict[str, int],
    tables: list[str],
    bound: bool,
    vocab: dict[str, int],
    quant: list | None = None,
) -> int:
    """One event per (step, table) with the check's figures as arguments."""
    rows = [(sc.step, t, sc.tables[t]) for sc in checks for t in tables]
    args: dict[str, list] = {}
    if quant is not None:
        cfg = {t.name: t for t in quant}
        clip = [tc.clipping for _, _, tc in rows]
        args = {
            "values": [c.values for c in clip],
            "clipped_values": [c.clipped for c in clip],
            "rms_error": [math.sqrt(c.squared_error / c.values) if c.values else 0.0 for c in clip],
            "quantization_config_low": [cfg[t].quantization_config_low for _, t, _ in rows],
            "quantization_config_high": [cfg[t].quantization_config_high for _, t, _ in rows],
            "quantization_config_num_buckets": [cfg[t].quantization_config_num_buckets for _, t, _ in rows],
        }
    elif bound:
        args = {"oov_ids": [tc.oov_ids for _, _, tc in rows], "vocab": [vocab[t] for _, t, _ in rows]}
    else:
        args = {
            "samples": [tc.samples for _, _, tc in rows],
            "nan_samples": [tc.nan_samples for _, _, tc in rows],
            "nan_values": [tc.nan_values for _, _, tc in rows],
        }
    start = np.array([done[s, group[t]] for s, t, _ in rows], np.int64)
    order = np.argsort(start, kind="stable")
    rec.emit(
        track=np.full(len(rows), track, np.uint32),
        name=[name] * len(rows),
        category=[category] * len(rows),
        start_ps=start[order],
        dur_ps=np.zeros(len(rows), np.int64),
        step=np.array([s for s, _, _ in rows], np.int32)[order],
        table=[rows[i][1] for i in order],
        ids=np.array([tc.ids for _, _, tc in rows], np.int64)[order],
        args={k: [v[i] for i in order] for k, v in args.items()},
    )
    return len(rows)


def nan_failure(sim: Simulation) -> Failure | None:
    """With xla_sc_detect_nan, the first NaN stops the run: at the first SparseCore forward
    op of its table's group to finish in the first step holding one (seeds/000 §12: the
    checker raises an error saying where the NaN was found)."""
    if not sim.cfg.flags.xla_sc_detect_nan:
        return None
    hit = next(((sc, t) for sc in sim.checks if sc is not None for t, tc in sc.tables.items() if tc.nan_values), None)
    if hit is None:
        return None
    sc, table = hit
    tc = sc.tables[table]
    gi = _group_of(sim)[table]
    cols = sim.graph.columns()
    m = np.flatnonzero((cols["kind"] == SC_FWD) & (cols["step"] == sc.step) & (cols["group"] == gi))
    first = m[np.argmin(sim.schedule.end_ps[m])]
    chip, core = int(cols["chip"][first]), int(cols["sc"][first])
    group = sim.groups[gi].name
    message = (
        f"NaN detected (xla_sc_detect_nan) in the input values of SparseDenseMatmulOp of "
        f"table group {group!r} on TPU:{chip} SparseCore {core} at step {sc.step}: "
        f"{tc.nan_values} NaN values in {tc.nan_samples} samples of table {table!r} "
        f"(features {', '.join(tc.features_with_nan)}); clean the input pipeline's "
        f"weights for these features"
    )
    return Failure(NAN_DETECTED, message, int(sim.schedule.end_ps[first]), chip, sc.step)

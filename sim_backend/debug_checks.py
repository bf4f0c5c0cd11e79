"""Debug checks and quantization on each step's batch: what the SparseCore program would see.

The SparseCore guide's debug flags and quantization (docs/emulator.md "Quantization and debug
checks"):

- `flags.xla_sparse_core_enable_id_bound_check`: every ID is compared with its table's
  vocabulary; IDs outside `[0, vocab)` are counted per table and step and reported
  (the run goes on). Whether the check is on or off, such an ID is then *clamped* into
  the table (`min(max(id, 0), vocab - 1)`: XLA's gather clamps out-of-bounds start
  indices), so it silently reads and trains the table's last row (model choice); with
  the check off nothing is reported.
- `flags.xla_sc_detect_nan`: the NaN checker counts, per table and step, the samples
  whose COO values (the per-ID weights, `features[].nan_fraction`) are NaN and the
  values themselves; a NaN stops the run with an error (check_events.nan_failure).
  Off: NaNs flow on unnoticed (numerics are not modelled).
- Quantization (int8 tables, or f32/bf16 tables with a quantization range): the
  distinct rows a step looks up in the table are quantized (quantization.py) and the
  values clipped to `[quantization_config_low, quantization_config_high]` counted.

Both checks cost SparseCore time when on (`check_ps`, constants in CostConstants).
Nothing here runs for a config without checks, quantized tables or injected faults.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from sim_backend.config import RunConfig, TableConfig
from sim_backend.costmodel import PS_PER_S, CostConstants
from sim_backend.generate import FeatureBatch
from sim_backend.hardware import HardwareSpec
from sim_backend.quantization import Clipping, clip_stats, table_key


@dataclass
class TableCheck:
    """One table's check results in one step (counts over all features reading it)."""

    table: str
    ids: int = 0  # IDs the step looked up in the table (duplicates included)
    samples: int = 0  # samples x features reading the table
    oov_ids: int = 0  # IDs outside [0, vocab) (counted when the bound check may see any)
    nan_samples: int = 0  # samples whose values are NaN
    nan_values: int = 0  # NaN values (one per ID of such a sample)
    features_with_nan: list[str] = field(default_factory=list)
    clipping: Clipping | None = None  # quantized tables only


@dataclass
class StepChecks:
    """What the checks and quantization found in one step, per table (config order)."""

    step: int
    tables: dict[str, TableCheck]


def quantized(t: TableConfig) -> bool:
    """Whether lookups in `t` are quantized (int8, or a range set on an f32/bf16 table)."""
    return t.quantization_config_low is not None


def needs_checks(cfg: RunConfig) -> bool:
    """Whether any check, quantized table or injected fault needs a look at the batches."""
    f = cfg.flags
    return (
        f.xla_sparse_core_enable_id_bound_check
        or f.xla_sc_detect_nan
        or any(quantized(t) for t in cfg.tables)
        or any(x.oov_fraction > 0 or x.nan_fraction > 0 for x in cfg.features)
    )


def run_checks(cfg: RunConfig, step: int, batches: list[FeatureBatch]) -> tuple[list[FeatureBatch], StepChecks | None]:
    """Check one step's batches; returns them with out-of-vocabulary IDs clamped."""
    if not needs_checks(cfg):
        return batches, None
    tables = {t.name: t for t in cfg.tables}
    bound = cfg.flags.xla_sparse_core_enable_id_bound_check
    out = list(batches)
    checks = {t.name: TableCheck(t.name) for t in cfg.tables}
    for i, (f, fb) in enumerate(zip(cfg.features, batches, strict=True)):
        vocab = tables[f.table].vocab
        tc = checks[f.table]
        tc.ids += len(fb.ids)
        tc.samples += len(fb.lengths)
        if bound or f.oov_fraction > 0:  # generated IDs are in range unless faults were injected
            bad = int(np.count_nonzero((fb.ids >= vocab) | (fb.ids < 0)))
            tc.oov_ids += bad
            if bad:
                out[i] = dataclasses.replace(fb, ids=np.clip(fb.ids, 0, vocab - 1))
        if fb.nan_samples is not None:
            n = int(np.count_nonzero(fb.nan_samples))
            if n:
                tc.nan_samples += n
                tc.nan_values += int(fb.lengths[fb.nan_samples].sum())
                tc.features_with_nan.append(f.name)
    for name, t in tables.items():
        if quantized(t):
            ids = [out[i].ids for i, f in enumerate(cfg.features) if f.table == name]
            rows = np.unique(np.concatenate(ids))
            checks[name].clipping = clip_stats(
                table_key(cfg.seed, name),
                rows,
                t.width,
                t.quantization_config_low,
                t.quantization_config_high,
                t.quantization_config_num_buckets,
            )
    return out, StepChecks(step, checks)


def check_ps(
    cfg: RunConfig, hw: HardwareSpec, c: CostConstants, ids: np.ndarray, width: int, backward: bool
) -> np.ndarray | int:
    """Extra SparseCore time of the debug checks for ops handling `ids` IDs (0 when off).

    Bound check (forward only: the IDs are checked once per step): `ids *
    sc_bound_check_cycles_per_id`; NaN check (forward activations, backward gradients):
    `ids * sc_nan_check_passes * ceil(width / simd)` SIMD passes; cycles spread over the
    tiles at the SparseCore clock.
    """
    bound = cfg.flags.xla_sparse_core_enable_id_bound_check and not backward
    nan = cfg.flags.xla_sc_detect_nan
    if not (bound or nan):
        return 0
    per_id = (c.sc_bound_check_cycles_per_id if bound else 0.0) + (
        c.sc_nan_check_passes * math.ceil(width / hw.simd_width) if nan else 0.0
    )
    seconds = np.asarray(ids, np.float64) * per_id / hw.tiles_per_sparsecore / hw.sc_clock_hz
    return np.ceil(seconds * PS_PER_S).astype(np.int64)

"""Table stacking (DOMAIN.md §1, step 8) and the batch layout: which tables the SparseCores
see as one (stacked) table group, where each table's rows lie in it, and its limits.

A stacked table lays its tables side by side (row offset, vocabulary padded to a multiple
of the SparseCore count) and shifts each table's IDs by its position in the stack, so the
hot rows of different tables land on different SparseCores. preprocess.py runs host
preprocessing over these groups; memory.py and stepgraph.py size and schedule them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.costmodel import CostConstants
from sim_backend.hardware import HardwareSpec
from sim_backend.limits import TableLimits

DTYPE_BYTES = {"f32": 4, "bf16": 2, "int8": 1}
OPTIMIZER_SLOTS = {"sgd": 0, "adagrad": 1, "adam": 2}


@dataclass(frozen=True)
class Layout:
    """How a global batch maps onto the slice."""

    global_batch: int
    num_chips: int
    sparsecores_per_chip: int

    @property
    def num_sc(self) -> int:
        return self.num_chips * self.sparsecores_per_chip

    @property
    def samples_per_sc(self) -> int:
        return self.global_batch // self.num_sc


@dataclass(frozen=True)
class StackGroup:
    """One logical (possibly stacked) table as the SparseCores see it."""

    index: int
    name: str
    tables: tuple[str, ...]
    features: tuple[int, ...]  # indices into cfg.features; position = feature slot
    feature_table: tuple[int, ...]  # per slot: index into `tables`
    width: int
    dtype_bytes: int
    optimizer_slots: int
    offsets: np.ndarray  # int64 per table: first row of its slot (multiple of num SCs)
    padded_vocab: np.ndarray  # int64 per table: vocab padded to a multiple of num SCs
    rotation: np.ndarray  # int64 per table: shift of its IDs inside the slot
    # stacked ID of table t's row j: offsets[t] + rotation[t] + j, so its SparseCore is
    # (j + rotation[t]) % num_SCs: table t's hot rows move to other SparseCores (step 8)
    local_rows: int  # rows of the stacked table per partition
    max_ids_per_partition: int  # compiled limits of the stacked table
    max_unique_ids_per_partition: int


def plan_groups(cfg: RunConfig, hw: HardwareSpec, limits: dict[str, TableLimits]) -> list[StackGroup]:
    """Group tables for stacking (same width, dtype, optimizer) unless disabled.

    `sparsecore.max_tables_per_stack = k` (k > 0) splits each such bucket, in config
    order, into stacks of at most k tables.
    """
    n_sc = hw.num_total_sparse_cores
    tables = {t.name: t for t in cfg.tables}
    shuffle = cfg.sparsecore.shuffle_ids
    buckets: dict[tuple, list[str]] = {}
    for t in cfg.tables:
        key = (t.name,) if cfg.sparsecore.disable_table_stacking else (t.width, t.dtype, t.optimizer)
        buckets.setdefault(key, []).append(t.name)
    per_stack = cfg.sparsecore.max_tables_per_stack
    chunks = [
        names[i : i + per_stack] if per_stack else names
        for names in buckets.values()
        for i in range(0, len(names), per_stack or len(names))
    ]
    groups = []
    for gi, names in enumerate(chunks):
        t0 = tables[names[0]]
        padded = np.array([-(-tables[n].vocab // n_sc) * n_sc for n in names], dtype=np.int64)
        # a stacked (or shuffled) table's slot leaves n_sc spare rows so its IDs can be shifted
        slot_rows = padded + (n_sc if len(names) > 1 or shuffle else 0)
        offsets = np.concatenate([[0], np.cumsum(slot_rows)[:-1]]).astype(np.int64)
        slots = [i for i, f in enumerate(cfg.features) if f.table in names]
        lim_ids, lim_unique = stack_limits(cfg, hw, [limits[n] for n in names], t0.width)
        groups.append(
            StackGroup(
                index=gi,
                name=names[0] if len(names) == 1 else f"stack_{gi}",
                tables=tuple(names),
                features=tuple(slots),
                feature_table=tuple(names.index(cfg.features[i].table) for i in slots),
                width=t0.width,
                dtype_bytes=DTYPE_BYTES[t0.dtype],
                optimizer_slots=OPTIMIZER_SLOTS[t0.optimizer],
                offsets=offsets,
                padded_vocab=padded,
                rotation=table_rotations(cfg, names, n_sc),
                local_rows=int(slot_rows.sum()) // n_sc,
                max_ids_per_partition=lim_ids,
                max_unique_ids_per_partition=lim_unique,
            )
        )
    return groups


def table_rotations(cfg: RunConfig, names: list[str], n_sc: int) -> np.ndarray:
    """Shift of each table's IDs inside its slot (its row j goes to SparseCore (j + shift) % n_sc).

    Stacked tables: the table's position in the stack (step 8 of the limits procedure).
    `sparsecore.shuffle_ids` (SparseCore guide §10, data skew: "shuffling IDs ... for
    stacked tables, especially those with hot tables"): every table, stacked or not, is
    shifted by floor(i * n_sc / T) for the i-th of the config's T tables, so the low
    (hot) IDs of all tables spread evenly over the slice instead of sharing SparseCore 0.
    """
    if cfg.sparsecore.shuffle_ids:
        index = {t.name: i for i, t in enumerate(cfg.tables)}
        return np.array([index[n] * n_sc // len(cfg.tables) for n in names], dtype=np.int64)
    return np.arange(len(names), dtype=np.int64) % n_sc


def stack_limits(cfg: RunConfig, hw: HardwareSpec, members: list[TableLimits], width: int) -> tuple[int, int]:
    """Compiled (max_ids, max_unique_ids) per partition of a stack of tables.

    The sum of its tables' limits (as jax-tpu-embedding stacks them); for a stack of
    several tables, scaled down so its fixed-size SPMEM buffers fit in TileSpmem beside
    the gather staging (model choice: the stacking framework cannot ask for buffers the
    tile cannot hold, so a very large stack hits the per-partition limits and
    minibatches). A lone table keeps the user's limits, which may fail to compile.
    """
    ids = sum(m.max_ids_per_partition for m in members)
    uniq = sum(m.max_unique_ids_per_partition for m in members)
    if len(members) < 2:
        return ids, uniq
    c = CostConstants(**cfg.cost)
    tiles = hw.tiles_per_sparsecore
    sample_count = cfg.global_batch // hw.num_total_sparse_cores
    budget = hw.spmem_bytes_per_tile - -(-sample_count * width // tiles) * c.activation_bytes
    per_tile = (-(-ids // tiles), -(-uniq // tiles))
    fixed = per_tile[0] * c.spmem_bytes_per_id + per_tile[1] * c.spmem_bytes_per_unique_id
    if fixed <= budget or budget <= 0:
        return ids, uniq
    scale = budget / fixed
    return (max(1, int(per_tile[0] * scale)) * tiles, max(1, int(per_tile[1] * scale)) * tiles)

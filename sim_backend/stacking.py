"""Table stacking as jax-tpu-embedding does it, and the batch layout: which tables the SparseCores
see as one stacked table, where each table's rows lie in it, and how its IDs are rotated.

The rules follow the released library (`table_stacking.auto_stack_tables` in
jax-tpu-embedding 0.1.0; tests/sim_backend/test_library_oracle.py checks them against it):
- tables are grouped by feature width rounded up to a multiple of 8, optimizer and
  combiner, in the order the features first read them; each group is then split,
  first fit, so that no stack's activations on one SparseCore exceed
  `sparsecore.stack_activation_mem_bytes_limit` (the library's 2 MiB default:
  `padded width x samples per SparseCore x 4 bytes` per table);
- a stack is named `"_".join(tables)`, cut to 50 characters plus "..." and 12 hex
  digits of its SHA-256 when longer; a lone table's stack is the table's own name;
- each table's vocabulary is padded to a multiple of `8 x num_SCs` and the tables are
  laid one after another (`offsets`); the i-th table of a stack is rotated by
  `i x sparsecores_per_chip mod num_SCs` shards, inside each block of num_SCs rows:
  stacked ID = `((id + shift) mod n) + (id - id mod n) + offset` (`stacked_cols`), so
  its row `id` lands on SparseCore `(id + shift) mod n`.
Model choices beyond the library (docs/emulator.md): tables of different `dtype` never
stack (the library keeps f32 stacks); `sparsecore.max_tables_per_stack` cuts stacks
further; `sparsecore.shuffle_ids` replaces the rotation by a spread over all tables.
preprocess.py runs host preprocessing over these groups; memory.py and stepgraph.py size
and schedule them; limits.py gives each stack its compiled limits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.errors import ConfigError
from sim_backend.hardware import HardwareSpec
from sim_backend.limits import StackLimits, resolve_stack_limits

DTYPE_BYTES = {"f32": 4, "bf16": 2, "int8": 1}
OPTIMIZER_SLOTS = {"sgd": 0, "adagrad": 1, "adam": 2}
WIDTH_ALIGN = 8  # the library rounds feature widths up to a multiple of 8 (stacking key)
VOCAB_ALIGN = 8  # ... and vocabularies to a multiple of 8 x num_SCs
ACTIVATION_BYTES = 4  # f32 activations in the library's activation-memory split
STACK_NAME_SHOWN = 50  # characters of the joined table names a stack name keeps
STACK_NAME_HASH = 12  # hex digits of SHA-256 appended to a cut name


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

    def cross_chip(self) -> np.ndarray:
        """bool [source SC, target SC]: the two SparseCores are on different chips."""
        chip = np.arange(self.num_sc) // self.sparsecores_per_chip
        return chip[:, None] != chip[None, :]


@dataclass(frozen=True)
class StackGroup:
    """One stacked table as the SparseCores see it (a lone table is a stack of one)."""

    index: int
    name: str
    tables: tuple[str, ...]
    features: tuple[int, ...]  # indices into cfg.features; position = feature slot
    feature_table: tuple[int, ...]  # per slot: index into `tables`
    width: int
    dtype_bytes: int
    optimizer_slots: int
    offsets: np.ndarray  # int64 per table: first stacked ID of its rows (a multiple of 8 x num SCs)
    padded_vocab: np.ndarray  # int64 per table: vocab padded to a multiple of 8 x num SCs
    rotation: np.ndarray  # int64 per table: shard shift of its IDs (stacked_cols)
    local_rows: int  # rows of the stacked table per partition
    max_ids_per_partition: int  # compiled limits of the stack
    max_unique_ids_per_partition: int
    limit_source: str = "default"  # where the limits came from (limits.StackLimits.source)
    ignored_limits: tuple[str, ...] = ()  # its tables whose own limits the config sets, not applied


def stacked_cols(ids: np.ndarray, shift: int, offset: int, n_sc: int, out: np.ndarray | None = None) -> np.ndarray:
    """Stacked column IDs of one table's raw IDs: rotated by `shift` shards inside each block
    of `n_sc` rows, then moved by `offset` (the library's col_shift / col_offset transform;
    with a power-of-two SC count it is `((id + shift) & mask) + (id & ~mask) + offset`)."""
    ids = np.asarray(ids, dtype=np.int64)
    if out is None:
        out = np.empty(ids.shape, dtype=np.int64)
    if n_sc & (n_sc - 1) == 0:
        mask = n_sc - 1
        np.add(ids, shift, out=out)
        out &= mask
        out += ids & ~mask
    else:
        np.add(ids, shift, out=out)
        out %= n_sc
        out += ids - ids % n_sc
    out += offset
    return out


def table_ids(cols: np.ndarray, group: StackGroup, n_sc: int) -> tuple[np.ndarray, np.ndarray]:
    """stacked_cols inverted: (index of the table in the stack, raw ID) of each stacked ID."""
    table = np.searchsorted(group.offsets, cols, "right") - 1
    rel = cols - group.offsets[table]
    low = rel % n_sc
    return table, rel - low + (low - group.rotation[table]) % n_sc


def stack_name(tables: list[str] | tuple[str, ...]) -> str:
    """The library's short stack name of these tables (a lone table: its own name)."""
    joined = "_".join(tables)
    if len(joined) <= STACK_NAME_SHOWN:
        return joined
    digest = hashlib.sha256(joined.encode("utf-8")).hexdigest()[:STACK_NAME_HASH]
    return f"{joined[:STACK_NAME_SHOWN]}...{digest}"


def padded_width(width: int) -> int:
    return -(-width // WIDTH_ALIGN) * WIDTH_ALIGN


def stack_members(cfg: RunConfig, n_sc: int) -> list[list[str]]:
    """Which tables stack together, in the library's order (see the module docstring)."""
    tables = {t.name: t for t in cfg.tables}
    order = list(dict.fromkeys(f.table for f in cfg.features))  # first read first
    if cfg.sparsecore.disable_table_stacking:
        return [[name] for name in order]
    buckets: dict[tuple, list[str]] = {}
    for name in order:
        t = tables[name]
        buckets.setdefault((padded_width(t.width), t.optimizer, t.combiner, t.dtype), []).append(name)
    samples = {name: 0 for name in order}
    for f in cfg.features:
        samples[f.table] += cfg.global_batch // n_sc
    limit = cfg.sparsecore.stack_activation_mem_bytes_limit
    act = {name: padded_width(tables[name].width) * samples[name] * ACTIVATION_BYTES for name in order}
    stacks: list[list[str]] = []
    for names in buckets.values():
        split: list[list[str]] = []
        for name in names:  # first fit, as the library splits a group by activation memory
            for cand in split:
                if sum(act[c] for c in cand) + act[name] <= limit:
                    cand.append(name)
                    break
            else:
                split.append([name])
        stacks += split
    per_stack = cfg.sparsecore.max_tables_per_stack
    if per_stack:
        stacks = [s[i : i + per_stack] for s in stacks for i in range(0, len(s), per_stack)]
    return stacks


def plan_groups(cfg: RunConfig, hw: HardwareSpec) -> list[StackGroup]:
    """The stacked tables of a config, with their layout and compiled limits."""
    n_sc = hw.num_total_sparse_cores
    tables = {t.name: t for t in cfg.tables}
    members = stack_members(cfg, n_sc)
    names = [stack_name(m) for m in members]
    clash = {n for n in names if n in tables and [n] not in members}
    if clash or len(set(names)) < len(names):
        bad = sorted(clash) or sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"tables: stack name {bad[0]!r} is also the name of another table or stack; rename a table")
    limits = resolve_stack_limits(cfg, list(zip(names, members, strict=True)), n_sc)
    groups = []
    for gi, (name, stack) in enumerate(zip(names, members, strict=True)):
        padded = np.array([-(-tables[n].vocab // (VOCAB_ALIGN * n_sc)) * VOCAB_ALIGN * n_sc for n in stack], np.int64)
        offsets = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
        slots = [i for i, f in enumerate(cfg.features) if f.table in stack]
        lim: StackLimits = limits[name]
        groups.append(
            StackGroup(
                index=gi,
                name=name,
                tables=tuple(stack),
                features=tuple(slots),
                feature_table=tuple(stack.index(cfg.features[i].table) for i in slots),
                width=max(tables[n].width for n in stack),
                dtype_bytes=DTYPE_BYTES[tables[stack[0]].dtype],
                optimizer_slots=OPTIMIZER_SLOTS[tables[stack[0]].optimizer],
                offsets=offsets,
                padded_vocab=padded,
                rotation=table_rotations(cfg, stack, hw),
                local_rows=int(padded.sum()) // n_sc,
                max_ids_per_partition=lim.max_ids_per_partition,
                max_unique_ids_per_partition=lim.max_unique_ids_per_partition,
                limit_source=lim.source,
                ignored_limits=lim.ignored_tables,
            )
        )
    return groups


def table_rotations(cfg: RunConfig, names: list[str], hw: HardwareSpec) -> np.ndarray:
    """Shard shift of each table of a stack (its row j goes to SparseCore (j + shift) % n_sc).

    The library's rule: the i-th table of a stack by `i x sparsecores_per_chip mod n_sc`
    (so on one chip not at all). `sparsecore.shuffle_ids` (SparseCore guide §10, data
    skew: "shuffling IDs ... for stacked tables, especially those with hot tables",
    a model choice): every table, stacked or not, by floor(i * n_sc / T) for the i-th of
    the config's T tables, so the low (hot) IDs of all tables spread evenly over the slice.
    """
    n_sc = hw.num_total_sparse_cores
    if cfg.sparsecore.shuffle_ids:
        index = {t.name: i for i, t in enumerate(cfg.tables)}
        return np.array([index[n] * n_sc // len(cfg.tables) for n in names], dtype=np.int64)
    return np.arange(len(names), dtype=np.int64) * hw.sparsecores_per_chip % n_sc

"""Memory model: HBM heap and stack per chip, SPMEM per tile, and the failures they cause.

Memory, padding, failures and tiled layouts as the SparseCore guide states them; every figure is
in docs/emulator.md "Memory model".

- **HBM heap** (per chip): embedding tables and their optimizer slots (rows padded to
  32 bytes, vocabularies to a multiple of the SparseCore count, mod-sharded so each
  chip holds vocab / chips rows of every table), dense weights and their optimizer
  state (each chip's shard under the dense shardings, `sharding.py`, replicated by
  default; in XLA:TPU's tiled layout, `layout.py`), constants, and the
  inputs of prefetched steps (live from their host->HBM transfer until the step's
  SparseCore forward is done). A step's input buffers have the compiled, static shape:
  per table group and minibatch, one COO buffer of max_ids_per_partition entries per
  (source SparseCore, partition), whatever the batch fills (`input_buffer_bytes`).
- **HBM stack** (per chip): per table group and pass, the doc's formulas
  forward  = (2 * width + 1) * max_unique_nz_per_row * logical_replica_count * 4 bytes,
  backward = 3 * width * max_unique_nz_per_row * logical_replica_count * 4 bytes,
  per SparseCore, with max_unique_nz_per_row = the group's compiled
  max_unique_ids_per_partition (the most unique rows one source buffer brings to a
  partition) and logical_replica_count = num_total_sparse_cores (each SparseCore serves
  one buffer from every SparseCore of the slice); a chip holds its SparseCores' stacks.
  Stacks are live over the SC tasks that use them: groups the compiler may run
  concurrently share one region (all their stacks live from the region's first task on
  the chip to its last); `xla_sc_num_serialized_tables_to_optimize_hbm = k` gives each
  of the first k groups a region of its own (they run one after another).
- **SPMEM per tile**, static: the largest group's fixed-size buffers (sized by its
  compiled limits, spread over the tiles) plus its gather operand staging
  ((sample_count * feature_width) / kNumTiles activations).

Failures: `Fixed size allocations (...) do not fit in TileSpmem (...)` and `Gather
operand too large...` at "compile" time (before step 0); HBM out of memory when heap +
stack on a chip exceed its capacity (found on the simulated timeline).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.costmodel import CostModel
from sim_backend.hardware import HardwareSpec
from sim_backend.layout import dense_dtype, padded_bytes
from sim_backend.preprocess import StepResult
from sim_backend.sharding import plan_dense
from sim_backend.stacking import StackGroup
from sim_backend.stepgraph import INFEED, SC_BWD, SC_FWD

if TYPE_CHECKING:
    from sim_backend.emulator import Simulation

# Heap contributors, in the order they are recorded ("HBM heap: <contributor>").
EMBEDDING_TABLES = "embedding tables"
EMBEDDING_OPTIMIZER = "embedding optimizer state"
DENSE_WEIGHTS = "dense weights"
DENSE_OPTIMIZER = "dense optimizer state"
CONSTANTS = "constants"
PREFETCHED_INPUTS = "prefetched inputs"
HEAP_CONTRIBUTORS = (
    EMBEDDING_TABLES,
    EMBEDDING_OPTIMIZER,
    DENSE_WEIGHTS,
    DENSE_OPTIMIZER,
    CONSTANTS,
    PREFETCHED_INPUTS,
)
STACK = "HBM stack"

# Failure kinds (the failure event's name in the trace).
SPMEM_OVERFLOW = "spmem_overflow"
GATHER_TOO_LARGE = "gather_operand_too_large"
HBM_OOM = "hbm_oom"


@dataclass(frozen=True)
class GroupMemory:
    """Static memory of one table group."""

    name: str
    stack_forward_per_sc: int
    stack_backward_per_sc: int
    spmem_fixed_per_tile: int  # ID and unique-ID buffers sized by the compiled limits
    gather_elements_per_tile: int  # (sample_count * feature_width) / kNumTiles
    spmem_gather_per_tile: int


@dataclass(frozen=True)
class StaticMemory:
    """What the "compiler" knows before step 0: static heap, stack sizes, SPMEM per tile."""

    heap: dict[str, int]  # static heap contributors per chip (prefetched inputs: 0)
    groups: list[GroupMemory]
    sparsecores_per_chip: int
    logical_replica_count: int
    spmem_per_tile: int  # the largest group's fixed + gather bytes per tile
    spmem_capacity_per_tile: int
    hbm_capacity: int

    @property
    def heap_static(self) -> int:
        return sum(self.heap.values())

    def stack_per_chip(self, group: int, backward: bool) -> int:
        g = self.groups[group]
        per_sc = g.stack_backward_per_sc if backward else g.stack_forward_per_sc
        return per_sc * self.sparsecores_per_chip


@dataclass(frozen=True)
class Failure:
    """Why the run failed, where and when (recorded as the failure event)."""

    kind: str  # SPMEM_OVERFLOW, GATHER_TOO_LARGE or HBM_OOM
    message: str
    ts_ps: int = 0
    chip: int = -1
    step: int | None = None
    requested_bytes: int = 0
    capacity_bytes: int = 0


@dataclass
class ChipMemory:
    """One chip's memory over time: one sample per time at which anything changes."""

    ts_ps: np.ndarray  # int64, increasing, first 0
    prefetched_bytes: np.ndarray  # inputs of prefetched steps held in HBM
    prefetched_steps: np.ndarray  # how many steps' inputs are held
    stack_bytes: np.ndarray
    heap_static: int
    heap_bytes: np.ndarray = field(init=False)
    step_of_change: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        self.heap_bytes = self.heap_static + self.prefetched_bytes


# -- static sizes ------------------------------------------------------------------------------


def stack_bytes_per_sc(
    width: int, max_unique_nz_per_row: int, logical_replica_count: int, element_bytes: int = 4
) -> tuple[int, int]:
    """(forward, backward) HBM stack of one table on one SparseCore (docs/emulator.md)."""
    n = max_unique_nz_per_row * logical_replica_count * element_bytes
    return (2 * width + 1) * n, 3 * width * n


def embedding_bytes_per_chip(groups: list[StackGroup], chips: int, padded_row_bytes) -> tuple[int, int]:
    """(table rows, optimizer slots) bytes on one chip: padded rows, vocab / chips each."""
    tables = slots = 0
    for g in groups:
        rows = int(g.padded_vocab.sum())  # a multiple of the SparseCore count, so of chips
        row = padded_row_bytes(g.width, g.dtype_bytes)
        tables += rows * row
        slots += rows * row * g.optimizer_slots
    return -(-tables // chips), -(-slots // chips)


def dense_bytes(cfg: RunConfig, element_bytes: int) -> int:
    """Dense weights one chip stores: per-device shapes (sharding.py) in the tiled layout."""
    dtype = dense_dtype(element_bytes)
    return sum(padded_bytes(p.stored_shape, dtype) for p in plan_dense(cfg, element_bytes).params)


def static_memory(cfg: RunConfig, hw: HardwareSpec, groups: list[StackGroup], cost: CostModel) -> StaticMemory:
    c = cost.c
    tables, slots = embedding_bytes_per_chip(groups, hw.num_chips, cost.padded_row_bytes)
    weights = dense_bytes(cfg, c.dense_param_bytes)
    heap = {
        EMBEDDING_TABLES: tables,
        EMBEDDING_OPTIMIZER: slots,
        DENSE_WEIGHTS: weights,
        DENSE_OPTIMIZER: weights * c.dense_optimizer_slots,
        CONSTANTS: c.hbm_constant_bytes,
        PREFETCHED_INPUTS: 0,
    }
    replicas = hw.num_total_sparse_cores
    tiles = hw.tiles_per_sparsecore
    sample_count = cfg.global_batch // replicas
    out = []
    for g in groups:
        fwd, bwd = stack_bytes_per_sc(g.width, g.max_unique_ids_per_partition, replicas, c.hbm_stack_bytes_per_element)
        fixed = (
            -(-g.max_ids_per_partition // tiles) * c.spmem_bytes_per_id
            + -(-g.max_unique_ids_per_partition // tiles) * c.spmem_bytes_per_unique_id
        )
        gather = -(-sample_count * g.width // tiles)
        out.append(GroupMemory(g.name, fwd, bwd, fixed, gather, gather * c.activation_bytes))
    spmem = max(m.spmem_fixed_per_tile + m.spmem_gather_per_tile for m in out)
    return StaticMemory(heap, out, hw.sparsecores_per_chip, replicas, spmem, hw.spmem_bytes_per_tile, hw.hbm_bytes)


# -- compile-time failures -----------------------------------------------------------------------


def compile_failure(cfg: RunConfig, hw: HardwareSpec, groups: list[StackGroup], mem: StaticMemory) -> Failure | None:
    """SPMEM overflow of the largest offender, checked as the compiler sizes the buffers."""
    cap = mem.spmem_capacity_per_tile
    tiles = hw.tiles_per_sparsecore
    worst = max(range(len(groups)), key=lambda i: mem.groups[i].spmem_fixed_per_tile)
    m, g = mem.groups[worst], groups[worst]
    if m.spmem_fixed_per_tile > cap:
        return Failure(
            SPMEM_OVERFLOW,
            (
                f"Fixed size allocations ({m.spmem_fixed_per_tile} bytes) do not fit in TileSpmem "
                f"({cap} bytes): table group {g.name!r} is compiled with max_ids_per_partition="
                f"{g.max_ids_per_partition} and max_unique_ids_per_partition="
                f"{g.max_unique_ids_per_partition}, buffered over {tiles} tiles per SparseCore; "
                f"lower the limits (limits file or sparsecore.max_ids_per_partition / "
                f"max_unique_ids_per_partition)"
            ),
            requested_bytes=m.spmem_fixed_per_tile,
            capacity_bytes=cap,
        )
    total = [x.spmem_fixed_per_tile + x.spmem_gather_per_tile for x in mem.groups]
    worst = int(np.argmax(total))
    m, g = mem.groups[worst], groups[worst]
    if total[worst] > cap:
        sample_count = cfg.global_batch // mem.logical_replica_count
        return Failure(
            GATHER_TOO_LARGE,
            (
                f"Gather operand too large: table group {g.name!r} stages (sample_count "
                f"{sample_count} * feature_width {g.width}) / kNumTiles {tiles} = "
                f"{m.gather_elements_per_tile} elements ({m.spmem_gather_per_tile} bytes) per tile, "
                f"but only {cap - m.spmem_fixed_per_tile} of TileSpmem's {cap} bytes are left after "
                f"the fixed size allocations; use a smaller global_batch or more chips "
                f"(hardware.num_chips)"
            ),
            requested_bytes=total[worst],
            capacity_bytes=cap,
        )
    return None


# -- over time -----------------------------------------------------------------------------------


def stack_regions(
    cols: dict[str, np.ndarray],
    start_ps: np.ndarray,
    end_ps: np.ndarray,
    mem: StaticMemory,
    serialized: int,
    chips: int,
) -> dict[str, np.ndarray]:
    """Live intervals of HBM stack: per (step, pass, region, chip) its start, end and bytes.

    `cols` are task columns (TaskGraph.columns()) holding every SparseCore task of their
    steps, with the tasks' start and end. Region r < k (k = `serialized` groups) is group r
    alone; region k holds every other group (the compiler may run them concurrently, so
    their stacks coexist).
    """
    n_groups = len(mem.groups)
    k = min(serialized, n_groups)
    m = np.isin(cols["kind"], (SC_FWD, SC_BWD))
    kind, step, group, chip = cols["kind"][m], cols["step"][m], cols["group"][m], cols["chip"][m]
    backward = (kind == SC_BWD).astype(np.int64)
    region = np.minimum(group, k)
    key = ((step * 2 + backward) * (k + 1) + region) * chips + chip
    uniq, inv = np.unique(key, return_inverse=True)
    start = np.full(len(uniq), np.iinfo(np.int64).max)
    end = np.zeros(len(uniq), np.int64)
    np.minimum.at(start, inv, start_ps[m])
    np.maximum.at(end, inv, end_ps[m])
    sizes = np.zeros((2, k + 1), np.int64)
    for gi in range(n_groups):
        for b in (0, 1):
            sizes[b, min(gi, k)] += mem.stack_per_chip(gi, bool(b))
    u_chip = uniq % chips
    rest = uniq // chips
    u_region = rest % (k + 1)
    rest //= k + 1
    u_back, u_step = rest % 2, rest // 2
    return {
        "chip": u_chip,
        "step": u_step,
        "backward": u_back,
        "region": u_region,
        "start_ps": start,
        "end_ps": end,
        "bytes": sizes[u_back, u_region],
    }


def input_buffer_bytes(sr: StepResult, hw: HardwareSpec, cost: CostModel) -> int:
    """HBM one step's inputs take on a chip: their compiled (static) shape.

    XLA needs static shapes, so the host pads each (source SparseCore, partition) COO
    buffer to the group's max_ids_per_partition entries (`infeed_bytes_per_id` each: row,
    col, gain), once per minibatch; the transfer carries only the filled entries
    (stepgraph.py), the allocation is the whole buffer. Generous limits therefore make
    every prefetched step expensive in HBM.
    """
    per_entry = hw.sparsecores_per_chip * hw.num_total_sparse_cores * cost.c.infeed_bytes_per_id
    return sum(gr.minibatches * gr.group.max_ids_per_partition for gr in sr.groups) * per_entry


class MemoryTimeline:
    """Per chip: prefetched inputs, heap and stack after every change (one sample per time).

    Fed with whole steps (their tasks scheduled, in any order: `add_steps`), read out in
    time order (`advance(until_ps)`: the samples before `until_ps`, which the caller
    guarantees no step still to come changes). A batch run adds every step and advances
    to the end; a streaming run (recording/stream.py) holds only the changes not read out yet.
    """

    def __init__(self, mem: StaticMemory, chips: int, serialized: int):
        self.mem, self.chips, self.serialized = mem, chips, serialized
        z = np.zeros(1, np.int64)
        # per chip, changes not read out: time, d(prefetched bytes), d(count), d(stack), step
        self._pending = [[(z, z, z, z, np.full(1, -1, np.int64))] for _ in range(chips)]
        self._carry = np.zeros((chips, 3), np.int64)  # running prefetched bytes, count, stack

    def add_steps(
        self, cols: dict[str, np.ndarray], start_ps: np.ndarray, end_ps: np.ndarray, step_input: dict[int, int]
    ) -> None:
        """The changes of the steps whose tasks `cols` holds (all their tasks, scheduled);
        `step_input[s]`: input_buffer_bytes of step s."""
        kind, step, chip = cols["kind"], cols["step"], cols["chip"]
        scf = kind == SC_FWD
        steps = np.unique(step[step >= 0])
        released = np.zeros(len(steps), np.int64)
        np.maximum.at(released, np.searchsorted(steps, step[scf]), end_ps[scf])  # the input buffer is free
        reg = stack_regions(cols, start_ps, end_ps, self.mem, self.serialized, self.chips)
        inf = kind == INFEED
        keys = np.array(sorted(step_input), np.int64)
        held = np.array([step_input[k] for k in keys.tolist()], np.int64)[np.searchsorted(keys, step[inf])]
        rel = released[np.searchsorted(steps, step[inf])]
        for c in range(self.chips):
            i = chip[inf] == c
            r = reg["chip"] == c
            n_inf, n_reg = int(i.sum()), int(r.sum())
            zi, zr = np.zeros(2 * n_inf, np.int64), np.zeros(2 * n_reg, np.int64)
            self._pending[c].append(
                (
                    np.concatenate([end_ps[inf][i], rel[i], reg["start_ps"][r], reg["end_ps"][r]]),
                    np.concatenate([held[i], -held[i], zr]),
                    np.concatenate([np.ones(n_inf, np.int64), -np.ones(n_inf, np.int64), zr]),
                    np.concatenate([zi, reg["bytes"][r], -reg["bytes"][r]]),
                    np.concatenate([step[inf][i], step[inf][i], reg["step"][r], reg["step"][r]]),
                )
            )

    def advance(self, until_ps: float) -> list[ChipMemory]:
        """Per chip, the samples at times before `until_ps` not read out yet."""
        out = []
        for c in range(self.chips):
            parts = self._pending[c] or [tuple(np.zeros(0, np.int64) for _ in range(5))]
            t, d_pre, d_cnt, d_stk, st = (np.concatenate(x) for x in zip(*parts, strict=True))
            now = t < until_ps
            self._pending[c] = [] if now.all() else [tuple(x[~now] for x in (t, d_pre, d_cnt, d_stk, st))]
            o = np.flatnonzero(now)
            o = o[np.argsort(t[o], kind="stable")]
            t, d_pre, d_cnt, d_stk, st = t[o], d_pre[o], d_cnt[o], d_stk[o], st[o]
            new_time = np.append(True, t[1:] != t[:-1]) if len(t) else np.zeros(0, bool)
            last = np.append(new_time[1:], True) if len(t) else new_time  # the value after all changes
            # the step whose allocation grew memory at that time (for failure reports)
            grow = np.where((d_pre > 0) | (d_stk > 0), st, -1)
            grow_at = np.maximum.reduceat(grow, np.flatnonzero(new_time)) if len(t) else grow
            pre, cnt, stk = (self._carry[c, j] + np.cumsum(d)[last] for j, d in enumerate((d_pre, d_cnt, d_stk)))
            self._carry[c] += [int(d_pre.sum()), int(d_cnt.sum()), int(d_stk.sum())]
            out.append(ChipMemory(t[last], pre, cnt, stk, self.mem.heap_static, step_of_change=grow_at))
        return out


def memory_timeline(sim: Simulation) -> list[ChipMemory]:
    """Per chip: prefetched inputs, heap and stack after every change, over the whole run."""
    tl = MemoryTimeline(sim.memory, sim.hw.num_chips, sim.cfg.flags.xla_sc_num_serialized_tables_to_optimize_hbm)
    step_input = {sr.step: input_buffer_bytes(sr, sim.hw, sim.cost) for sr in sim.steps}
    tl.add_steps(sim.graph.columns(), sim.schedule.start_ps, sim.schedule.end_ps, step_input)
    return tl.advance(np.inf)


def fmt_size(nbytes: float) -> str:
    """Sizes as XLA's memory errors print them: 1.23G, 45.60M, 7.00K (binary units), 12B."""
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f}{unit}"
    return f"{int(nbytes)}B"


def find_oom(mem: StaticMemory, timeline: list[ChipMemory]) -> Failure | None:
    """The first moment heap + stack exceed HBM on some chip (earliest time, then lowest chip)."""
    cap = mem.hbm_capacity
    first: tuple[int, int, int] | None = None
    for c, cm in enumerate(timeline):
        over = np.flatnonzero(cm.heap_bytes + cm.stack_bytes > cap)
        if len(over) and (first is None or cm.ts_ps[over[0]] < first[0]):
            first = (int(cm.ts_ps[over[0]]), c, int(over[0]))
    if first is None:
        return None
    ts, c, i = first
    cm = timeline[c]
    parts = dict(mem.heap)
    parts[PREFETCHED_INPUTS] = int(cm.prefetched_bytes[i])
    parts[STACK] = int(cm.stack_bytes[i])
    used = sum(parts.values())
    step = int(cm.step_of_change[i])
    named = sorted(((v, k) for k, v in parts.items() if v > 0), key=lambda x: (-x[0], x[1]))
    heap = used - parts[STACK]
    hint = (
        "serialize table groups (flags.xla_sc_num_serialized_tables_to_optimize_hbm) or "
        "lower the per-partition limits, which size the stack"
        if parts[STACK] > heap
        else "lower flags.maximum_parallel_iterations, shrink the dense part, or spread the "
        "tables over more chips (hardware.num_chips)"
    )
    when = f"at {ts / 1e6:.1f} us (step {step})" if step >= 0 else "before step 0"
    message = (
        f"Ran out of memory in memory space hbm on TPU:{c} {when}. Used {fmt_size(used)} of "
        f"{fmt_size(cap)} hbm. Exceeded hbm capacity by {fmt_size(used - cap)}. Contributors: "
        + ", ".join(f"{k} {fmt_size(v)}" for v, k in named)
        + f"; {hint}"
    )
    return Failure(HBM_OOM, message, ts, c, step if step >= 0 else None, used, cap)

"""Cost model: how long each task takes on the simulated hardware.

The one place where time is invented. Every constant lives in `CostConstants` with its
source (the SparseCore guide, a spec sheet, or "assumption"; docs/emulator.md); a workload
config can override any of them under `[cost]`. Other modules only call a `CostModel`; two
are registered in `COST_MODELS`: `AnalyticCostModel` (roofline formulas for every task)
and `TableCostModel` (the default: TensorCore GEMMs and ICI collectives from performance
tables with XLA-style interpolation, docs/emulator.md "Cost model: performance tables";
DCN collectives from an analytic S-curve; host and SparseCore tasks as in the analytic
model).

All functions take and return numpy arrays or ints; results are int64 picoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

from sim_backend.errors import ConfigError
from sim_backend.hardware import HardwareSpec
from sim_backend.perf_tables import bundled_dir
from sim_backend.perf_tables.roofline import RooflineInputs, roofline_tables
from sim_backend.perf_tables.tables import PerfTables, load_tables

if TYPE_CHECKING:  # dense.py imports config.py, which imports this module
    from sim_backend.dense import Gemm

PS_PER_S = 1e12


@dataclass(frozen=True)
class CostConstants:
    """Tunable constants of the analytic model (docs/emulator.md gives each source)."""

    # Per-task overhead of a task-graph runtime is about 1-2 us.
    task_overhead_ps: int = 1_500_000
    # Assumption: host preprocessing (COO, dedup, partitioning, limit checks) per ID on one
    # host thread, for compiled multi-threaded input code.
    host_ps_per_id: int = 2_500
    # Assumption: fixed cost of one host preprocessing task (dispatch, buffer allocation).
    host_task_overhead_ps: int = 20_000_000
    # Assumption: bytes the host sends to HBM per ID (int32 row id + int32 col id + f32 weight).
    infeed_bytes_per_id: int = 12
    # Assumption: latency of one host->HBM DMA.
    infeed_latency_ps: int = 5_000_000
    # Assumption: fixed cost of one SparseCore pass (one table group x minibatch): program
    # loop iteration, cross-SparseCore synchronisation, SPMEM buffer setup. Why
    # minibatching costs time beyond the IDs it moves.
    sc_pass_overhead_ps: int = 15_000_000
    # Assumption: SparseCore cycles per tile per slot of the ID buffers for sort/dedup/
    # cross-lane work. The limits size these buffers statically, and lower
    # limits are faster ("less data must be processed"): the work runs over every slot of
    # the compiled buffers (one per source SparseCore, max_ids_per_partition slots each),
    # filled or not.
    sc_cycles_per_id: float = 4.0
    # Assumption: SparseCore cycles per tile per slot of the unique-ID buffers (dedup/CSR,
    # max_unique_ids_per_partition slots per source SparseCore), filled or not.
    sc_cycles_per_unique_slot: float = 1.0
    # Assumption: share of the chip's HBM bandwidth one SparseCore achieves on row gathers.
    sc_hbm_efficiency: float = 0.7
    # The SparseCore pads the feature dimension to 32 bytes (8 floats).
    row_padding_bytes: int = 32
    # Assumption: fraction of peak FLOPs the TensorCore reaches on the dense MLP.
    tc_efficiency: float = 0.5
    # Assumption: fraction of ICI bandwidth a collective reaches.
    ici_efficiency: float = 0.8
    # Assumption: fixed latency of one ICI collective.
    ici_latency_ps: int = 5_000_000
    # Assumption: bytes per activation/gradient element crossing ICI and HBM (f32).
    activation_bytes: int = 4
    # Assumption: bytes per dense parameter in the gradient all-reduce (f32).
    dense_param_bytes: int = 4
    # -- memory model (sim_backend/memory.py; docs/emulator.md "Memory model") --
    # Assumption: optimizer slots per dense parameter (Adam-like: two moments).
    dense_optimizer_slots: int = 2
    # Assumption: constants the compiled program keeps in HBM per chip (DLRM-like models
    # hold only small ones); raise it to model a model with big constant tensors.
    hbm_constant_bytes: int = 0
    # The "* 4 byte" of the HBM stack formulas (docs/emulator.md "Memory model") (f32 elements).
    hbm_stack_bytes_per_element: int = 4
    # Assumption: SPMEM bytes per ID buffered for a partition (int32 row, int32 col, f32 gain).
    spmem_bytes_per_id: int = 12
    # Assumption: SPMEM bytes per unique ID of a partition (int32 ID + int32 position, dedup/CSR).
    spmem_bytes_per_unique_id: int = 8
    # -- debug checks (sim_backend/debug_checks.py; docs/emulator.md "Quantization and debug
    # checks"): the checks cost time; how much is assumed --
    # Assumption: SparseCore cycles per ID per tile to compare it with its table's vocabulary
    # (xla_sparse_core_enable_id_bound_check), forward pass only.
    sc_bound_check_cycles_per_id: float = 1.0
    # Assumption: extra SIMD passes over each row an SC op produces or consumes to test it for
    # NaN (xla_sc_detect_nan): activations forward, gradients backward.
    sc_nan_check_passes: float = 1.0
    # -- DCN S-curve (multi-slice; an analytic model as XLA's estimator: launch overhead,
    # NIC speed, RTT are its inputs; the values are ours) --
    # Assumption: fixed cost to launch one cross-slice collective.
    dcn_launch_overhead_ps: int = 20_000_000
    # Assumption: DCN bytes/s one chip's share of the host NICs carries (100 Gb/s).
    dcn_nic_bytes_per_s: float = 12.5e9
    # Assumption: round trip between slices over the data-centre network, paid per ring step.
    dcn_rtt_ps: int = 10_000_000


class CostModel(Protocol):
    """What the task-graph builder asks of a cost model (vectorised over numpy arrays)."""

    c: CostConstants  # the constants in force (byte sizes are read by the graph builder)
    perf_tables_source: str  # tables the model reads ("bundled:v5p", a path; "" for none)

    def padded_row_bytes(self, width: int, dtype_bytes: int) -> int: ...
    def host_preprocess_ps(self, ids: np.ndarray) -> np.ndarray: ...
    def host_to_device_ps(self, nbytes: np.ndarray) -> np.ndarray: ...
    def sc_forward_bytes(self, ids: np.ndarray, unique_ids: np.ndarray, width: int, dtype_bytes: int) -> np.ndarray: ...
    def sc_backward_bytes(
        self, ids: np.ndarray, unique_ids: np.ndarray, width: int, dtype_bytes: int, optimizer_slots: int
    ) -> np.ndarray: ...
    def sc_forward_ps(
        self, ids: np.ndarray, unique_ids: np.ndarray, width: int, dtype_bytes: int, limits: tuple[int, int]
    ) -> np.ndarray: ...
    def sc_backward_ps(
        self,
        ids: np.ndarray,
        unique_ids: np.ndarray,
        width: int,
        dtype_bytes: int,
        optimizer_slots: int,
        limits: tuple[int, int],
    ) -> np.ndarray: ...
    def tc_pass_ps(self, gemms: Sequence[Gemm], nbytes: int) -> int: ...
    def collective_ps(self, kind: str, nbytes: np.ndarray, num_devices: int) -> np.ndarray: ...
    def table_init_ps(self, nbytes: np.ndarray, on_host: bool) -> np.ndarray: ...


# No simulated task of a training step takes longer (a 20 GB table initialised over a 2 GB/s
# link takes 10 s); a longer one means rates configured too low for the sizes, and its
# picoseconds would leave int64 within a few steps.
MAX_TASK_S = 3600.0


def _ps(seconds: np.ndarray | float) -> np.ndarray:
    s = np.asarray(seconds, dtype=np.float64)
    if s.size and not np.all(s <= MAX_TASK_S):  # also catches NaN and infinity
        worst = float(np.nanmax(s)) if not np.all(np.isnan(s)) else float("nan")
        raise ConfigError(
            f"cost model: a simulated task would take {worst:.3g} s (more than {MAX_TASK_S:g} s): a bandwidth, "
            f"clock, FLOP rate or efficiency (hardware.*, cost.*) is too low for the sizes configured"
        )
    return np.ceil(s * PS_PER_S).astype(np.int64)


class AnalyticCostModel:
    """Roofline-style model: each task takes overhead + max(memory time, compute time)."""

    perf_tables_source = ""

    def __init__(self, hw: HardwareSpec, constants: CostConstants, perf_tables: str = ""):
        if perf_tables:
            raise ConfigError(
                f"perf_tables: {perf_tables!r} is set, but cost_model = 'analytic' "
                f"reads no tables (use cost_model = 'tables')"
            )
        self.hw = hw
        self.c = constants

    def padded_row_bytes(self, width: int, dtype_bytes: int) -> int:
        """Bytes of one embedding row after padding the feature dimension (to 32 bytes)."""
        pad = self.c.row_padding_bytes
        return -(-width * dtype_bytes // pad) * pad

    def host_preprocess_ps(self, ids: np.ndarray) -> np.ndarray:
        return self.c.host_task_overhead_ps + np.asarray(ids, np.int64) * self.c.host_ps_per_id

    def host_to_device_ps(self, nbytes: np.ndarray) -> np.ndarray:
        return self.c.infeed_latency_ps + _ps(np.asarray(nbytes) / self.hw.host_to_device_bandwidth_bytes_per_s)

    def _sc_bandwidth(self) -> float:
        """HBM bytes/s one SparseCore gets: the chip's bandwidth shared by its SCs."""
        return self.hw.hbm_bandwidth_bytes_per_s / self.hw.sparsecores_per_chip * self.c.sc_hbm_efficiency

    def _simd_lanes(self, dtype_bytes: int) -> int:
        """SIMD lanes for rows of this element size: bf16 rows use the bf16 width (docs/emulator.md
        "Hardware presets": 16 on Trillium, 8 on v4 / v5p), f32 and int8 rows the f32 width."""
        return self.hw.simd_width_bf16 if dtype_bytes == 2 else self.hw.simd_width

    def _sc_compute_s(
        self, ids: np.ndarray, width: int, dtype_bytes: int, passes: float, limits: tuple[int, int]
    ) -> np.ndarray:
        """Tile time: sort/dedup over the compiled buffers plus `passes` SIMD passes per ID's row.

        `limits` = (max_ids_per_partition, max_unique_ids_per_partition) of the op's table
        group: the partition holds one statically sized buffer per source SparseCore
        (the compiled limits), and the sort/dedup/CSR work runs over all their slots. A
        row pass takes ceil(width / lanes) vector ops, lanes by the table's element type.
        """
        hw = self.hw
        vec_ops = np.ceil(width / self._simd_lanes(dtype_bytes))
        n_src = hw.num_total_sparse_cores
        buffer_cycles = n_src * (limits[0] * self.c.sc_cycles_per_id + limits[1] * self.c.sc_cycles_per_unique_slot)
        cycles = buffer_cycles + np.asarray(ids, np.float64) * (passes * vec_ops)
        return cycles / hw.tiles_per_sparsecore / hw.sc_clock_hz

    def sc_forward_bytes(self, ids, unique_ids, width, dtype_bytes):
        """HBM bytes a forward lookup moves: each unique row read, each ID's activation row
        written, both padded to `row_padding_bytes` (32-byte rows)."""
        row = self.padded_row_bytes(width, dtype_bytes)
        out_row = self.padded_row_bytes(width, self.c.activation_bytes)
        return np.asarray(unique_ids, np.int64) * row + np.asarray(ids, np.int64) * out_row

    def sc_backward_bytes(self, ids, unique_ids, width, dtype_bytes, optimizer_slots):
        """HBM bytes an update moves: each ID's gradient row read, then each unique row and its
        optimizer slots read and written, padded rows."""
        row = self.padded_row_bytes(width, dtype_bytes)
        grad_row = self.padded_row_bytes(width, self.c.activation_bytes)
        unique = np.asarray(unique_ids, np.int64)
        return np.asarray(ids, np.int64) * grad_row + 2 * unique * row * (1 + optimizer_slots)

    def sc_forward_ps(self, ids, unique_ids, width, dtype_bytes, limits):
        mem = self.sc_forward_bytes(ids, unique_ids, width, dtype_bytes) / self._sc_bandwidth()
        comp = self._sc_compute_s(ids, width, dtype_bytes, 1.0, limits)
        return self.c.task_overhead_ps + self.c.sc_pass_overhead_ps + _ps(np.maximum(mem, comp))

    def sc_backward_ps(self, ids, unique_ids, width, dtype_bytes, optimizer_slots, limits):
        mem = self.sc_backward_bytes(ids, unique_ids, width, dtype_bytes, optimizer_slots) / self._sc_bandwidth()
        comp = self._sc_compute_s(ids, width, dtype_bytes, 2.0 + optimizer_slots, limits)
        return self.c.task_overhead_ps + self.c.sc_pass_overhead_ps + _ps(np.maximum(mem, comp))

    def tc_pass_ps(self, gemms, nbytes):
        """One TensorCore pass running `gemms`, moving `nbytes` through HBM: the slower of the two."""
        comp = self._gemms_s(gemms)
        mem = nbytes / self.hw.hbm_bandwidth_bytes_per_s
        return self.c.task_overhead_ps + int(_ps(max(comp, mem)))

    def _gemms_s(self, gemms: Sequence[Gemm]) -> float:
        """Seconds of compute for `gemms` at the assumed share of peak FLOP/s."""
        return sum(g.flops for g in gemms) / (self.hw.tc_peak_flops * self.c.tc_efficiency)

    def collective_ps(self, kind, nbytes, num_devices):
        """Task overhead + the collective: in-slice over ICI, hierarchical across slices.

        With `hardware.num_slices` > 1 the dense all-reduce (`nbytes` = a ring all-reduce's
        2(n-1)/n of the buffer B per chip) becomes reduce-scatter in the slice ((n-1)/n B,
        half of `nbytes`), an all-reduce of each chip's B/n shard with its peers in the other
        slices over DCN (`dcn_all_reduce_s`), then all-gather in the slice.
        """
        nbytes = np.asarray(nbytes, np.float64)
        if num_devices <= 1:
            return np.full(np.shape(nbytes), self.c.task_overhead_ps, np.int64)
        slices = self.hw.num_slices
        if kind != "all-reduce" or slices <= 1:
            return self.c.task_overhead_ps + self._ici_ps(kind, nbytes, num_devices)
        n = num_devices
        shard = nbytes * n / (2 * (n - 1)) / n
        return (
            self.c.task_overhead_ps
            + self._ici_ps("reduce-scatter", nbytes / 2, n)
            + _ps(dcn_all_reduce_s(shard, slices, self.c))
            + self._ici_ps("all-gather", nbytes / 2, n)
        )

    def _ici_ps(self, kind: str, nbytes: np.ndarray, num_devices: int) -> np.ndarray:
        """One collective inside the slice: fixed latency + bytes / (ICI bw * efficiency)."""
        bw = self.hw.ici_bandwidth_bytes_per_s * self.c.ici_efficiency
        return self.c.ici_latency_ps + _ps(nbytes / bw)

    def table_init_ps(self, nbytes, on_host):
        bw = self.hw.host_to_device_bandwidth_bytes_per_s if on_host else self.hw.hbm_bandwidth_bytes_per_s
        return self.c.task_overhead_ps + _ps(np.asarray(nbytes, np.float64) / bw)


# -- DCN: analytic S-curve --------------------------------------------------------------


def dcn_all_reduce_s(shard_bytes: np.ndarray, num_slices: int, c: CostConstants) -> np.ndarray:
    """Seconds to all-reduce `shard_bytes` per chip over `num_slices` slices on DCN.

    An S-curve model (inputs: launch overhead, NIC speed, RTT; as XLA's
    analytical estimator): a ring over the slices, reduce-scatter then all-gather, each
    of `num_slices - 1` steps paying one RTT and sending shard / num_slices bytes through
    the NIC, plus one launch overhead. Achieved bandwidth = shard / time rises as a
    logistic curve in log(size): latency-bound (proportional to size) for small shards,
    NIC-bound for large ones (`dcn_bus_bandwidth`).
    """
    shard = np.asarray(shard_bytes, np.float64)
    if num_slices <= 1:
        return np.zeros(shard.shape)
    steps = 2 * (num_slices - 1)
    per_step = c.dcn_rtt_ps / PS_PER_S + shard / num_slices / c.dcn_nic_bytes_per_s
    return c.dcn_launch_overhead_ps / PS_PER_S + steps * per_step


def dcn_bus_bandwidth(num_slices: int, c: CostConstants) -> float:
    """The large-shard limit of shard / dcn_all_reduce_s: NIC speed x n / (2 (n - 1))."""
    return c.dcn_nic_bytes_per_s * num_slices / (2 * (num_slices - 1))


# -- performance tables -----------------------------------------------------------------

# Model choice: collectives inside a slice follow the ICI torus rings.
TRANSFER_SCHEME = "rail-aligned"
# The GEMM element type of the dense part, by dense_param_bytes.
DTYPE_BY_BYTES = {4: "f32", 2: "bf16", 1: "int8"}


def roofline_inputs(hw: HardwareSpec, c: CostConstants) -> RooflineInputs:
    """What the roofline tables of this hardware and these constants are generated from."""
    return RooflineInputs.of(hw, c.tc_efficiency, c.ici_efficiency, c.ici_latency_ps)


@lru_cache(maxsize=8)
def _bundled(generation: str) -> PerfTables | None:
    """The committed tables of a preset (read once per process), None for other generations."""
    try:
        return load_tables(bundled_dir(generation), f"bundled:{generation}")
    except ConfigError:
        return None


def default_tables(hw: HardwareSpec, c: CostConstants) -> PerfTables:
    """The bundled tables of hw.generation, or the same roofline for changed figures.

    The bundled tables hold the inputs they were generated from; when the resolved
    hardware or the constants they use (tc_efficiency, ici_efficiency, ici_latency_ps)
    differ (a `--set` override, `generation = "custom"`), the roofline is generated again
    in memory so the override takes effect, and the source says which inputs differ.
    """
    inp = roofline_inputs(hw, c)
    bundled = _bundled(hw.generation)
    if bundled is not None and bundled.generated_from == inp.as_dict():
        return bundled
    base = bundled.generated_from if bundled is not None else {}
    changed = sorted(k for k, v in inp.as_dict().items() if base.get(k) != v)
    note = "" if not base else f" ({', '.join(changed)} differ from the bundled tables)"
    return roofline_tables(inp, f"roofline:{hw.generation}{note}")


class TableCostModel(AnalyticCostModel):
    """XLA-style: GEMMs and ICI collectives from performance tables, DCN from the S-curve.

    TensorCore: a pass is the sum of its GEMMs' table times (the per-device GEMMs the task
    graph passes: `sharding.plan_dense` forward GEMMs, or their gradients for backward),
    in the dtype of the dense parameters, floored by the pass's HBM bytes / bandwidth
    (weights and activations must be read at least once, which the per-GEMM times of a
    table need not include). Collectives: size / interpolated throughput of
    (kind, TRANSFER_SCHEME); hierarchical over DCN with several slices (as the analytic
    model). Host, SparseCore and initialisation tasks are the analytic model's.
    """

    def __init__(self, hw: HardwareSpec, constants: CostConstants, perf_tables: str = ""):
        super().__init__(hw, constants)
        self.tables = load_tables(perf_tables) if perf_tables else default_tables(hw, constants)
        self.perf_tables_source = self.tables.source
        for kind in ("all-to-all", "all-reduce") + (("reduce-scatter", "all-gather") if hw.num_slices > 1 else ()):
            self.tables.require(kind)
        self.dense_dtype = DTYPE_BY_BYTES.get(constants.dense_param_bytes, "f32")

    def _gemms_s(self, gemms: Sequence[Gemm]) -> float:
        """Seconds of GEMMs run one after another, each from the GEMM table of its dtype."""
        dims = np.array([(g.batch, g.m, g.n, g.k) for g in gemms], np.float64).reshape(-1, 4)
        return float(self.tables.gemm_time_s(*dims.T, self.dense_dtype).sum()) if len(dims) else 0.0

    def _ici_ps(self, kind, nbytes, num_devices):
        return _ps(self.tables.collective_time_s(kind, TRANSFER_SCHEME, nbytes, num_devices))


COST_MODELS = {"analytic": AnalyticCostModel, "tables": TableCostModel}
DEFAULT_COST_MODEL = "tables"
COST_CONSTANT_NAMES = tuple(f.name for f in fields(CostConstants))


def make_cost_model(name: str, hw: HardwareSpec, overrides: dict, perf_tables: str = "") -> CostModel:
    """Build the named cost model with `overrides` applied to the default constants.

    `perf_tables`: a table directory ("" = the bundled tables of hw.generation; only the
    table model reads tables).
    """
    return COST_MODELS[name](hw, CostConstants(**overrides), perf_tables)

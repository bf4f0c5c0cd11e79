"""Cost model: how long each task takes on the simulated hardware.

The one place where time is invented. Every constant lives in `CostConstants` with
its source (DOMAIN.md section, a spec sheet, or "assumption"); a workload config can
override any of them under `[cost]`. Other modules only call a `CostModel`, so a
different model (issue 4: performance tables, XLA-style interpolation) can replace
`AnalyticCostModel` by registering under another name in `COST_MODELS`.

All functions take and return numpy arrays or ints; results are int64 picoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

import numpy as np

from sim_backend.hardware import HardwareSpec

PS_PER_S = 1e12


@dataclass(frozen=True)
class CostConstants:
    """Tunable constants of the analytic model (docs/emulator.md gives each source)."""

    # DOMAIN.md §5: per-task overhead of a task-graph runtime is about 1-2 us.
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
    # Assumption: SparseCore cycles per ID per tile for sort/dedup/cross-lane work.
    sc_cycles_per_id: float = 4.0
    # Assumption: share of the chip's HBM bandwidth one SparseCore achieves on row gathers.
    sc_hbm_efficiency: float = 0.7
    # DOMAIN.md §1: feature dimension is padded to 32 bytes (8 floats).
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
    # DOMAIN.md §1: the "* 4 byte" of the HBM stack formulas (f32 elements).
    hbm_stack_bytes_per_element: int = 4
    # Assumption: SPMEM bytes per ID buffered for a partition (int32 row, int32 col, f32 gain).
    spmem_bytes_per_id: int = 12
    # Assumption: SPMEM bytes per unique ID of a partition (int32 ID + int32 position, dedup/CSR).
    spmem_bytes_per_unique_id: int = 8


class CostModel(Protocol):
    """What the task-graph builder asks of a cost model (vectorised over numpy arrays)."""

    c: CostConstants  # the constants in force (byte sizes are read by the graph builder)

    def padded_row_bytes(self, width: int, dtype_bytes: int) -> int: ...
    def host_preprocess_ps(self, ids: np.ndarray) -> np.ndarray: ...
    def host_to_device_ps(self, nbytes: np.ndarray) -> np.ndarray: ...
    def sc_forward_ps(self, ids: np.ndarray, unique_ids: np.ndarray, width: int,
                      dtype_bytes: int) -> np.ndarray: ...
    def sc_backward_ps(self, ids: np.ndarray, unique_ids: np.ndarray, width: int,
                       dtype_bytes: int, optimizer_slots: int) -> np.ndarray: ...
    def tc_ps(self, flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray: ...
    def collective_ps(self, kind: str, nbytes: np.ndarray, num_devices: int) -> np.ndarray: ...
    def table_init_ps(self, nbytes: np.ndarray, on_host: bool) -> np.ndarray: ...


def _ps(seconds: np.ndarray | float) -> np.ndarray:
    return np.ceil(np.asarray(seconds, dtype=np.float64) * PS_PER_S).astype(np.int64)


class AnalyticCostModel:
    """Roofline-style model: each task takes overhead + max(memory time, compute time)."""

    def __init__(self, hw: HardwareSpec, constants: CostConstants):
        self.hw = hw
        self.c = constants

    def padded_row_bytes(self, width: int, dtype_bytes: int) -> int:
        """Bytes of one embedding row after padding the feature dimension (DOMAIN.md §1)."""
        pad = self.c.row_padding_bytes
        return -(-width * dtype_bytes // pad) * pad

    def host_preprocess_ps(self, ids: np.ndarray) -> np.ndarray:
        return self.c.host_task_overhead_ps + np.asarray(ids, np.int64) * self.c.host_ps_per_id

    def host_to_device_ps(self, nbytes: np.ndarray) -> np.ndarray:
        return self.c.infeed_latency_ps + _ps(
            np.asarray(nbytes) / self.hw.host_to_device_bandwidth_bytes_per_s)

    def _sc_bandwidth(self) -> float:
        """HBM bytes/s one SparseCore gets: the chip's bandwidth shared by its SCs."""
        return self.hw.hbm_bandwidth_bytes_per_s / self.hw.sparsecores_per_chip * self.c.sc_hbm_efficiency

    def _sc_compute_s(self, ids: np.ndarray, width: int, passes: float) -> np.ndarray:
        """Tile time: per-ID sort/dedup work plus `passes` SIMD passes over each row."""
        hw = self.hw
        vec_ops = np.ceil(width / hw.simd_width)
        cycles = np.asarray(ids, np.float64) * (self.c.sc_cycles_per_id + passes * vec_ops)
        return cycles / hw.tiles_per_sparsecore / hw.sc_clock_hz

    def sc_forward_ps(self, ids, unique_ids, width, dtype_bytes):
        row = self.padded_row_bytes(width, dtype_bytes)
        out_row = self.padded_row_bytes(width, self.c.activation_bytes)
        mem = (np.asarray(unique_ids) * row + np.asarray(ids) * out_row) / self._sc_bandwidth()
        comp = self._sc_compute_s(ids, width, passes=1.0)
        return self.c.task_overhead_ps + self.c.sc_pass_overhead_ps + _ps(np.maximum(mem, comp))

    def sc_backward_ps(self, ids, unique_ids, width, dtype_bytes, optimizer_slots):
        row = self.padded_row_bytes(width, dtype_bytes)
        grad_row = self.padded_row_bytes(width, self.c.activation_bytes)
        # read gradients, then read-modify-write each unique row and its optimizer slots
        mem = (np.asarray(ids) * grad_row
               + 2 * np.asarray(unique_ids) * row * (1 + optimizer_slots)) / self._sc_bandwidth()
        comp = self._sc_compute_s(ids, width, passes=2.0 + optimizer_slots)
        return self.c.task_overhead_ps + self.c.sc_pass_overhead_ps + _ps(np.maximum(mem, comp))

    def tc_ps(self, flops, nbytes):
        comp = np.asarray(flops, np.float64) / (self.hw.tc_peak_flops * self.c.tc_efficiency)
        mem = np.asarray(nbytes, np.float64) / self.hw.hbm_bandwidth_bytes_per_s
        return self.c.task_overhead_ps + _ps(np.maximum(comp, mem))

    def collective_ps(self, kind, nbytes, num_devices):
        if num_devices <= 1:
            return np.full(np.shape(nbytes), self.c.task_overhead_ps, np.int64)
        bw = self.hw.ici_bandwidth_bytes_per_s * self.c.ici_efficiency
        return (self.c.task_overhead_ps + self.c.ici_latency_ps
                + _ps(np.asarray(nbytes, np.float64) / bw))

    def table_init_ps(self, nbytes, on_host):
        bw = (self.hw.host_to_device_bandwidth_bytes_per_s if on_host
              else self.hw.hbm_bandwidth_bytes_per_s)
        return self.c.task_overhead_ps + _ps(np.asarray(nbytes, np.float64) / bw)


COST_MODELS = {"analytic": AnalyticCostModel}
COST_CONSTANT_NAMES = tuple(f.name for f in fields(CostConstants))


def make_cost_model(name: str, hw: HardwareSpec, overrides: dict) -> CostModel:
    """Build the named cost model with `overrides` applied to the default constants."""
    return COST_MODELS[name](hw, CostConstants(**overrides))

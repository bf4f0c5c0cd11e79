"""Roofline-derived performance tables: what the default tables hold, since we cannot measure.

The grid is a table collector's: collectives all-reduce, all-gather, reduce-scatter
(plus all-to-all, which the emulator needs) x rail-aligned / non-rail-aligned, transfer
sizes 1 KiB .. 2 GiB on a log2 scale, 2/4/8 devices; GEMMs batch {1, 2, 4} x m, n, k in
{256, 512, 1024, 2048, 4096}, in bf16 and f32. Values (docs/emulator.md "Cost model:
performance tables" states every number and its status):

* collective of S bytes per device over n devices (a ring: `steps` hops):
  time = ici_latency + (steps - 1) * ICI_STEP_LATENCY_PS + S / (ICI bw * ici_efficiency
  * scheme factor); throughput = S / time. The latency term is the efficiency curve:
  achieved / peak = S / (S + latency * bw), small transfers latency-bound.
* GEMM: time = max(2 b m n k / (peak * dtype factor * tc_efficiency * shape efficiency),
  b (m k + k n + m n) * dtype bytes / HBM bw); shape efficiency = product over m, n, k of
  d / (d + GEMM_HALF_EFFICIENCY_DIM) (small dimensions fill the matrix unit poorly);
  FLOP/s = 2 b m n k / time.

Values are rounded to SIGNIFICANT_DIGITS (a table is a measurement, not an identity), and
use only + - * / so that every platform generates the same text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sim_backend.hardware import HardwareSpec
from sim_backend.perf_tables.tables import DTYPE_BYTES, CollectiveEntry, GemmEntry, PerfTables

# the collector's sweep
COLLECTIVE_SIZES = tuple(1 << e for e in range(10, 32))  # 1 KiB .. 2 GiB
DEVICE_COUNTS = (2, 4, 8)
TABLE_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
TABLE_SCHEMES = ("rail-aligned", "non-rail-aligned")
GEMM_BATCHES = (1, 2, 4)
GEMM_DIMS = (256, 512, 1024, 2048, 4096)
GEMM_DTYPES = ("bf16", "f32")
SIGNIFICANT_DIGITS = 6
# Assumption: latency of each ring hop after the first (a collective's fixed latency is the
# cost constant ici_latency_ps).
ICI_STEP_LATENCY_PS = 500_000
# Assumption: a transfer not aligned with the torus rings (multi-hop routes) reaches this
# share of the rail-aligned bandwidth.
NON_RAIL_ALIGNED_BANDWIDTH_FACTOR = 0.5
# Assumption: dimension at which a GEMM reaches half its efficiency on that dimension
# (the MXU is 128 x 128; a dimension of 256 reaches 256 / 288 = 89%).
GEMM_HALF_EFFICIENCY_DIM = 32
# Assumption: f32 dots run at the bf16 peak (XLA on TPU: default precision, one bf16 pass
# through the MXU); only their bytes double.
F32_PEAK_FRACTION = 1.0


@dataclass(frozen=True)
class RooflineInputs:
    """Every figure a roofline table depends on (stored as the tables' `generated_from`)."""

    generation: str
    tc_peak_flops: float
    hbm_bandwidth_bytes_per_s: float
    ici_bandwidth_bytes_per_s: float
    tc_efficiency: float
    ici_efficiency: float
    ici_latency_ps: int
    ici_step_latency_ps: int = ICI_STEP_LATENCY_PS
    non_rail_aligned_bandwidth_factor: float = NON_RAIL_ALIGNED_BANDWIDTH_FACTOR
    gemm_half_efficiency_dim: int = GEMM_HALF_EFFICIENCY_DIM
    f32_peak_fraction: float = F32_PEAK_FRACTION

    @classmethod
    def of(cls, hw: HardwareSpec, tc_efficiency: float, ici_efficiency: float, ici_latency_ps: int) -> RooflineInputs:
        """The inputs for resolved hardware and the cost constants in force."""
        return cls(
            hw.generation,
            hw.tc_peak_flops,
            hw.hbm_bandwidth_bytes_per_s,
            hw.ici_bandwidth_bytes_per_s,
            tc_efficiency,
            ici_efficiency,
            ici_latency_ps,
        )

    def as_dict(self) -> dict:
        return asdict(self)


def ring_steps(collective: str, devices: int) -> int:
    """Hops of a ring collective: all-reduce = reduce-scatter + all-gather."""
    return 2 * (devices - 1) if collective == "all-reduce" else devices - 1


def collective_time_s(inp: RooflineInputs, collective: str, scheme: str, nbytes: int, devices: int) -> float:
    """Roofline seconds of one collective (latency + size / bandwidth)."""
    bw = inp.ici_bandwidth_bytes_per_s * inp.ici_efficiency
    if scheme != "rail-aligned":
        bw *= inp.non_rail_aligned_bandwidth_factor
    latency_ps = inp.ici_latency_ps + (ring_steps(collective, devices) - 1) * inp.ici_step_latency_ps
    return latency_ps / 1e12 + nbytes / bw


def gemm_time_s(inp: RooflineInputs, dtype: str, b: int, m: int, n: int, k: int) -> float:
    """Roofline seconds of one GEMM: compute at a shape-dependent efficiency, or HBM-bound."""
    peak = inp.tc_peak_flops * inp.tc_efficiency * (inp.f32_peak_fraction if dtype == "f32" else 1.0)
    h = inp.gemm_half_efficiency_dim
    shape = m / (m + h) * (n / (n + h)) * (k / (k + h))
    compute = 2.0 * b * m * n * k / (peak * shape)
    memory = b * (m * k + k * n + m * n) * DTYPE_BYTES[dtype] / inp.hbm_bandwidth_bytes_per_s
    return max(compute, memory)


def _round(v: float) -> float:
    return float(f"{v:.{SIGNIFICANT_DIGITS}g}")


def roofline_tables(inp: RooflineInputs, source: str) -> PerfTables:
    """The full tables of the seed's grid for `inp`."""
    coll = [
        CollectiveEntry(c, s, n, size, _round(size / collective_time_s(inp, c, s, size, n)))
        for c in TABLE_COLLECTIVES
        for s in TABLE_SCHEMES
        for n in DEVICE_COUNTS
        for size in COLLECTIVE_SIZES
    ]
    gemm = [
        GemmEntry(dt, b, m, n, k, _round(2.0 * b * m * n * k / gemm_time_s(inp, dt, b, m, n, k)))
        for dt in GEMM_DTYPES
        for b in GEMM_BATCHES
        for m in GEMM_DIMS
        for n in GEMM_DIMS
        for k in GEMM_DIMS
    ]
    return PerfTables(source, coll, gemm, inp.as_dict())

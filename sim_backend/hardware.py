"""Hardware presets (TPU v4, v5p, v6e) and their resolution against config overrides.

SparseCore counts, tiles, SIMD width and HBM capacity come from the SparseCore
guide's table. Bandwidths and peak FLOPs are Cloud TPU spec-sheet figures;
clock, SPMEM per tile and host-link bandwidth are assumptions (see docs/emulator.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from sim_backend.errors import ConfigError

GiB = 1 << 30


@dataclass(frozen=True)
class HardwareSpec:
    """Every figure the cost model needs about one chip of the simulated slice."""

    generation: str
    num_chips: int
    sparsecores_per_chip: int
    tiles_per_sparsecore: int
    simd_width: int  # f32 lanes of a SparseCore SIMD unit
    simd_width_bf16: int  # bf16 lanes (16 on Trillium, 8 on v4 / v5p)
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    tc_peak_flops: float
    ici_bandwidth_bytes_per_s: float
    spmem_bytes_per_tile: int
    sc_clock_hz: float
    host_to_device_bandwidth_bytes_per_s: float
    # slices joined by DCN, each one `num_chips` chips (the emulator simulates one; the
    # others are data-parallel replicas that meet it in the dense all-reduce)
    num_slices: int = 1

    @property
    def num_total_sparse_cores(self) -> int:
        return self.num_chips * self.sparsecores_per_chip

    def recorder_dict(self) -> dict:
        """The header's Hardware message fields (extra keys go to its extra_json)."""
        return asdict(self)


# Per-chip figures. ici_bandwidth is one direction (half the bidirectional spec figure).
PRESETS: dict[str, dict] = {
    "v4": dict(
        sparsecores_per_chip=4,
        tiles_per_sparsecore=16,
        simd_width=8,
        simd_width_bf16=8,
        hbm_bytes=32 * GiB,
        hbm_bandwidth_bytes_per_s=1200e9,
        tc_peak_flops=275e12,
        ici_bandwidth_bytes_per_s=300e9,
        spmem_bytes_per_tile=128 * 1024,
        sc_clock_hz=1.05e9,
        host_to_device_bandwidth_bytes_per_s=16e9,
    ),
    "v5p": dict(
        sparsecores_per_chip=4,
        tiles_per_sparsecore=16,
        simd_width=8,
        simd_width_bf16=8,
        hbm_bytes=96 * GiB,
        hbm_bandwidth_bytes_per_s=2765e9,
        tc_peak_flops=459e12,
        ici_bandwidth_bytes_per_s=600e9,
        spmem_bytes_per_tile=128 * 1024,
        sc_clock_hz=1.75e9,
        host_to_device_bandwidth_bytes_per_s=32e9,
    ),
    "v6e": dict(
        sparsecores_per_chip=2,
        tiles_per_sparsecore=16,
        simd_width=8,
        simd_width_bf16=16,
        hbm_bytes=32 * GiB,
        hbm_bandwidth_bytes_per_s=1638e9,
        tc_peak_flops=918e12,
        ici_bandwidth_bytes_per_s=400e9,
        spmem_bytes_per_tile=128 * 1024,
        sc_clock_hz=1.75e9,
        host_to_device_bandwidth_bytes_per_s=64e9,
    ),
}

SPEC_FIELDS = tuple(f.name for f in fields(HardwareSpec) if f.name not in ("generation", "num_chips", "num_slices"))


def resolve_hardware(generation: str, num_chips: int, overrides: dict) -> HardwareSpec:
    """Preset values for `generation`, replaced by any non-None override ("custom": all given).

    `overrides` may also carry `num_slices` (the hardware section's keys; default 1).
    """
    if generation == "custom":
        base: dict = {}
    elif generation in PRESETS:
        base = dict(PRESETS[generation])
    else:
        raise ConfigError(f"hardware.generation: {generation!r} is not one of {sorted(PRESETS) + ['custom']}")
    for key in SPEC_FIELDS:
        if overrides.get(key) is not None:
            base[key] = overrides[key]
    if "simd_width_bf16" not in base and "simd_width" in base:  # custom: bf16 as wide as f32 unless given
        base["simd_width_bf16"] = base["simd_width"]
    missing = [k for k in SPEC_FIELDS if k not in base]
    if missing:
        raise ConfigError(f"hardware.{missing[0]}: required when hardware.generation = 'custom'")
    return HardwareSpec(generation=generation, num_chips=num_chips, num_slices=overrides.get("num_slices") or 1, **base)

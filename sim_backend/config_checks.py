"""Checks on config input before anything runs: the files, every number, and the memory a run needs.

- `read_text_file`: a config, `extends`, limits or perf-table file as text, with one-line
  ConfigErrors for a missing file, a directory, a FIFO or device (never opened: it could block),
  an unreadable or oversized file and bytes that are not UTF-8.
- `check_number`: the bounds declared once in config.py's field metadata (`min`, `max`;
  floats must be finite), plus `COST_BOUNDS` for the `[cost]` constants.
- `estimate_run_memory` / `check_run_memory`: what the emulator's arrays of one step would take
  (recording streams, so no more for more steps), refused when it exceeds this machine's memory,
  so an absurd `multi_hot`, `global_batch` or `num_chips` fails in milliseconds with a line
  naming the key instead of dying in an allocation (docs/security.md lists every bound).
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from profiler.units import format_bytes
from sim_backend.errors import ConfigError
from sim_backend.hardware import PRESETS

if TYPE_CHECKING:
    from sim_backend.config import RunConfig

MAX_STEPS = 100_000  # `steps`, `--steps`: at ~40 ms per baseline step, about an hour of simulation
MAX_CONFIG_FILE_BYTES = 16 << 20  # config, limits and perf-table files are a few KiB
# Peak bytes per sparse ID of one step (generation, preprocessing sort/dedup/partition arrays).
# Measured with tracemalloc (small config, 1.02 M IDs per step): 42 B per ID when no stack
# exceeds its limits, 65-75 B on the minibatching path (buckets, a second sort); rounded up.
BYTES_PER_ID = 96
# Per table group and step, the emulator builds (source SparseCore x partition) matrices:
# measured 45 B per pair at the step's peak (256-512 chips); rounded up. `scprof record` streams
# (sim_backend/recording/stream.py): a written step's results are dropped, so nothing grows with `steps`.
PEAK_BYTES_PER_SC_PAIR = 64

# Bounds of the [cost] constants (CostConstants in costmodel.py), checked like field metadata:
# rates and efficiencies above zero (they divide), times and sizes within what int64
# picoseconds and bytes can carry through a step.
_PS = {"min": 0, "max": 10**12}  # at most 1 s of fixed cost per task
COST_BOUNDS: dict[str, dict[str, float]] = {
    "task_overhead_ps": _PS,
    "host_ps_per_id": {"min": 0, "max": 10**7},  # 10 us per ID and host thread
    "host_task_overhead_ps": _PS,
    "infeed_bytes_per_id": {"min": 0, "max": 4096},
    "infeed_latency_ps": _PS,
    "sc_pass_overhead_ps": _PS,
    "sc_cycles_per_id": {"min": 0, "max": 1e6},
    "sc_cycles_per_unique_slot": {"min": 0, "max": 1e6},
    "sc_hbm_efficiency": {"min": 0.001, "max": 1},
    "row_padding_bytes": {"min": 1, "max": 4096},
    "tc_efficiency": {"min": 0.001, "max": 1},
    "ici_efficiency": {"min": 0.001, "max": 1},
    "ici_latency_ps": _PS,
    "activation_bytes": {"min": 1, "max": 64},
    "dense_param_bytes": {"min": 1, "max": 4, "choices": (1, 2, 4)},  # s8, bf16, f32 (layout.dense_dtype)
    "dense_optimizer_slots": {"min": 0, "max": 16},
    "hbm_constant_bytes": {"min": 0, "max": 2**50},
    "hbm_stack_bytes_per_element": {"min": 1, "max": 64},
    "spmem_bytes_per_id": {"min": 1, "max": 4096},
    "spmem_bytes_per_unique_id": {"min": 1, "max": 4096},
    "sc_bound_check_cycles_per_id": {"min": 0, "max": 1e6},
    "sc_nan_check_passes": {"min": 0, "max": 1e6},
    "dcn_launch_overhead_ps": _PS,
    "dcn_nic_bytes_per_s": {"min": 1e6, "max": 1e15},
    "dcn_rtt_ps": _PS,
}


# -- files -------------------------------------------------------------------------------


def read_file_bytes(path: str, what: str, max_bytes: int, missing_hint: str = "") -> bytes:
    """The bytes of a regular file of at most `max_bytes`; ConfigError (one line naming `path`)
    otherwise. Opened without blocking and checked on the open descriptor, so a FIFO or device
    put in a file's place is refused, never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{path}: no such {what}{missing_hint}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a {what}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{path}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: is not a regular file (a FIFO or device?); a {what} must be one")
        if st.st_size > max_bytes:
            raise ConfigError(f"{path}: {st.st_size:,} bytes; a {what} is at most {format_bytes(max_bytes)}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: more than {format_bytes(max_bytes)}; a {what} is at most that")
    return data


def read_text_file(path: str, what: str = "config file", missing_hint: str = "") -> str:
    """The UTF-8 text of a small regular file; ConfigError (one line naming `path`) otherwise."""
    data = read_file_bytes(path, what, MAX_CONFIG_FILE_BYTES, missing_hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def parse_toml(text: str, path: str, what: str = "") -> dict:
    """tomllib.loads with one-line errors (invalid TOML; nesting too deep for the parser)."""
    prefix = f"{what}: " if what else ""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{prefix}{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{prefix}{path}: not valid TOML: arrays or tables nested too deeply") from None


# -- numbers -----------------------------------------------------------------------------


def check_number(value: int | float, key: str, meta: dict[str, Any]) -> None:
    """Floats finite; `min` <= value <= `max` from the field's metadata (ConfigError names the key)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}: {value!r} is not a finite number")
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{key}: {value!r} is below the minimum {format_bound(meta['min'])}")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{key}: {value!r} is above the maximum {format_bound(meta['max'])}")


def format_bound(v: float) -> str:
    """A bound as people read it: 100,000; 0.001; 1e+15."""
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def check_steps(steps: int, key: str = "steps") -> None:
    """1 <= steps <= MAX_STEPS (the config key, --set steps=, --steps)."""
    check_number(steps, key, {"min": 1, "max": MAX_STEPS})


# -- memory ------------------------------------------------------------------------------


def machine_memory_bytes() -> int:
    """Physical memory, or the cgroup's limit when that is lower (containers)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


@dataclass(frozen=True)
class MemoryEstimate:
    """What a run would hold at its peak, by cause (bytes)."""

    ids_per_step: int  # global_batch x sum of multi_hot (the most each sample may have)
    id_bytes: int  # the step's sparse-ID arrays at their peak
    sparse_cores: int  # SparseCores of the slice
    table_groups: int  # stacked table groups (each has its own matrices)
    sc_pairs: int  # sparse_cores^2 x table_groups
    pair_bytes: int  # the step's (source SC x partition) matrices at their peak
    steps: int

    @property
    def total_bytes(self) -> int:
        return self.id_bytes + self.pair_bytes


def _table_groups(cfg: RunConfig) -> int:
    """Table groups plan_groups will make: tables of one (width, dtype, optimizer) stack together."""
    if cfg.sparsecore.disable_table_stacking:
        return len(cfg.tables)
    buckets: dict[tuple, int] = {}
    for t in cfg.tables:
        key = (t.width, t.dtype, t.optimizer)
        buckets[key] = buckets.get(key, 0) + 1
    per = cfg.sparsecore.max_tables_per_stack
    return sum(-(-n // per) if per else 1 for n in buckets.values())


def estimate_run_memory(cfg: RunConfig) -> MemoryEstimate:
    """Memory of the emulator's arrays for `cfg` (see the BYTES constants above)."""
    hw = cfg.hardware
    spc = hw.sparsecores_per_chip or PRESETS.get(hw.generation, {}).get("sparsecores_per_chip", 1)
    n_sc = hw.num_chips * spc
    ids = cfg.global_batch * sum(_ids_per_sample(f) for f in cfg.features)
    groups = _table_groups(cfg)
    pairs = n_sc * n_sc * groups
    return MemoryEstimate(
        ids_per_step=ids,
        id_bytes=ids * BYTES_PER_ID,
        sparse_cores=n_sc,
        table_groups=groups,
        sc_pairs=pairs,
        pair_bytes=pairs * PEAK_BYTES_PER_SC_PAIR,
        steps=cfg.steps,
    )


def _ids_per_sample(f: Any) -> int:
    """A feature's IDs per sample for the estimate: `multi_hot`, or its ID file's longest sample."""
    if not f.ids_file:
        return f.multi_hot
    from sim_backend.ids_file import load_ids_file  # imports this module: import when needed

    return max(1, int(np.diff(load_ids_file(f.ids_file, "ids_file").offsets).max()))


def check_run_memory(cfg: RunConfig, limit_bytes: int | None = None) -> MemoryEstimate:
    """The estimate, or ConfigError naming the key that drives it when it exceeds `limit_bytes`
    (default: this machine's memory)."""
    est = estimate_run_memory(cfg)
    limit = machine_memory_bytes() if limit_bytes is None else limit_bytes
    if est.total_bytes <= limit:
        return est
    need = f"the run would need about {format_bytes(est.total_bytes)}"
    if est.id_bytes >= est.pair_bytes:
        per_sample = sum(f.multi_hot for f in cfg.features)
        i, top = max(enumerate(cfg.features), key=lambda e: e[1].multi_hot)
        key = (
            f"features[{i}].multi_hot = {top.multi_hot}"
            if 2 * top.multi_hot >= per_sample
            else (f"global_batch = {cfg.global_batch}")
        )
        why = (
            f"{need} for a step's IDs (global_batch {cfg.global_batch:,} x {per_sample:,} IDs per sample "
            f"over {len(cfg.features)} feature{'s' if len(cfg.features) != 1 else ''} x {BYTES_PER_ID} B per ID)"
        )
    else:
        key = f"hardware.num_chips = {cfg.hardware.num_chips}"
        why = (
            f"{need}, mostly for SparseCore-pair matrices ({est.sparse_cores:,}^2 pairs of SparseCores x "
            f"{est.table_groups} table groups x {PEAK_BYTES_PER_SC_PAIR} B per step)"
        )
    raise ConfigError(f"{key}: {why}, more than this machine's {format_bytes(limit)}")

"""One trial: simulate a config in a folder of its own and say what came of it.

`simulate` is the unit of work a Dask worker (or this process) runs: it takes plain data
and returns plain data, touches no store, and gives the same trace for the same spec on any
machine (the emulator is seeded by the config)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from profiler.errors import ScprofError
from sim_backend.errors import RunFailure
from sim_backend.recording.record import LIMITS_FILE, record_run
from whatif.configs import write_toml

CONFIG_FILE = "config.toml"
LIMITS_RUN_DIR = "derive_limits"


@dataclass(frozen=True)
class TrialSpec:
    """What to simulate: a raw config, under a run name, in a folder."""

    name: str  # the trial run's name in the store
    raw_config: dict[str, Any]
    out_dir: str
    derive_limits: bool = False  # first derive a limits file from this config, then use it
    files: dict[str, bytes] = field(default_factory=dict)  # written into out_dir first (limits, FDO stats)
    tags: dict[str, str] = field(default_factory=dict)  # into the trace header (whatif_origin: the starting run)


@dataclass
class TrialOutcome:
    """What the simulation gave: a trace (also for a run that failed), or why none."""

    name: str
    trace_path: str | None
    simulations: int  # emulator runs it took (2 with derive_limits)
    failure: str | None = None  # compile error, HBM OOM, invalid config: one line
    limits_path: str | None = None
    config_path: str | None = None
    wall_s: float = 0.0
    files: dict[str, bytes] = field(default_factory=dict)  # from a worker: what it wrote, by name


def simulate_shipped(spec: TrialSpec) -> TrialOutcome:
    """`simulate` in a scratch folder of the worker, the files it wrote returned as bytes:
    what a Dask worker on another machine runs (no shared file system needed)."""
    import dataclasses
    import tempfile

    with tempfile.TemporaryDirectory(prefix="scprof-trial-") as scratch:
        out = simulate(dataclasses.replace(spec, out_dir=scratch))
        for name in sorted(os.listdir(scratch)):
            path = os.path.join(scratch, name)
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    out.files[name] = fh.read()
    return out


def materialize(outcome: TrialOutcome, out_dir: str) -> TrialOutcome:
    """Write a shipped outcome's files into `out_dir` and point its paths there."""
    import dataclasses

    os.makedirs(out_dir, exist_ok=True)
    for name, data in outcome.files.items():
        with open(os.path.join(out_dir, os.path.basename(name)), "wb") as fh:
            fh.write(data)

    def moved(path: str | None) -> str | None:
        return os.path.join(out_dir, os.path.basename(path)) if path else None

    return dataclasses.replace(
        outcome,
        trace_path=moved(outcome.trace_path),
        limits_path=moved(outcome.limits_path),
        config_path=moved(outcome.config_path),
        files={},
    )


def simulate(spec: TrialSpec) -> TrialOutcome:
    """Simulate `spec` into `spec.out_dir` (trace.sctrace, config.toml, limits.toml)."""
    t0 = time.perf_counter()
    os.makedirs(spec.out_dir, exist_ok=True)
    for name, data in spec.files.items():  # the engine's names: a file, or one in a folder (FDO stats)
        parts = [p for p in name.split("/") if p not in ("", ".", "..")]
        path = os.path.join(spec.out_dir, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    config_path = os.path.join(spec.out_dir, CONFIG_FILE)
    raw = spec.raw_config
    simulations = 0
    limits_path = None
    try:
        if spec.derive_limits:
            limits_path, simulations = _derive_limits(spec, config_path), 1
            raw = _with_flag(raw, "xla_sparse_core_max_ids_file", LIMITS_FILE)
        write_toml(raw, config_path, f"what-if trial {spec.name}")
        result = record_run(config_path, [], spec.name, None, spec.out_dir, tags=spec.tags)
        trace, failure = result.trace_path, None
    except RunFailure as e:  # compile error, HBM OOM, NaN: the trace still shows it
        trace, failure = e.trace_path, str(e).splitlines()[0]
    except ScprofError as e:  # a change the config refuses (a value out of range, limits too small)
        trace, failure = None, str(e).splitlines()[0].removeprefix(f"{config_path}: ")
    return TrialOutcome(spec.name, trace, simulations + 1, failure, limits_path, config_path, time.perf_counter() - t0)


def _derive_limits(spec: TrialSpec, config_path: str) -> str:
    """Record the config with limit estimation on (the document's procedure) and keep the
    limits file it writes, as <out_dir>/limits.toml, and the same stats in jax-tpu-embedding's
    FDO format beside it (fdo_stats_0_<ns>.csv). The observed counts do not depend on the
    limits, so the estimating run drops instead of minibatching: limits too low (one hash
    bucket over them) cannot stop it."""
    work = os.path.join(spec.out_dir, LIMITS_RUN_DIR)
    raw = _with_flag(
        _with_flag(spec.raw_config, "xla_sparse_core_estimate_max_ids", True), "xla_sparse_core_max_ids_file", ""
    )
    raw = {**raw, "sparsecore": {**raw.get("sparsecore", {}), "allow_id_dropping": True, "enable_minibatching": False}}
    write_toml(raw, config_path, f"what-if trial {spec.name}: deriving limits")
    result = record_run(config_path, [], f"{spec.name} (deriving limits)", None, work)
    assert result.limits_path is not None  # estimation on: record writes the file
    target = os.path.join(spec.out_dir, LIMITS_FILE)
    shutil.copyfile(result.limits_path, target)
    if result.fdo_stats_path:
        shutil.copyfile(result.fdo_stats_path, os.path.join(spec.out_dir, os.path.basename(result.fdo_stats_path)))
    shutil.rmtree(work, ignore_errors=True)  # its trace is not a trial: only the limits are kept
    return target


def _with_flag(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**raw, "flags": {**raw.get("flags", {}), key: value}}

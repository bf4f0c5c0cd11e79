"""One trial: simulate a config in a folder of its own and say what came of it.

`simulate` is the unit of work a Dask worker (or this process) runs: it takes plain data
and returns plain data, touches no store, and gives the same trace for the same spec on any
machine (the emulator is seeded by the config)."""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from profiler.errors import ScprofError
from sim_backend import __version__ as SIM_VERSION
from sim_backend.config import effective_config
from sim_backend.config_load import load_config
from sim_backend.emulator import setup
from sim_backend.errors import RunFailure
from sim_backend.recording.record import LIMITS_FILE, record_run
from whatif.configs import LABEL_KEYS, write_toml

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
    derive_only: bool = False  # only derive the limits file (derive_limits): no trial trace


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
    _write_files(spec.files, spec.out_dir)
    config_path = os.path.join(spec.out_dir, CONFIG_FILE)
    raw = spec.raw_config
    simulations = 0
    limits_path = None
    try:
        if spec.derive_only:
            limits_path = _derive_limits(spec, config_path)
            return TrialOutcome(spec.name, None, 1, None, limits_path, config_path, time.perf_counter() - t0)
        if spec.derive_limits:
            limits_path, simulations = _derive_limits(spec, config_path), 1
            raw = with_flag(raw, "xla_sparse_core_max_ids_file", LIMITS_FILE)
        write_toml(raw, config_path, f"what-if trial {spec.name}")
        result = record_run(config_path, [], spec.name, None, spec.out_dir, tags=spec.tags)
        trace, failure = result.trace_path, None
    except RunFailure as e:  # compile error, HBM OOM, NaN: the trace still shows it
        trace, failure = e.trace_path, str(e).splitlines()[0]
    except ScprofError as e:  # a change the config refuses (a value out of range, limits too small)
        trace, failure = None, str(e).splitlines()[0].removeprefix(f"{config_path}: ")
    return TrialOutcome(spec.name, trace, simulations + 1, failure, limits_path, config_path, time.perf_counter() - t0)


def derived_files(outcome: TrialOutcome) -> dict[str, bytes]:
    """The files a derive-only outcome left in its folder: the limits file and the FDO stats."""
    assert outcome.limits_path is not None
    folder = os.path.dirname(outcome.limits_path)
    paths = [outcome.limits_path, *sorted(glob.glob(os.path.join(folder, "fdo_stats_*.csv")))]
    out = {}
    for path in paths:
        with open(path, "rb") as fh:
            out[os.path.basename(path)] = fh.read()
    return out


def simulation_input(spec: TrialSpec) -> dict[str, Any]:
    """What the emulator will simulate for `spec`, less what only names it: the effective config
    without its name, description and the paths of the limits file and FDO stats (which enter as
    the per-stack limits they resolve to), plus the emulator's version. Two specs with the same
    input give the same trace but for the run's name (the emulator is seeded by the config).
    `derive_limits` specs are not covered: their limits are known only once derived."""
    with tempfile.TemporaryDirectory(prefix="scprof-input-") as scratch:
        scratch = os.path.realpath(scratch)
        _write_files(spec.files, scratch)
        config_path = os.path.join(scratch, CONFIG_FILE)
        write_toml(spec.raw_config, config_path, "")
        cfg = load_config(config_path)
        _, limits, _, _ = setup(cfg)
    doc = effective_config(cfg)
    for key in LABEL_KEYS:
        doc.pop(key, None)
    doc["flags"] = {**doc["flags"], "xla_sparse_core_max_ids_file": None, "fdo_stats_dir": None}
    doc["limits"] = {name: dataclasses.asdict(v) for name, v in sorted(limits.items())}
    doc["emulator"] = SIM_VERSION
    # a file the trial folder gets is named relative to it, wherever the folder is
    text = json.dumps(doc, sort_keys=True, default=str).replace(scratch + os.sep, "")
    return json.loads(text)


def input_sha1(spec: TrialSpec) -> str:
    """The digest of `simulation_input(spec)`: a trial's identity in the store."""
    return hashlib.sha1(json.dumps(simulation_input(spec), sort_keys=True).encode()).hexdigest()


def _write_files(files: dict[str, bytes], folder: str) -> None:
    """The engine's files (a name, or one in a folder: FDO stats) written into `folder`."""
    for name, data in files.items():
        parts = [p for p in name.split("/") if p not in ("", ".", "..")]
        path = os.path.join(folder, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)


def _derive_limits(spec: TrialSpec, config_path: str) -> str:
    """Record the config with limit estimation on (the document's procedure) and keep the
    limits file it writes, as <out_dir>/limits.toml, and the same stats in jax-tpu-embedding's
    FDO format beside it (fdo_stats_0_<ns>.csv). The observed counts do not depend on the
    limits, so the estimating run drops instead of minibatching: limits too low (one hash
    bucket over them) cannot stop it."""
    work = os.path.join(spec.out_dir, LIMITS_RUN_DIR)
    raw = derive_config(spec.raw_config)
    write_toml(raw, config_path, f"what-if trial {spec.name}: deriving limits")
    result = record_run(config_path, [], f"{spec.name} (deriving limits)", None, work)
    assert result.limits_path is not None  # estimation on: record writes the file
    target = os.path.join(spec.out_dir, LIMITS_FILE)
    shutil.copyfile(result.limits_path, target)
    if result.fdo_stats_path:
        shutil.copyfile(result.fdo_stats_path, os.path.join(spec.out_dir, os.path.basename(result.fdo_stats_path)))
    shutil.rmtree(work, ignore_errors=True)  # its trace is not a trial: only the limits are kept
    return target


def derive_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The config that derives `raw`'s limits: estimation on, no limits file, and dropping instead
    of minibatching (the observed counts do not depend on the limits)."""
    out = with_flag(with_flag(raw, "xla_sparse_core_estimate_max_ids", True), "xla_sparse_core_max_ids_file", "")
    return {**out, "sparsecore": {**out.get("sparsecore", {}), "allow_id_dropping": True, "enable_minibatching": False}}


def with_flag(raw: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `raw` with flags.<key> set."""
    return {**raw, "flags": {**raw.get("flags", {}), key: value}}

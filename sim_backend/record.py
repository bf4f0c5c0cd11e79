"""`scprof record` behind the CLI: run a config, write the trace, summarise the run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from profiler.progress import TerminalProgress
from sim_backend import __version__
from sim_backend.check_events import NAN_DETECTED
from sim_backend.config import effective_config, load_config
from sim_backend.emulator import Simulation, simulate
from sim_backend.errors import CompileError, ConfigError, HbmOomError, NanDetectedError, RunFailure
from sim_backend.instrument import write_trace
from sim_backend.limits import write_limits_file
from sim_backend.memory import HBM_OOM
from sim_backend.metrics import step_time_ps, time_shares

PRODUCER = f"scprof-sim {__version__}"
TRACE_FILE = "trace.sctrace"
LIMITS_FILE = "limits.toml"


@dataclass(frozen=True)
class RecordResult:
    """Where the trace went and the headline figures of the run."""

    trace_path: str
    run_name: str
    steps: int
    events: int  # events written (ops and modules)
    mean_step_time_ps: float  # steady state on chip 0 (step 0 excluded)
    share_host: float  # of chip 0's span: waiting on host input
    share_sc: float  # SparseCore (or its all-to-all) busy, TensorCore not
    share_tc: float  # TensorCore (or dense all-reduce) busy
    share_idle: float
    minibatches: int  # SparseCore minibatches over all steps and table groups
    minibatches_per_step: float  # mean per table group and step (1.0 = no minibatching)
    dropped_ids: int
    limits_path: str | None  # derived limits file, when estimation was on
    wall_time_s: float
    perf_tables: str = ""  # performance tables the cost model read ("bundled:v5p", a path)


def record_run(
    config_path: str,
    overrides: list[str],
    name: str | None,
    steps: int | None,
    out_dir: str | None,
    progress: bool | Callable[[int, int], None] | None = None,
    perf_tables: str | None = None,
) -> RecordResult:
    """Simulate `config_path` (with --set overrides), write `<out_dir>/trace.sctrace`.

    `out_dir` defaults to runs/<name>/. `progress`: a callback(done_steps, total), or
    True for a bar on the terminal. `perf_tables`: a performance-table directory
    (--perf-tables) replacing the config's `perf_tables`. Raises ConfigError /
    PreprocessError (both ValueError, one line) for users' mistakes.
    """
    t0 = time.perf_counter()
    if progress is True:
        progress = TerminalProgress("simulating", "steps")
    elif not callable(progress):
        progress = None
    cfg = load_config(config_path, overrides)
    if steps is not None:
        if steps < 1:
            raise ConfigError(f"--steps: {steps} is below the minimum 1")
        cfg = dataclasses.replace(cfg, steps=steps)
    if perf_tables is not None:
        if not os.path.isdir(perf_tables):
            what = "not a directory" if os.path.exists(perf_tables) else "no such directory"
            raise ConfigError(f"--perf-tables {perf_tables}: {what}")
        cfg = dataclasses.replace(cfg, perf_tables=os.path.abspath(perf_tables))
    name = name or cfg.name
    out_dir = out_dir or os.path.join("runs", name)
    os.makedirs(out_dir, exist_ok=True)
    sim = simulate(cfg, progress)
    config = run_config_json(sim, name)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"scprof-sim:{name}:{digest}"))
    trace_path = os.path.join(out_dir, TRACE_FILE)
    tags = {"workload": cfg.name, "source": "emulator"}
    if sim.failure is not None:
        tags.update(status="failed", failure=sim.failure.kind, error=sim.failure.message)
    events = write_trace(sim, trace_path, name, run_id, config, tags, PRODUCER)
    if sim.failure is not None:  # the trace holds the failure; the command still fails
        error: type[RunFailure] = {HBM_OOM: HbmOomError, NAN_DETECTED: NanDetectedError}.get(
            sim.failure.kind, CompileError
        )
        raise error(sim.failure.message, trace_path, config_path)
    limits_path = None
    if cfg.flags.xla_sparse_core_estimate_max_ids:
        limits_path = os.path.join(out_dir, LIMITS_FILE)
        write_limits_file(
            limits_path,
            sim.table_observed,
            f"Limits derived by {PRODUCER} from run {name!r} "
            f"({cfg.steps} steps, seed {cfg.seed}):\n"
            "per table, the largest IDs / unique IDs one SparseCore's sub-batch "
            "sent to one partition.\nUse with --set "
            f"flags.xla_sparse_core_max_ids_file={limits_path}",
        )
    shares = time_shares(sim)
    mbs = [gr.minibatches for sr in sim.steps for gr in sr.groups]
    return RecordResult(
        trace_path=trace_path,
        run_name=name,
        steps=cfg.steps,
        events=events,
        mean_step_time_ps=step_time_ps(sim),
        share_host=shares["host"],
        share_sc=shares["sc"],
        share_tc=shares["tc"],
        share_idle=shares["idle"],
        minibatches=sum(mbs),
        minibatches_per_step=sum(mbs) / len(mbs),
        dropped_ids=sum(sr.dropped_ids for sr in sim.steps),
        limits_path=limits_path,
        wall_time_s=time.perf_counter() - t0,
        perf_tables=sim.cost.perf_tables_source,
    )


def run_config_json(sim: Simulation, name: str) -> dict:
    """Effective config plus what was derived from it (hardware, limits, stacking)."""
    out = effective_config(sim.cfg)
    out["run_name"] = name
    out["resolved"] = {
        "hardware": dataclasses.asdict(sim.hw),
        "limits": {t: dataclasses.asdict(v) for t, v in sim.limits.items()},
        "table_groups": [
            {
                "name": g.name,
                "tables": list(g.tables),
                "width": g.width,
                "max_ids_per_partition": g.max_ids_per_partition,
                "max_unique_ids_per_partition": g.max_unique_ids_per_partition,
            }
            for g in sim.groups
        ],
        "cost_constants": dataclasses.asdict(sim.cost.c),
        "perf_tables": sim.cost.perf_tables_source,  # tables the cost model read ("" for none)
        "dense_params": sim.dense.params,
        "memory": memory_json(sim),
    }
    return out


def memory_json(sim: Simulation) -> dict:
    """The static memory model of the run (per chip; stacks per table group)."""
    m = sim.memory
    return {
        "hbm_heap_static_bytes": m.heap,
        "logical_replica_count": m.logical_replica_count,
        "spmem_per_tile_bytes": m.spmem_per_tile,
        "table_groups": [dataclasses.asdict(g) for g in m.groups],
    }


def _fmt_ps(ps: float) -> str:
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if ps >= scale:
            return f"{ps / scale:.3f} {unit}"
    return f"{ps:.0f} ps"


def format_summary(result: RecordResult) -> str:
    """A few lines for the terminal after `scprof record`."""
    r = result
    lines = [
        f"recorded {r.run_name!r}: {r.steps} steps, {r.events} events -> {r.trace_path}",
        f"  mean step time  {_fmt_ps(r.mean_step_time_ps)}",
        f"  chip 0 time     host {r.share_host:.1%}  SparseCore {r.share_sc:.1%}  "
        f"TensorCore {r.share_tc:.1%}  idle {r.share_idle:.1%}",
        f"  minibatches     {r.minibatches} ({r.minibatches_per_step:.2f} per table group and step)",
        f"  dropped IDs     {r.dropped_ids}",
    ]
    if r.perf_tables:
        lines.append(f"  perf tables     {r.perf_tables}")
    if r.limits_path:
        lines.append(f"  limits written  {r.limits_path}")
    return "\n".join(lines)

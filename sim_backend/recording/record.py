"""`scprof record` behind the CLI: run a config, write the trace, summarise the run."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from profiler.errors import ScprofError
from profiler.progress import TerminalProgress
from profiler.recorder import rewrite_tags
from profiler.safe_output import DUCKDB_MAGIC, DUCKDB_MAGIC_OFFSET
from sim_backend import __version__
from sim_backend.config import RunConfig, effective_config
from sim_backend.config_load import load_config
from sim_backend.emulator import RunSetup, prepare
from sim_backend.errors import (
    CompileError,
    ConfigError,
    HbmOomError,
    NanDetectedError,
    RecordInterrupted,
    RunFailure,
)
from sim_backend.fdo_stats import read_fdo_limits, write_fdo_stats
from sim_backend.limits import limits_sections, read_limits_file, unused_limit_sections, write_limits_file
from sim_backend.memory import HBM_OOM, Failure
from sim_backend.recording.check_events import NAN_DETECTED
from sim_backend.recording.instrument import open_recorder
from sim_backend.recording.stream import stream_run

PRODUCER = f"scprof-sim {__version__}"
TRACE_FILE = "trace.sctrace"
PARTIAL_FILE = "trace.sctrace.partial"  # the trace while it is written (renamed when complete)
DIR_NAME_MAX = 80  # characters of a run name kept in its default folder name
LIMITS_FILE = "limits.toml"
KERNEL_FILE_SYSTEMS = ("/proc", "/sys")  # never a place for --out (writes there fail or mean something else)


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
    minibatches: int  # SparseCore minibatches over all steps (each step: one count for every stack)
    minibatches_per_step: float  # mean per step (1.0 = no minibatching)
    dropped_ids: int  # in-sample repeats of a dropped ID counted, as the library counts
    limits_path: str | None  # derived limits file, when estimation was on
    wall_time_s: float
    perf_tables: str = ""  # performance tables the cost model read ("bundled:v5p", a path)
    fdo_stats_path: str | None = None  # the same stats as jax-tpu-embedding's CSVFileFDOClient writes them
    warnings: tuple[str, ...] = ()  # one line each: what the user set that does not apply


def record_run(
    config_path: str,
    overrides: list[str],
    name: str | None,
    steps: int | None,
    out_dir: str | None,
    progress: bool | Callable[[int, int], None] | None = None,
    perf_tables: str | None = None,
    check: Callable[[str, str, str], None] | None = None,
    tags: dict[str, str] | None = None,
    root: str | None = None,
) -> RecordResult:
    """Simulate `config_path` (with --set overrides), write `<out_dir>/trace.sctrace`.

    `out_dir` defaults to `<root>/<name>/` (`root`: the user's --out, checked first by
    `check_out_root`, else runs/; the name made one safe path component, `dir_name`), so
    runs recorded with one --out get sibling folders. `progress`: a callback(done_steps, total), or True for a bar on the
    terminal. `perf_tables`: a performance-table directory (--perf-tables) replacing the
    config's `perf_tables`. `check(name, run_id, trace_path)`, called before anything is
    simulated or written, may refuse the run (raising). The trace is streamed to a
    partial file in `out_dir` (stream.py) and renamed to trace.sctrace when complete; `tags`
    go into its header (the what-if engine marks its trials); a
    user error removes it, an interrupt keeps it (RecordInterrupted names it). Raises
    ConfigError / PreprocessError (both ValueError, one line) for users' mistakes.
    """
    t0 = time.perf_counter()
    if root is not None:
        check_out_root(root)
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
    su = prepare(cfg)
    config = run_config_json(su, name)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"scprof-sim:{name}:{digest}"))
    out_dir = out_dir or os.path.join(root or "runs", dir_name(name))
    trace_path = os.path.join(out_dir, TRACE_FILE)
    if check is not None:
        check(name, run_id, trace_path)
    made_dir = not os.path.exists(out_dir)
    partial = _open_partial(out_dir)
    tags = {**(tags or {}), "workload": cfg.name, "source": "emulator"}
    if su.failure is not None:
        tags.update(_failure_tags(su.failure))
    try:
        with open_recorder(partial, su, name, run_id, config, tags, PRODUCER) as rec:
            run = stream_run(su, rec, progress)
    except ScprofError:  # the user's mistake (say, limits exceeded at step k): nothing is left behind
        _remove(partial, out_dir if made_dir else None)
        raise
    except KeyboardInterrupt:
        raise RecordInterrupted(partial) from None
    if run.failure is not None and su.failure is None:  # found while running: the header says so
        final = partial + ".tags"
        try:
            rewrite_tags(partial, final, {**tags, **_failure_tags(run.failure)})
        except BaseException:
            _remove(final, None)
            raise
        os.replace(final, partial)
    os.replace(partial, trace_path)
    if run.failure is not None:  # the trace holds the failure; the command still fails
        error: type[RunFailure] = {HBM_OOM: HbmOomError, NAN_DETECTED: NanDetectedError}.get(
            run.failure.kind, CompileError
        )
        raise error(run.failure.message, trace_path, config_path)
    limits_path = fdo_path = None
    if cfg.flags.xla_sparse_core_estimate_max_ids:
        limits_path = os.path.join(out_dir, LIMITS_FILE)
        write_limits_file(
            limits_path,
            run.observed.limits,
            f"Limits derived by {PRODUCER} from run {name!r} "
            f"({cfg.steps} steps, seed {cfg.seed}):\n"
            "per stack, the largest IDs / unique IDs one SparseCore's sub-batch "
            "sent to one partition.\nUse with --set "
            f"flags.xla_sparse_core_max_ids_file={limits_path}",
        )
        fdo_path = write_fdo_stats(out_dir, run.observed.fdo)
    return RecordResult(
        trace_path=trace_path,
        run_name=name,
        steps=cfg.steps,
        events=run.events,
        mean_step_time_ps=run.mean_step_time_ps,
        share_host=run.shares["host"],
        share_sc=run.shares["sc"],
        share_tc=run.shares["tc"],
        share_idle=run.shares["idle"],
        minibatches=run.minibatches,
        minibatches_per_step=run.minibatches / max(run.steps_run, 1),
        dropped_ids=run.dropped_ids,
        limits_path=limits_path,
        wall_time_s=time.perf_counter() - t0,
        perf_tables=su.cost.perf_tables_source,
        fdo_stats_path=fdo_path,
        warnings=(*ignored_limit_warnings(su), *unused_limit_sections(cfg, [g.name for g in su.groups])),
    )


def ignored_limit_warnings(su: RunSetup) -> tuple[str, ...]:
    """A line per stack whose tables' own limits the config sets: a stack of several tables
    takes stack-level limits (jax-tpu-embedding ignores per-table ones)."""
    out = []
    for g in su.groups:
        if g.ignored_limits:
            shown = ", ".join(g.ignored_limits[:3]) + (", ..." if len(g.ignored_limits) > 3 else "")
            out.append(
                f"the per-table limits of {shown} do not apply: stacked in {g.name!r}, they share its "
                f"limits ({g.max_ids_per_partition} / {g.max_unique_ids_per_partition}, from {g.limit_source}); "
                f"set them with sparsecore.stack_max_ids_per_partition or a [stacks.NAME] section"
            )
    return tuple(out)


def _failure_tags(failure: Failure) -> dict[str, str]:
    return {"status": "failed", "failure": failure.kind, "error": failure.message}


def dir_name(name: str) -> str:
    """The run name as one safe path component (for runs/<name>/): kept when it is made of
    [A-Za-z0-9._-] only (and not "." or ".."), else those characters kept, the others
    replaced by "_", cut to DIR_NAME_MAX and suffixed with a hash of the name (distinct
    names, distinct folders). The run keeps its real name in the trace and the store."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if safe == name and name not in ("", ".", "..") and len(name) <= DIR_NAME_MAX:
        return name
    stem = safe[:DIR_NAME_MAX].strip(".") or "run"
    return f"{stem}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def check_out_root(path: str) -> str:
    """`--out DIR`, the folder that gets one folder per run: an existing folder, or one that
    can be made (its nearest existing parent is a folder this process may write in); never a
    file (a store, a config), nor under /proc or /sys. Checked before anything is written;
    nothing is created here. ScprofError (one line naming --out) otherwise."""
    if not path:
        raise ScprofError("--out: empty path; name a folder (each run gets a folder in it)")
    real = os.path.realpath(path)
    for top in KERNEL_FILE_SYSTEMS:
        if real == top or real.startswith(top + os.sep):
            raise ScprofError(f"--out {path}: is under {top}, a kernel file system; name a folder for the runs")
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        what = "a DuckDB database" if _is_duckdb(existing) else "a file"
        if existing == os.path.abspath(path):
            raise ScprofError(f"--out {path}: is {what}, not a folder (each run gets a folder in --out)")
        raise ScprofError(f"--out {path}: cannot make the folder: {existing} is {what}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ScprofError(f"--out {path}: cannot write in {existing} (permission denied or read-only)")
    return path


def _is_duckdb(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(DUCKDB_MAGIC_OFFSET + len(DUCKDB_MAGIC))
    except OSError:
        return False
    return head[DUCKDB_MAGIC_OFFSET:] == DUCKDB_MAGIC


def _open_partial(out_dir: str) -> str:
    """Create `out_dir` if needed and a new, empty partial trace file in it (never an
    existing one: a partial left by a killed record is kept for recovery)."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ScprofError(f"--out {out_dir}: exists and is not a directory")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise ScprofError(f"--out {out_dir}: cannot create the directory ({e.strerror})") from None
    for i in range(1, 1000):
        path = os.path.join(out_dir, PARTIAL_FILE if i == 1 else PARTIAL_FILE.replace(".sctrace", f"-{i}.sctrace"))
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise ScprofError(f"--out {out_dir}: cannot write there ({e.strerror})") from None
    raise ScprofError(f"--out {out_dir}: holds 999 partial traces; recover or remove them")


def _remove(path: str, made_dir: str | None) -> None:
    """Remove a file this record made (and the folder it made, if now empty)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    if made_dir is not None:
        with contextlib.suppress(OSError):
            os.rmdir(made_dir)


def run_config_json(sim: RunSetup, name: str) -> dict:
    """Effective config plus what was derived from it (hardware, limits, stacking)."""
    out = effective_config(sim.cfg)
    out["run_name"] = name
    out["resolved"] = {
        "hardware": dataclasses.asdict(sim.hw),
        "limits": {name: dataclasses.asdict(v) for name, v in sim.limits.items()},  # per stack
        "table_groups": [
            {
                "name": g.name,
                "tables": list(g.tables),
                "width": g.width,
                "max_ids_per_partition": g.max_ids_per_partition,
                "max_unique_ids_per_partition": g.max_unique_ids_per_partition,
                "limit_source": g.limit_source,
                "rotation": g.rotation.tolist(),
                "padded_vocab": g.padded_vocab.tolist(),
            }
            for g in sim.groups
        ],
        "cost_constants": dataclasses.asdict(sim.cost.c),
        "perf_tables": sim.cost.perf_tables_source,  # tables the cost model read ("" for none)
        "dense_params": sim.dense.params,
        "memory": memory_json(sim),
    }
    out["resolved"].update(named_files_json(sim.cfg))
    return out


def named_files_json(cfg: RunConfig) -> dict:
    """What the limits file and the FDO stats directory the config names said, kept in the header
    (`limits_file`: its sections as the file has them; `fdo_stats`: per stack, the limits the
    stats give), so a re-simulation of the stored run (whatif/) reproduces its limits for any
    stacking without reading a path the store names."""
    out: dict = {}
    if cfg.flags.xla_sparse_core_max_ids_file:
        out["limits_file"] = limits_sections(read_limits_file(cfg.flags.xla_sparse_core_max_ids_file))
    if cfg.flags.fdo_stats_dir:
        out["fdo_stats"] = limits_sections({"stacks": read_fdo_limits(cfg.flags.fdo_stats_dir)})["stacks"]
    return out


def memory_json(sim: RunSetup) -> dict:
    """The static memory model of the run (per chip; stacks per table group)."""
    m = sim.memory
    return {
        "hbm_heap_static_bytes": m.heap,
        "logical_replica_count": m.logical_replica_count,
        "spmem_per_tile_bytes": m.spmem_per_tile,
        "table_groups": [dataclasses.asdict(g) for g in m.groups],
    }


def format_summary(result: RecordResult) -> str:
    """The files `scprof record` wrote besides the trace (the performance tables it read, a derived
    limits file, FDO stats), one line each. What the run shows is the stored analysis's to say."""
    r = result
    lines = []
    if r.perf_tables:
        lines.append(f"perf tables  {r.perf_tables}")
    if r.limits_path:
        lines.append(f"limits written  {r.limits_path}")
    if r.fdo_stats_path:
        lines.append(f"FDO stats  {r.fdo_stats_path} (jax-tpu-embedding CSVFileFDOClient format)")
    return "\n".join(lines)

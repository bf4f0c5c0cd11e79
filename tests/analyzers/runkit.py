"""Build tiny runs for analyzer tests: labelled events in, a store with one run out.

Times are small integers (one unit = 1 ps) so plain-Python references can walk
them unit by unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_to_store import ingest_trace

TC_OPS = ("/device:TPU:{chip}", "XLA Ops", "tensorcore")
SC_OPS = ("/device:TPU:{chip} SparseCore {core}", "Sparse Core Ops", "sparsecore")
HOST = ("/host:CPU", "Input Pipeline Thread 0", "host")


@dataclass
class Ev:
    """One event: where (kind of line, chip, core), what, when."""

    where: tuple[str, str, str]
    chip: int
    core: int
    name: str
    start: int
    dur: int
    step: int | None = None
    category: str | None = None
    table: str | None = None
    ids: int | None = None
    bytes: int | None = None


@dataclass
class RunSpec:
    events: list[Ev] = field(default_factory=list)
    steps: list[tuple[int, int, int, int]] = field(default_factory=list)  # chip, step, start, dur (TC Steps line)
    partition_stats: dict[str, list] | None = None
    counters: list[tuple[int, str, int, float]] = field(default_factory=list)  # chip, counter, ts, bytes
    hardware: dict | None = None
    name: str = "run"
    config: dict | None = None


def record(spec: RunSpec, path: Path) -> Path:
    with Recorder(
        str(path),
        run_name=spec.name,
        hardware=spec.hardware or {"generation": "v5p", "num_chips": 1},
        config=spec.config or {},
        start_time_unix_ns=0,
    ) as rec:
        cols: dict[str, list] = {
            k: [] for k in ("track", "name", "start_ps", "dur_ps", "step", "category", "table", "ids", "bytes")
        }
        for e in spec.events:
            plane, line, kind = e.where
            chip = -1 if kind == "host" else e.chip
            cols["track"].append(rec.track(plane.format(chip=e.chip, core=e.core), line, kind, chip=chip, core=e.core))
            cols["name"].append(e.name)
            cols["start_ps"].append(e.start)
            cols["dur_ps"].append(e.dur)
            cols["step"].append(e.step)
            cols["category"].append(e.category or "")
            cols["table"].append(e.table or "")
            cols["ids"].append(e.ids)
            cols["bytes"].append(e.bytes)
        if spec.events:
            rec.emit(**cols)
        if spec.steps:
            chips, steps, starts, durs = zip(*spec.steps, strict=True)
            tracks = [rec.track(f"/device:TPU:{c}", "Steps", "tensorcore", chip=c, core=0) for c in chips]
            rec.steps(track=tracks, step=list(steps), start_ps=list(starts), dur_ps=list(durs))
        if spec.partition_stats:
            rec.partition_stats(**spec.partition_stats)
        for chip, counter, ts, value in spec.counters:
            t = rec.track(f"/device:TPU:{chip}", counter, "counter", chip=chip, unit="bytes")
            rec.counters(track=[t], ts_ps=[ts], value=np.array([value], np.float64))
    return path


def store_with(tmp_path: Path, *specs: RunSpec) -> Store:
    """A read-only store holding the given runs (run_id 1, 2, ... in order)."""
    db = tmp_path / "analyzers.duckdb"
    with Store.open(str(db)) as store:
        for i, spec in enumerate(specs):
            ingest_trace(store, str(record(spec, tmp_path / f"run{i}.sctrace")))
    return Store.open(str(db), read_only=True)


def partition_stats(steps: int, scs: int, ids, unique, limit_ids, limit_unique, minibatches, dropped, table="t0"):
    """Partition statistics columns for `steps` steps x `scs` SparseCores of chip 0."""
    n = steps * scs

    def col(v):
        return np.resize(np.asarray(v), n)

    return {
        "step": np.repeat(np.arange(steps), scs),
        "chip": np.zeros(n, int),
        "sc": np.tile(np.arange(scs), steps),
        "table": [table] * n,
        "ids": col(ids),
        "unique_ids": col(unique),
        "max_ids_per_partition": col(limit_ids),
        "max_unique_ids_per_partition": col(limit_unique),
        "minibatches": col(minibatches),
        "dropped_ids": col(dropped),
    }


def concat_stats(*parts: dict) -> dict:
    """Partition statistics of several tables (each from partition_stats) as one set of columns."""
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}

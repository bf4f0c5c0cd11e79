"""Write a Simulation through the profiler's Recorder, on the simulated clock.

Tracks follow XProf: `/host:CPU` (one line per input thread and per host->HBM link),
`/device:TPU:N` (Steps, XLA Modules, XLA Ops, ICI, counters) and
`/device:TPU:N SparseCore M` (Sparse Core Steps, Sparse Core Modules, Sparse Core Ops).
Every task becomes one event with its step and typed arguments; modules are the runs
of consecutive ops of one step (and pass) on one core; step markers, per-partition
statistics and counters complete the picture. All columns are built with numpy.
"""

from __future__ import annotations

import numpy as np

from profiler.recorder import Recorder
from profiler.wire import NULL_I32, NULL_I64
from sim_backend.check_events import emit_check_events
from sim_backend.emulator import Simulation
from sim_backend.memory import HEAP_CONTRIBUTORS, PREFETCHED_INPUTS, STACK
from sim_backend.stepgraph import (
    A2A_BWD,
    A2A_FWD,
    ALLREDUCE,
    HOST,
    INFEED,
    INIT,
    KIND_NAMES,
    SC_BWD,
    SC_FWD,
    TC_BWD,
    TC_COLLECTIVES,
    TC_FWD,
)

HOST_PLANE = "/host:CPU"
FAILURE_LINE = "Failures"
FAILURE_CATEGORY = "failure"
HEAP = "HBM heap"
# The table layout the compiler chose (stacking, padding), recorded before step 0.
LAYOUT_LINE = "Table Layout"
LAYOUT_EVENT = "table_layout"
LAYOUT_CATEGORY = "compile"
SPMEM = "SPMEM per tile"

# The trace's `category` of each task kind: what kind of work it is, so analyzers
# can split step time without knowing the emulator's op names.
KIND_CATEGORIES = {
    INIT: "host_other",
    HOST: "host_preprocess",
    INFEED: "host_to_device",
    SC_FWD: "sc_forward",
    A2A_FWD: "sc_collective",
    TC_FWD: "tc_forward",
    TC_BWD: "tc_backward",
    A2A_BWD: "sc_collective",
    ALLREDUCE: "tc_collective",
    SC_BWD: "sc_backward",
    **{k: "tc_collective" for k in TC_COLLECTIVES if k != ALLREDUCE},  # sharded dense part
}
TC_MODULE = "jit_train_step"
SC_FWD_MODULE = "sparse_core_forward"
SC_BWD_MODULE = "sparse_core_backward"


def tc_plane(chip: int) -> str:
    return f"/device:TPU:{chip}"


def sc_plane(chip: int, core: int) -> str:
    return f"/device:TPU:{chip} SparseCore {core}"


class _Tracks:
    """Declares every track once and maps (resource, unit) to its ops track."""

    def __init__(self, rec: Recorder, sim: Simulation):
        res = sim.resources
        chips, spc = res.num_chips, res.sparsecores_per_chip
        self.host = [
            rec.track(HOST_PLANE, f"Input Pipeline Thread {u}", "host", core=u) for u in range(res.host_threads)
        ]
        self.infeed = [rec.track(HOST_PLANE, f"Host to HBM TPU:{c}", "host", chip=c) for c in range(chips)]
        self.tc_steps, self.tc_modules, self.tc_ops, self.ici = [], [], [], []
        self.sc_steps, self.sc_modules, self.sc_ops = {}, {}, {}
        self.heap, self.queue, self.stack, self.spmem = [], [], [], {}
        self.heap_parts: list[dict[str, int]] = []
        for c in range(chips):
            p = tc_plane(c)
            self.tc_steps.append(rec.track(p, "Steps", "tensorcore", chip=c, core=0))
            self.tc_modules.append(rec.track(p, "XLA Modules", "tensorcore", chip=c, core=0))
            self.tc_ops.append(rec.track(p, "XLA Ops", "tensorcore", chip=c, core=0))
            self.ici.append(rec.track(p, "ICI", "tensorcore", chip=c))
            for k in range(spc):
                sp = sc_plane(c, k)
                self.sc_steps[c, k] = rec.track(sp, "Sparse Core Steps", "sparsecore", c, k)
                self.sc_modules[c, k] = rec.track(sp, "Sparse Core Modules", "sparsecore", c, k)
                self.sc_ops[c, k] = rec.track(sp, "Sparse Core Ops", "sparsecore", c, k)
            self.heap.append(rec.track(p, HEAP, "counter", chip=c, unit="bytes"))
            self.heap_parts.append(
                {k: rec.track(p, f"{HEAP}: {k}", "counter", chip=c, unit="bytes") for k in HEAP_CONTRIBUTORS}
            )
            self.stack.append(rec.track(p, STACK, "counter", chip=c, unit="bytes"))
            self.queue.append(rec.track(p, "Prefetched steps", "counter", chip=c, unit="count"))
            for k in range(spc):
                self.spmem[c, k] = rec.track(sc_plane(c, k), SPMEM, "counter", c, k, unit="bytes")
        self.dropped = rec.track(HOST_PLANE, "Dropped IDs", "counter", unit="count")
        # ops track of each resource (host: per unit, handled separately)
        lut = [0]
        for c in range(chips):
            lut += [self.infeed[c], self.tc_ops[c], self.ici[c]]
            lut += [self.sc_ops[c, k] for k in range(spc)]
        self.resource_track = np.array(lut, dtype=np.uint32)
        self.host_unit_track = np.array(self.host, dtype=np.uint32)


def write_trace(
    sim: Simulation, path: str, run_name: str, run_id: str, config: dict, tags: dict[str, str], producer: str
) -> int:
    """Write the whole simulation to `path`; returns the number of events (ops + modules)."""
    with Recorder(
        path,
        run_name=run_name,
        producer=producer,
        hardware=sim.hw.recorder_dict(),
        config=config,
        tags=tags,
        run_id=run_id,
        start_time_unix_ns=0,
    ) as rec:
        tr = _Tracks(rec, sim)
        if not sim.steps:  # failed to compile: static memory and the failure, nothing ran
            _emit_static_memory(rec, tr, sim)
            _emit_failure(rec, sim)
            return 0
        cols = sim.graph.columns()
        s = sim.schedule
        kind = cols["kind"]
        track = tr.resource_track[cols["resource"]]
        host = kind == HOST
        track[host] = tr.host_unit_track[s.unit[host]]
        order = np.lexsort((track, s.start_ps))
        names = np.array([rec.intern(KIND_NAMES[k]) for k in range(len(KIND_NAMES))], np.uint32)
        categories = np.array([rec.intern(KIND_CATEGORIES[k]) for k in range(len(KIND_NAMES))], np.uint32)
        group_names = np.array([0] + [rec.intern(g.name) for g in sim.groups], np.uint32)
        nulls = {"sc": NULL_I32, "minibatch": NULL_I32}
        typed = {}
        for key in ("sc", "minibatch", "ids", "unique_ids", "dropped_ids", "bytes", "flops"):
            v = cols[key][order]
            typed[key] = np.where(v < 0, nulls.get(key, NULL_I64), v)
        step = cols["step"][order]
        rec.emit(
            track=track[order],
            name=names[kind[order]],
            category=categories[kind[order]],
            start_ps=s.start_ps[order],
            dur_ps=(s.end_ps - s.start_ps)[order],
            step=np.where(step < 0, NULL_I32, step).astype(np.int32),
            table=group_names[cols["group"][order] + 1],
            **typed,
        )
        _emit_table_layout(rec, sim)
        n_modules = _emit_modules(rec, tr, sim, cols)
        _emit_steps(rec, tr, sim, cols)
        _emit_partition_stats(rec, sim)
        emit_check_events(rec, sim, HOST_PLANE)  # debug checks, quantization (check_events.py)
        _emit_counters(rec, tr, sim, cols)
        _emit_failure(rec, sim)
    return int(len(kind)) + n_modules


def _emit_table_layout(rec: Recorder, sim: Simulation) -> None:
    """What the compiler decided for every table, before step 0: one zero-length event
    per table on the host's `Table Layout` line (category `compile`, typed `table` = its
    stack), so analyzers see stacking and padding from the trace alone."""
    groups = sim.groups
    track = rec.track(HOST_PLANE, LAYOUT_LINE, "host")
    n = sum(len(g.tables) for g in groups)
    per_table = {"group": [], "position": [], "vocab": [], "padded_vocab": []}
    vocab = {t.name: t.vocab for t in sim.cfg.tables}
    for gi, g in enumerate(groups):
        per_table["group"] += [gi] * len(g.tables)
        per_table["position"] += list(range(len(g.tables)))
        per_table["vocab"] += [vocab[t] for t in g.tables]
        per_table["padded_vocab"] += g.padded_vocab.tolist()
    gi = np.array(per_table["group"], np.int64)
    width = np.array([g.width for g in groups], np.int64)[gi]
    dtype_bytes = np.array([g.dtype_bytes for g in groups], np.int64)[gi]
    padded_row = np.array([sim.cost.padded_row_bytes(g.width, g.dtype_bytes) for g in groups], np.int64)[gi]
    padded_vocab = np.array(per_table["padded_vocab"], np.int64)
    features = np.zeros(n, np.int64)
    starts = np.concatenate([[0], np.cumsum([len(g.tables) for g in groups])[:-1]]).astype(int)
    for g, first in zip(groups, starts, strict=True):
        np.add.at(features, first + np.asarray(g.feature_table, np.int64), 1)
    rec.emit(
        track=np.full(n, track, np.uint32),
        name=[LAYOUT_EVENT] * n,
        category=[LAYOUT_CATEGORY] * n,
        start_ps=np.zeros(n, np.int64),
        dur_ps=np.zeros(n, np.int64),
        step=np.full(n, NULL_I32, np.int32),
        table=[g.name for g in groups for _ in g.tables],
        bytes=padded_vocab * padded_row,
        args={
            "table_name": [t for g in groups for t in g.tables],
            "stack_tables": np.array([len(g.tables) for g in groups], np.int64)[gi],
            "stack_position": np.array(per_table["position"], np.int64),
            "features": features,
            "vocab": np.array(per_table["vocab"], np.int64),
            "padded_vocab": padded_vocab,
            "width": width,
            "padded_width": padded_row // dtype_bytes,
            "dtype_bytes": dtype_bytes,
            "row_bytes": width * dtype_bytes,
            "padded_row_bytes": padded_row,
            "optimizer_slots": np.array([g.optimizer_slots for g in groups], np.int64)[gi],
            "max_ids_per_partition": np.array([g.max_ids_per_partition for g in groups], np.int64)[gi],
            "max_unique_ids_per_partition": np.array([g.max_unique_ids_per_partition for g in groups], np.int64)[gi],
        },
    )


def _emit_modules(rec: Recorder, tr: _Tracks, sim: Simulation, cols: dict) -> int:
    """One module event per run of consecutive ops of one step and pass on one core."""
    s = sim.schedule
    kind = cols["kind"]
    on_core = np.isin(kind, (TC_FWD, TC_BWD, SC_FWD, SC_BWD))
    idx = np.flatnonzero(on_core)
    module = np.where(np.isin(kind[idx], (TC_FWD, TC_BWD)), 0, np.where(kind[idx] == SC_FWD, 1, 2))
    res = cols["resource"][idx]
    order = np.lexsort((s.start_ps[idx], res))
    idx, module, res = idx[order], module[order], res[order]
    step = cols["step"][idx]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (res[1:] != res[:-1]) | (step[1:] != step[:-1]) | (module[1:] != module[:-1])
    first = np.flatnonzero(new)
    start = s.start_ps[idx[first]]
    end = np.maximum.reduceat(s.end_ps[idx], first)
    names = np.array([rec.intern(n) for n in (TC_MODULE, SC_FWD_MODULE, SC_BWD_MODULE)], np.uint32)
    module_track = np.zeros(len(sim.resources.units()), dtype=np.uint32)
    res_ops = tr.resource_track
    ops_to_module = {tr.tc_ops[c]: tr.tc_modules[c] for c in range(len(tr.tc_ops))}
    ops_to_module.update({tr.sc_ops[k]: tr.sc_modules[k] for k in tr.sc_ops})
    for r, t in enumerate(res_ops):
        module_track[r] = ops_to_module.get(int(t), 0)
    o = np.lexsort((module_track[res[first]], start))
    rec.emit(
        track=module_track[res[first]][o],
        name=names[module[first]][o],
        start_ps=start[o],
        dur_ps=(end - start)[o],
        step=step[first][o].astype(np.int32),
    )
    return len(first)


def _emit_steps(rec: Recorder, tr: _Tracks, sim: Simulation, cols: dict) -> None:
    """Step markers per TensorCore and per SparseCore.

    TC step i runs from its dense forward to the next step's dense forward (the last
    step: to the end of its last TC or ICI task). SC step i runs from its first
    forward op on that SparseCore to the next step's first forward op (the last step:
    to the end of its last op there). Markers of one track never overlap.
    """
    s = sim.schedule
    kind, res, step = cols["kind"], cols["resource"], cols["step"]
    n_steps = sim.cfg.steps
    res_ = sim.resources
    tracks, steps_col, starts, durs = [], [], [], []

    def markers(track_id: int, anchor: np.ndarray, mine: np.ndarray) -> None:
        first = np.full(n_steps, np.iinfo(np.int64).max)
        np.minimum.at(first, step[anchor], s.start_ps[anchor])
        last_end = s.end_ps[mine & (step == n_steps - 1)].max()
        ends = np.append(first[1:], last_end)
        tracks.append(np.full(n_steps, track_id, np.uint32))
        steps_col.append(np.arange(n_steps, dtype=np.int32))
        starts.append(first)
        durs.append(ends - first)

    for c in range(res_.num_chips):
        tc_mine = (res == res_.tc(c)) | (res == res_.ici(c))
        markers(tr.tc_steps[c], (res == res_.tc(c)) & (kind == TC_FWD), tc_mine)
        for k in range(res_.sparsecores_per_chip):
            r = res == res_.sc(c, k)
            markers(tr.sc_steps[c, k], r & (kind == SC_FWD), r)
    rec.steps(
        track=np.concatenate(tracks),
        step=np.concatenate(steps_col),
        start_ps=np.concatenate(starts),
        dur_ps=np.concatenate(durs),
    )


def _emit_partition_stats(rec: Recorder, sim: Simulation) -> None:
    """Per step, table group and target partition: observed vs compiled, minibatches, drops.

    `ids`/`unique_ids` are the largest count any one source SparseCore sends to the
    partition (what the compiled limits bound); `dropped_ids` sums over sources.
    """
    spc = sim.hw.sparsecores_per_chip
    n_sc = sim.hw.num_total_sparse_cores
    part = np.arange(n_sc)
    cols: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "step",
            "chip",
            "sc",
            "table",
            "ids",
            "unique_ids",
            "max_ids_per_partition",
            "max_unique_ids_per_partition",
            "minibatches",
            "dropped_ids",
        )
    }
    for sr in sim.steps:
        for gr in sr.groups:
            g = gr.group
            cols["step"].append(np.full(n_sc, sr.step, np.int32))
            cols["chip"].append((part // spc).astype(np.int32))
            cols["sc"].append((part % spc).astype(np.int32))
            cols["table"].append(np.full(n_sc, rec.intern(g.name), np.uint32))
            cols["ids"].append(gr.partition_ids)
            cols["unique_ids"].append(gr.partition_unique_ids)
            cols["max_ids_per_partition"].append(np.full(n_sc, g.max_ids_per_partition))
            cols["max_unique_ids_per_partition"].append(np.full(n_sc, g.max_unique_ids_per_partition))
            cols["minibatches"].append(np.full(n_sc, gr.minibatches, np.int32))
            cols["dropped_ids"].append(gr.partition_dropped)
    rec.partition_stats(**{k: np.concatenate(v) for k, v in cols.items()})


def _changes(ts: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The samples of a held counter where its value changes (and the first)."""
    keep = np.ones(len(ts), dtype=bool)
    keep[1:] = value[1:] != value[:-1]
    return ts[keep], value[keep]


def _counter(rec: Recorder, track: int, ts: np.ndarray, value: np.ndarray) -> None:
    ts, value = _changes(np.asarray(ts, np.int64), np.asarray(value, np.float64))
    rec.counters(track=np.full(len(ts), track, np.uint32), ts_ps=ts, value=value)


def _emit_static_memory(rec: Recorder, tr: _Tracks, sim: Simulation) -> None:
    """SPMEM per tile on every SparseCore, and the static heap (from t = 0) per chip."""
    mem = sim.memory
    zero = np.zeros(1, np.int64)
    for track in tr.spmem.values():
        _counter(rec, track, zero, [mem.spmem_per_tile])
    if not sim.steps:
        for c in range(sim.hw.num_chips):
            for name, track in tr.heap_parts[c].items():
                _counter(rec, track, zero, [mem.heap[name]])
            _counter(rec, tr.heap[c], zero, [mem.heap_static])


def _emit_failure(rec: Recorder, sim: Simulation) -> None:
    """The failure, if any: a zero-length event on the host's Failures line."""
    f = sim.failure
    if f is None:
        return
    track = rec.track(HOST_PLANE, FAILURE_LINE, "host")
    rec.emit(
        track=[track],
        name=[f.kind],
        category=[FAILURE_CATEGORY],
        start_ps=[f.ts_ps],
        dur_ps=[0],
        step=[NULL_I32 if f.step is None else f.step],
        bytes=[f.requested_bytes],
        args={"message": [f.message], "chip": [f.chip], "capacity_bytes": [f.capacity_bytes]},
    )


def _emit_counters(rec: Recorder, tr: _Tracks, sim: Simulation, cols: dict) -> None:
    """Memory (HBM heap, its contributors, HBM stack, SPMEM) and prefetched steps per chip;
    dropped IDs per step on the host."""
    s = sim.schedule
    kind, step = cols["kind"], cols["step"]
    n_steps = sim.cfg.steps
    mem = sim.memory
    _emit_static_memory(rec, tr, sim)
    zero = np.zeros(1, np.int64)
    for c, cm in enumerate(sim.timeline):
        _counter(rec, tr.queue[c], cm.ts_ps, cm.prefetched_steps)
        _counter(rec, tr.heap[c], cm.ts_ps, cm.heap_bytes)
        for name, track in tr.heap_parts[c].items():
            if name == PREFETCHED_INPUTS:
                _counter(rec, track, cm.ts_ps, cm.prefetched_bytes)
            else:
                _counter(rec, track, zero, [mem.heap[name]])
        _counter(rec, tr.stack[c], cm.ts_ps, cm.stack_bytes)
    host = kind == HOST
    end = np.zeros(n_steps, dtype=np.int64)
    np.maximum.at(end, step[host], s.end_ps[host])
    dropped = np.array([sr.dropped_ids for sr in sim.steps], dtype=np.float64)
    rec.counters(track=np.full(n_steps, tr.dropped, np.uint32), ts_ps=end, value=dropped)

"""Write a run through the profiler's Recorder, on the simulated clock, as it is simulated.

Tracks follow XProf: `/host:CPU` (one line per input thread and per host->HBM link),
`/device:TPU:N` (Steps, XLA Modules, XLA Ops, ICI, counters) and
`/device:TPU:N SparseCore M` (Sparse Core Steps, Sparse Core Modules, Sparse Core Ops).
Every task becomes one event with its step and typed arguments; modules are the runs
of consecutive ops of one step (and pass) on one core; step markers, per-partition
statistics and counters complete the picture. All columns are built with numpy.

`TraceWriter` takes the run in parts (sim_backend/recording/stream.py): each step's preprocessing,
windows of scheduled tasks in order of start (every task starting before the window's
end), steps whose tasks are all scheduled, and memory samples in time order. Ops are
written in (start, track) order, as one sort of the whole run would; a module is
written once the next op on its core belongs to another one. `write_trace` hands a
finished Simulation to it in one window.
"""

from __future__ import annotations

import numpy as np

from profiler.recorder import Recorder
from profiler.wire import NULL_I32
from sim_backend.debug_checks import StepChecks
from sim_backend.emulator import RunSetup, Simulation, run_setup
from sim_backend.memory import HEAP_CONTRIBUTORS, PREFETCHED_INPUTS, STACK, ChipMemory, Failure
from sim_backend.preprocess import StepResult
from sim_backend.recording.check_events import CheckEvents, forward_done_ps
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
    Resources,
)
from sim_backend.taskgraph import EVENT_ARGS

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
NO_TIME = np.iinfo(np.int64).max


def tc_plane(chip: int) -> str:
    return f"/device:TPU:{chip}"


def sc_plane(chip: int, core: int) -> str:
    return f"/device:TPU:{chip} SparseCore {core}"


class _Tracks:
    """Declares every track once and maps (resource, unit) to its ops track."""

    def __init__(self, rec: Recorder, res: Resources):
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


class TraceWriter:
    """Writes one run through `rec` in parts, in the order stream.py produces them.

    Task columns (`cols`) are those of TaskGraph.columns() plus `start_ps`, `end_ps`,
    `unit` (of the task's resource) and `task` (its id).
    """

    def __init__(self, rec: Recorder, su: RunSetup):
        self.rec, self.su = rec, su
        self.tr = tr = _Tracks(rec, su.resources)
        compiled = su.failure is None  # a program that does not compile has no ops, modules or layout
        ids = rec.intern if compiled else lambda s: 0
        self.names = np.array([ids(KIND_NAMES[k]) for k in range(len(KIND_NAMES))], np.uint32)
        self.categories = np.array([ids(KIND_CATEGORIES[k]) for k in range(len(KIND_NAMES))], np.uint32)
        self.group_names = np.array([0] + [ids(g.name) for g in su.groups], np.uint32)
        self.module_names = np.array([ids(n) for n in (TC_MODULE, SC_FWD_MODULE, SC_BWD_MODULE)], np.uint32)
        ops_to_module = {tr.tc_ops[c]: tr.tc_modules[c] for c in range(len(tr.tc_ops))}
        ops_to_module.update({tr.sc_ops[k]: tr.sc_modules[k] for k in tr.sc_ops})
        self.module_track = np.array([ops_to_module.get(int(t), 0) for t in tr.resource_track], np.uint32)
        n_res = len(su.resources.units())
        # per resource, the module still open: start, end, step, module (0 TC, 1 SC fwd, 2 SC bwd; -1 none)
        self._open = {k: np.full(n_res, -1, np.int64) for k in ("start", "end", "step", "module")}
        self._anchors: dict[int, np.ndarray] = {}  # step -> first-op start per Steps track (markers)
        self._last_counter: dict[int, float] = {}  # counter track -> value last written
        self._ended_modules: list[tuple[np.ndarray, ...]] = []  # written at the next flush()
        self._dropped: dict[int, int] = {}  # step -> dropped IDs (written once its host tasks ran)
        self.checks = CheckEvents(su.cfg, su.groups, HOST_PLANE)
        self.events = 0  # op and module events written
        self._marker_tracks = np.array(
            [
                t
                for c in range(len(tr.tc_steps))
                for t in [tr.tc_steps[c], *(tr.sc_steps[c, k] for k in range(su.resources.sparsecores_per_chip))]
            ],
            np.uint32,
        )
        if compiled:
            _emit_table_layout(rec, su)
        zero = np.zeros(1, np.int64)
        mem = su.memory
        for track in tr.spmem.values():
            self._counter(track, zero, [mem.spmem_per_tile])
        for c in range(su.hw.num_chips):
            for name, track in tr.heap_parts[c].items():
                if name != PREFETCHED_INPUTS:
                    self._counter(track, zero, [mem.heap[name]])

    # -- per step, as preprocessed --------------------------------------------------------------

    def preprocessed(self, sr: StepResult) -> None:
        """Partition statistics of one step, observed vs compiled, minibatches and drops.

        `ids`/`unique_ids` are the largest count any one source SparseCore sends to the
        partition (what the compiled limits bound); `dropped_ids` sums over sources.
        """
        spc = self.su.hw.sparsecores_per_chip
        n_sc = self.su.hw.num_total_sparse_cores
        part = np.arange(n_sc)
        rows = []
        for gr in sr.groups:
            g = gr.group
            rows.append(
                {
                    "step": np.full(n_sc, sr.step, np.int32),
                    "chip": (part // spc).astype(np.int32),
                    "sc": (part % spc).astype(np.int32),
                    "table": np.full(n_sc, self.group_names[g.index + 1], np.uint32),
                    "ids": gr.partition_ids,
                    "unique_ids": gr.partition_unique_ids,
                    "max_ids_per_partition": np.full(n_sc, g.max_ids_per_partition),
                    "max_unique_ids_per_partition": np.full(n_sc, g.max_unique_ids_per_partition),
                    "minibatches": np.full(n_sc, gr.minibatches, np.int32),
                    "dropped_ids": gr.partition_dropped,
                }
            )
        self.rec.partition_stats(**{k: np.concatenate([r[k] for r in rows]) for k in rows[0]})
        self._dropped[sr.step] = sr.dropped_ids

    # -- windows of scheduled tasks -------------------------------------------------------------

    def window(self, cols: dict[str, np.ndarray]) -> None:
        """Ops of tasks that start before the window's end and after the previous window's."""
        if not len(cols["kind"]):
            return
        tr = self.tr
        kind, start = cols["kind"], cols["start_ps"]
        track = tr.resource_track[cols["resource"]]
        host = kind == HOST
        track[host] = tr.host_unit_track[cols["unit"][host]]
        order = np.lexsort((cols["task"], track, start))
        typed = {}
        for f in EVENT_ARGS:  # negative where a task has none
            v = cols[f.name][order]
            typed[f.name] = np.where(v < 0, f.null, v)
        step = cols["step"][order]
        self.rec.emit(
            track=track[order],
            name=self.names[kind[order]],
            category=self.categories[kind[order]],
            start_ps=start[order],
            dur_ps=(cols["end_ps"] - start)[order],
            step=np.where(step < 0, NULL_I32, step).astype(np.int32),
            table=self.group_names[cols["group"][order] + 1],
            **typed,
        )
        self.events += len(kind)
        self._modules(cols)

    def _modules(self, cols: dict[str, np.ndarray] | None) -> None:
        """Extend the open modules with the window's core ops; write the modules that ended
        (None: the run is over, write every open one)."""
        op = self._open
        held = np.flatnonzero(op["module"] >= 0)  # resources with an open module: one row each
        res, start, end, step, module, task = (
            held,
            op["start"][held],
            op["end"][held],
            op["step"][held],
            op["module"][held],
            np.full(len(held), -1),
        )
        if cols is not None:
            kind = cols["kind"]
            idx = np.flatnonzero(np.isin(kind, (TC_FWD, TC_BWD, SC_FWD, SC_BWD)))
            mod = np.where(np.isin(kind[idx], (TC_FWD, TC_BWD)), 0, np.where(kind[idx] == SC_FWD, 1, 2))
            res, start, end = (
                np.concatenate([a, cols[k][idx]]) for a, k in ((res, "resource"), (start, "start_ps"), (end, "end_ps"))
            )
            step, module = np.concatenate([step, cols["step"][idx]]), np.concatenate([module, mod])
            task = np.concatenate([task, cols["task"][idx]])
        order = np.lexsort((task, start, res))
        res, start, end, step, module = res[order], start[order], end[order], step[order], module[order]
        new = np.ones(len(res), dtype=bool)
        new[1:] = (res[1:] != res[:-1]) | (step[1:] != step[:-1]) | (module[1:] != module[:-1])
        first = np.flatnonzero(new)
        if not len(first):
            return
        r, s0, st, md = res[first], start[first], step[first], module[first]
        e = np.maximum.reduceat(end, first)
        done = np.ones(len(first), bool)
        if cols is not None:  # the last module of each core may go on in the next window
            done[:-1] = r[1:] == r[:-1]
            done[-1] = False
        for k, v in (("start", s0), ("end", e), ("step", st), ("module", md)):
            op[k][r[~done]] = v[~done]
        op["module"][r[done & ~np.isin(r, r[~done])]] = -1
        r, s0, e, st, md = r[done], s0[done], e[done], st[done], md[done]
        o = np.lexsort((self.module_track[r], s0))
        self._ended_modules.append((self.module_track[r][o], self.module_names[md][o], s0[o], (e - s0)[o], st[o]))
        self.events += len(r)

    def _write_modules(self) -> None:
        """The modules ended since the last call, as chunks of their own: in a chunk with ops
        they would carry the ops' typed columns (as nulls), about 60 bytes each."""
        parts, self._ended_modules = self._ended_modules, []
        if parts:
            self.rec.flush()
            track, name, start, dur, step = (np.concatenate(c) for c in zip(*parts, strict=True))
            self.rec.emit(track=track, name=name, start_ps=start, dur_ps=dur, step=step.astype(np.int32))
            self.rec.flush()

    # -- steps whose tasks all ran --------------------------------------------------------------

    def step_done(self, step: int, cols: dict[str, np.ndarray], checks: StepChecks | None) -> None:
        """Step markers, check events and the dropped-ID count of a step whose tasks (`cols`,
        all of that step's) are all scheduled."""
        res_, kind, res, start = self.su.resources, cols["kind"], cols["resource"], cols["start_ps"]
        anchor = (kind == TC_FWD) | (kind == SC_FWD)
        first = np.full(len(self.tr.resource_track), NO_TIME)  # per resource, its first op of the step
        np.minimum.at(first, res[anchor], start[anchor])
        marker_res = [
            r
            for c in range(res_.num_chips)
            for r in [res_.tc(c), *(res_.sc(c, k) for k in range(res_.sparsecores_per_chip))]
        ]
        self._anchors[step] = first[marker_res]
        if step == self.su.cfg.steps - 1:  # the last marker ends with the last op on its core
            last = np.zeros(len(self.tr.resource_track), np.int64)
            np.maximum.at(last, res, cols["end_ps"])
            ici = [res_.ici(c) for c in range(res_.num_chips)]
            last[[res_.tc(c) for c in range(res_.num_chips)]] = np.maximum(
                last[[res_.tc(c) for c in range(res_.num_chips)]], last[ici]
            )
            self._anchors[step + 1] = last[marker_res]
        for s in (step - 1, step):
            if s in self._anchors and s + 1 in self._anchors:
                a = self._anchors.pop(s)
                n = len(a)
                b = self._anchors[s + 1] if s + 1 < self.su.cfg.steps else self._anchors.pop(s + 1)
                self.rec.steps(track=self._marker_tracks, step=np.full(n, s, np.int32), start_ps=a, dur_ps=b - a)
        self.checks.add_step(checks, forward_done_ps(cols, cols["end_ps"], len(self.su.groups)))
        host = kind == HOST
        end = int(cols["end_ps"][host].max())
        self.rec.counters(track=[self.tr.dropped], ts_ps=[end], value=[float(self._dropped.pop(step))])

    # -- memory over time -----------------------------------------------------------------------

    def memory(self, timeline: list[ChipMemory]) -> None:
        """Counters of memory samples read out in time order (MemoryTimeline.advance)."""
        tr = self.tr
        for c, cm in enumerate(timeline):
            self._counter(tr.queue[c], cm.ts_ps, cm.prefetched_steps)
            self._counter(tr.heap[c], cm.ts_ps, cm.heap_bytes)
            self._counter(tr.heap_parts[c][PREFETCHED_INPUTS], cm.ts_ps, cm.prefetched_bytes)
            self._counter(tr.stack[c], cm.ts_ps, cm.stack_bytes)

    def _counter(self, track: int, ts: np.ndarray, value) -> None:
        """The samples of a held counter where its value changes (and its first)."""
        ts, value = np.asarray(ts, np.int64), np.asarray(value, np.float64)
        if not len(ts):
            return
        keep = np.ones(len(ts), dtype=bool)
        keep[1:] = value[1:] != value[:-1]
        if track in self._last_counter:
            keep[0] = value[0] != self._last_counter[track]
        self._last_counter[track] = float(value[-1])
        self.rec.counters(track=np.full(int(keep.sum()), track, np.uint32), ts_ps=ts[keep], value=value[keep])

    # -- the end ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what is gathered (modules, check events) and everything the recorder buffers."""
        self._write_modules()
        self.checks.emit(self.rec)
        self.rec.flush()

    def finish(self, failure: Failure | None, ran: bool = True) -> None:
        """The modules still open, gathered check events and the failure (if any); `ran`
        False: no step ran (a compile error), so the heap is its static part."""
        self._modules(None)
        self._write_modules()
        self.checks.emit(self.rec)
        if not ran:
            zero = np.zeros(1, np.int64)
            for c in range(self.su.hw.num_chips):
                self._counter(self.tr.heap_parts[c][PREFETCHED_INPUTS], zero, [self.su.memory.heap[PREFETCHED_INPUTS]])
                self._counter(self.tr.heap[c], zero, [self.su.memory.heap_static])
        if failure is not None:
            track = self.rec.track(HOST_PLANE, FAILURE_LINE, "host")
            self.rec.emit(
                track=[track],
                name=[failure.kind],
                category=[FAILURE_CATEGORY],
                start_ps=[failure.ts_ps],
                dur_ps=[0],
                step=[NULL_I32 if failure.step is None else failure.step],
                bytes=[failure.requested_bytes],
                args={"message": [failure.message], "chip": [failure.chip], "capacity_bytes": [failure.capacity_bytes]},
            )


def task_columns(sim: Simulation) -> dict[str, np.ndarray]:
    """A finished simulation's task columns with their schedule (TraceWriter's `cols`)."""
    cols = sim.graph.columns()
    s = sim.schedule
    cols.update(start_ps=s.start_ps, end_ps=s.end_ps, unit=s.unit, task=np.arange(len(s.start_ps)))
    return cols


def open_recorder(
    path: str, su: RunSetup, run_name: str, run_id: str, config: dict, tags: dict[str, str], producer: str
) -> Recorder:
    """The Recorder of one emulated run: its header from the run's facts; a fixed start time
    (0), so the same config gives a byte-identical trace."""
    return Recorder(
        path,
        run_name=run_name,
        producer=producer,
        hardware=su.hw.recorder_dict(),
        config=config,
        tags=tags,
        run_id=run_id,
        start_time_unix_ns=0,
    )


def write_trace(
    sim: Simulation, path: str, run_name: str, run_id: str, config: dict, tags: dict[str, str], producer: str
) -> int:
    """Write a finished simulation to `path` in one window; returns the number of events
    (ops + modules)."""
    su = run_setup(sim)
    with open_recorder(path, su, run_name, run_id, config, tags, producer) as rec:
        w = TraceWriter(rec, su)
        for sr in sim.steps:
            w.preprocessed(sr)
        if sim.steps:
            cols = task_columns(sim)
            w.window(cols)
            order = np.argsort(cols["step"], kind="stable")
            bounds = np.searchsorted(cols["step"][order], np.arange(-1, len(sim.steps) + 1))
            for s in range(len(sim.steps)):
                rows = order[bounds[s + 1] : bounds[s + 2]]
                w.step_done(s, {k: v[rows] for k, v in cols.items()}, sim.checks[s])
            w.memory(sim.timeline)
        w.finish(sim.failure, ran=bool(sim.steps))
    return w.events


def _emit_table_layout(rec: Recorder, su: RunSetup) -> None:
    """What the compiler decided for every table, before step 0: one zero-length event
    per table on the host's `Table Layout` line (category `compile`, typed `table` = its
    stack), so analyzers see stacking and padding from the trace alone."""
    groups = su.groups
    track = rec.track(HOST_PLANE, LAYOUT_LINE, "host")
    n = sum(len(g.tables) for g in groups)
    per_table = {"group": [], "position": [], "vocab": [], "padded_vocab": []}
    vocab = {t.name: t.vocab for t in su.cfg.tables}
    for gi, g in enumerate(groups):
        per_table["group"] += [gi] * len(g.tables)
        per_table["position"] += list(range(len(g.tables)))
        per_table["vocab"] += [vocab[t] for t in g.tables]
        per_table["padded_vocab"] += g.padded_vocab.tolist()
    gi = np.array(per_table["group"], np.int64)
    width = np.array([g.width for g in groups], np.int64)[gi]
    dtype_bytes = np.array([g.dtype_bytes for g in groups], np.int64)[gi]
    padded_row = np.array([su.cost.padded_row_bytes(g.width, g.dtype_bytes) for g in groups], np.int64)[gi]
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

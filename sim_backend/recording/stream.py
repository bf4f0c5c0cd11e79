"""Simulate a run and write its trace as it goes (`scprof record`).

Each step is generated and preprocessed, added to the task graph (stepgraph.GraphBuilder)
and scheduled as far as it can be exactly (scheduler.OnlineScheduler: the same schedule
as the batch scheduler on the whole graph). Scheduled tasks go to the TraceWriter in
windows in order of start; a step whose tasks have all been written is summed up (step
markers, checks, memory changes, NaN check) and forgotten. Memory therefore holds only
the steps in flight, whatever the number of steps, and the Recorder writes a chunk at
least every FLUSH_STEPS steps, so a crash loses at most those. docs/emulator.md
"Streaming" gives the argument for exactness.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from profiler.recorder import Recorder
from sim_backend.debug_checks import StepChecks
from sim_backend.emulator import InputStats, RunSetup, close_inputs, run_step_inputs
from sim_backend.errors import ConfigError
from sim_backend.memory import Failure, MemoryTimeline, find_oom, input_buffer_bytes
from sim_backend.metrics import TimeShares, steady_step_time_ps
from sim_backend.recording.check_events import first_nan, nan_failure_at
from sim_backend.recording.instrument import TraceWriter
from sim_backend.scheduler import OnlineScheduler
from sim_backend.stepgraph import TC_FWD, GraphBuilder
from sim_backend.taskgraph import GraphPart

FLUSH_STEPS = 50  # the trace is written out at least every this many steps (a kill loses at most these)
WINDOW_TASKS = 4096  # scheduled tasks are handed to the writer in windows of about this many
# Simulated time stays below 2^62 ps (about 53 days): the trace and the store hold int64 ps, and
# ends and sums of times must not wrap. Each task is at most an hour (costmodel.MAX_TASK_S), but
# 100,000 steps of slow ones could still pass it.
MAX_SIM_TIME_PS = 1 << 62


@dataclass
class StreamResult:
    """What a streamed run leaves besides its trace: the headline figures and the failure."""

    events: int  # op and module events written
    failure: Failure | None
    mean_step_time_ps: float
    shares: dict[str, float]  # chip 0's time: host, sc, tc, idle (metrics.TimeShares)
    minibatches: int  # over all steps (the same count for every stack of a step)
    steps_run: int  # steps preprocessed
    dropped_ids: int
    observed: InputStats | None = None  # per stack: derived limits and FDO stats
    timings_s: dict[str, float] = field(default_factory=dict)


class _HeldTasks:
    """Columns of the tasks admitted and not yet summed up, by task id (from `base` on)."""

    def __init__(self) -> None:
        self.base = 0
        self.cols: dict[str, np.ndarray] = {}

    def add(self, part: GraphPart) -> None:
        new = dict(part.columns)
        n = len(part)
        new.update(
            start_ps=np.full(n, -1, np.int64),
            end_ps=np.full(n, -1, np.int64),
            unit=np.full(n, -1, np.int64),
            task=np.arange(part.task_base, part.task_base + n, dtype=np.int64),
        )
        if not self.cols or not len(self.cols["task"]):
            self.base, self.cols = part.task_base, new
            return
        self.cols = {k: np.concatenate([v, new[k]]) for k, v in self.cols.items()}

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Columns of tasks `rows` (ids)."""
        return {k: v[rows - self.base] for k, v in self.cols.items()}

    def forget_before(self, task: int) -> None:
        cut = task - self.base
        if cut > 0:
            self.cols = {k: v[cut:] for k, v in self.cols.items()}
            self.base = task


class _Steps:
    """Per step in flight (-1: the table initialisation): its task ids, how many were written,
    the earliest start written."""

    def __init__(self) -> None:
        self.first: dict[int, int] = {}
        self.count: dict[int, int] = {}
        self.written: dict[int, int] = {}
        self.first_start: dict[int, int] = {}

    def admit(self, step: int, first: int, count: int) -> None:
        self.first[step], self.count[step], self.written[step] = first, count, 0

    def wrote(self, step: np.ndarray, start: np.ndarray) -> list[int]:
        """Count written tasks; returns the steps now complete, in order."""
        done = []
        for s, n, t0 in zip(*np.unique(step, return_counts=True), _min_by(step, start), strict=True):
            s = int(s)
            self.written[s] += int(n)
            self.first_start.setdefault(s, int(t0))
            if self.written[s] == self.count[s]:
                done.append(s)
        return done

    def forget(self, step: int) -> None:
        for d in (self.first, self.count, self.written, self.first_start):
            d.pop(step, None)

    def safe_time(self, watermark: float) -> float:
        """Before this time, no step still in flight changes anything: the earliest start of
        their written tasks (later tasks start after `watermark`)."""
        return min([watermark, *self.first_start.values()])

    def oldest_task(self) -> int | None:
        return min(self.first.values()) if self.first else None


def _min_by(key: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Per distinct key (in sorted order), the least value."""
    uniq, inv = np.unique(key, return_inverse=True)
    out = np.full(len(uniq), np.iinfo(np.int64).max)
    np.minimum.at(out, inv, value)
    return out


def stream_run(su: RunSetup, rec: Recorder, progress: Callable[[int, int], None] | None = None) -> StreamResult:
    """Simulate `su.cfg` step by step, writing the trace through `rec` as it goes."""
    writer = TraceWriter(rec, su)
    if su.failure is not None:  # the program does not compile: nothing runs
        writer.finish(su.failure, ran=False)
        return StreamResult(0, su.failure, 0.0, {"host": 0.0, "sc": 0.0, "tc": 0.0, "idle": 1.0}, 0, 0, 0)
    try:
        return _Stream(su, writer, progress).run()
    finally:
        close_inputs(su)


class _Stream:
    """The state of one streamed run (see stream_run)."""

    def __init__(self, su: RunSetup, writer: TraceWriter, progress: Callable[[int, int], None] | None):
        self.su, self.writer, self.progress = su, writer, progress
        self.builder = GraphBuilder(su.cfg, su.hw, su.groups, su.cost, su.dense)
        b = self.builder
        self.sched = OnlineScheduler(b.res.units(), b.lookahead_steps, b.free_steps)
        self.tasks = _HeldTasks()
        self.steps = _Steps()
        self.timeline = MemoryTimeline(
            su.memory, su.hw.num_chips, su.cfg.flags.xla_sc_num_serialized_tables_to_optimize_hbm
        )
        self.shares = TimeShares(0)
        self.unwritten: list[tuple[int, int, int, int]] = []  # scheduled tasks not handed to the writer
        self.checks: dict[int, StepChecks | None] = {}
        self.step_input: dict[int, int] = {}
        self.nan: tuple[int, str] | None = None  # (step, table) of the first NaN, with the NaN checker on
        self.nan_failure: Failure | None = None
        self.oom: Failure | None = None
        self.tc_starts: dict[int, int] = {}  # dense forward start on chip 0 of steps 0, 1 and the last
        self.result = StreamResult(0, None, 0.0, {}, 0, 0, 0, InputStats(su.hw.num_chips))
        self.timings = {"generate": 0.0, "preprocess": 0.0, "schedule_and_write": 0.0}

    def run(self) -> StreamResult:
        su, r = self.su, self.result
        n = su.cfg.steps
        self._admit(-1)  # the table initialisation (maybe no tasks)
        for step in range(n):
            sr, checks = run_step_inputs(su, step, self.timings)
            t0 = time.perf_counter()
            self.writer.preprocessed(sr)
            self.checks[step] = checks
            self.step_input[step] = input_buffer_bytes(sr, su.hw, su.cost)
            table = first_nan(su.cfg, checks)
            if self.nan is None and table is not None:
                self.nan = (step, table)
            r.minibatches += sr.minibatches
            r.steps_run += 1
            r.dropped_ids += sr.dropped_ids
            r.observed.add(sr)
            self.builder.add_step(sr)
            self._admit(step)
            self.sched.run(step)
            flush = (step + 1) % FLUSH_STEPS == 0
            self._collect(force=flush)
            if flush:
                self.writer.flush()
            self.timings["schedule_and_write"] += time.perf_counter() - t0
            if self.progress:
                self.progress(step + 1, n)
        t0 = time.perf_counter()
        self.sched.run(None)
        self.sched.check_done()
        self._collect(final=True)
        failures = [f for f in (self.oom, self.nan_failure) if f is not None]
        r.failure = min(failures, key=lambda f: f.ts_ps) if failures else None
        self.writer.finish(r.failure)
        self.timings["schedule_and_write"] += time.perf_counter() - t0
        r.events = self.writer.events
        r.shares = self.shares.shares()
        first_two = [self.tc_starts.get(0, 0), self.tc_starts.get(1, 0)]
        r.mean_step_time_ps = steady_step_time_ps(first_two, self.tc_starts.get(n - 1, 0), n, self.shares.hi)
        r.timings_s = self.timings
        return r

    def _admit(self, step: int) -> None:
        part = self.builder.graph.drain()
        self.tasks.add(part)
        self.sched.admit(part)
        if len(part):
            self.steps.admit(step, part.task_base, len(part))
        else:  # no table initialisation: the time shares start at 0
            self.shares.set_lo(0)

    def _collect(self, force: bool = False, final: bool = False) -> None:
        """Take the tasks scheduled so far; hand those that start before the next decision
        to the writer once enough are gathered (`force`: now; `final`: the run is over)."""
        started, self.sched.started = self.sched.started, []
        self.unwritten += started
        if started and max(end for _, _, end, _ in started) >= MAX_SIM_TIME_PS:
            raise ConfigError(
                f"the simulated run passes 2^62 ps (about 53 days) by step {self.sched.max_done_step + 1}: "
                "rates too low for the sizes configured, or fewer steps needed"
            )
        watermark = np.inf if final else self.sched.now
        if self.unwritten and (final or force or len(self.unwritten) >= WINDOW_TASKS):
            self._window(watermark, final)
        elif not final:
            return
        tl = self.timeline.advance(self.steps.safe_time(watermark))
        self.writer.memory(tl)
        if self.oom is None:
            self.oom = find_oom(self.su.memory, tl)
        oldest = self.steps.oldest_task()
        self.tasks.forget_before(oldest if oldest is not None else self.tasks.base + len(self.tasks.cols["task"]))

    def _window(self, watermark: float, final: bool) -> None:
        """Write the scheduled tasks that start before `watermark`; sum up the steps they complete."""
        ids, start, end, unit = (np.array(c, np.int64) for c in zip(*self.unwritten, strict=True))
        ready = len(ids) if final else int(np.searchsorted(start, watermark, side="left"))
        self.unwritten = self.unwritten[ready:]
        ids, start, end, unit = ids[:ready], start[:ready], end[:ready], unit[:ready]
        rows = ids - self.tasks.base
        c = self.tasks.cols
        c["start_ps"][rows], c["end_ps"][rows], c["unit"][rows] = start, end, unit
        cols = self.tasks.take(ids)
        self.writer.window(cols)
        self.shares.add(cols["kind"], cols["chip"], start, end)
        for step in self.steps.wrote(cols["step"], start):
            self._step_done(step)

    def _step_done(self, step: int) -> None:
        """All tasks of `step` are written: sum the step up and forget it."""
        first, n = self.steps.first[step], self.steps.count[step]
        cols = self.tasks.take(np.arange(first, first + n, dtype=np.int64))
        self.steps.forget(step)
        if step == -1:  # the table initialisation: the time shares start at its end
            self.shares.set_lo(int(cols["end_ps"].max(initial=0)))
            return
        checks = self.checks.pop(step)
        self.writer.step_done(step, cols, checks)
        self.timeline.add_steps(cols, cols["start_ps"], cols["end_ps"], {step: self.step_input.pop(step)})
        last = self.su.cfg.steps - 1
        if step in (0, 1, last):
            m = (cols["kind"] == TC_FWD) & (cols["chip"] == 0)
            self.tc_starts[step] = int(cols["start_ps"][m][0])
        if self.nan is not None and self.nan[0] == step:
            self.nan_failure = nan_failure_at(self.su.groups, checks, self.nan[1], cols, cols["end_ps"])

"""Discrete-event list scheduler: runs a TaskGraph on resources with a simulated clock.

Each resource has a number of identical units (host threads; one unit for a TC, an SC,
an ICI link, a host->HBM link). When a unit is free, it takes the ready task with the
lowest priority value (ties: lowest task id), runs it to completion (no preemption),
then signals the task's events. Deterministic: no wall clock, no hash order.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from sim_backend.taskgraph import GraphPart, TaskGraph


@dataclass
class Schedule:
    start_ps: np.ndarray  # int64 per task
    end_ps: np.ndarray  # int64 per task
    unit: np.ndarray  # int64 per task: which unit of its resource ran it


class DeadlockError(RuntimeError):
    """Some tasks never became ready: the graph has a cycle or an event nobody signals."""


def schedule(graph: TaskGraph, units: list[int]) -> Schedule:
    """Run every task of `graph`; `units[r]` is the unit count of resource r."""
    n = len(graph)
    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    unit_of = np.full(n, -1, dtype=np.int64)
    pending = [len(w) for w in graph.waits]
    dependants: list[list[int]] = [[] for _ in graph.event_threshold]
    for tid, waits in enumerate(graph.waits):
        for e in waits:
            dependants[e].append(tid)
    count = [0] * len(graph.event_threshold)
    ready: list[list[tuple[int, int]]] = [[] for _ in units]
    free: list[list[int]] = [list(range(u)) for u in units]
    res, prio, dur, signals = graph.resource, graph.priority, graph.dur_ps, graph.signals
    dirty: set[int] = set()

    def fire(e: int) -> None:
        for t in dependants[e]:
            pending[t] -= 1
            if pending[t] == 0:
                heapq.heappush(ready[res[t]], (prio[t], t))
                dirty.add(res[t])

    for e, threshold in enumerate(graph.event_threshold):
        if threshold == 0:
            fire(e)
    for t in range(n):
        if pending[t] == 0 and not graph.waits[t]:
            heapq.heappush(ready[res[t]], (prio[t], t))
            dirty.add(res[t])
    running: list[tuple[int, int]] = []  # (end time, task)
    now = 0
    done = 0
    while True:
        for r in sorted(dirty):
            while ready[r] and free[r]:
                _, t = heapq.heappop(ready[r])
                u = heapq.heappop(free[r])
                start[t], end[t], unit_of[t] = now, now + dur[t], u
                heapq.heappush(running, (now + dur[t], t))
        dirty.clear()
        if not running:
            break
        now = running[0][0]
        while running and running[0][0] == now:
            _, t = heapq.heappop(running)
            done += 1
            heapq.heappush(free[res[t]], int(unit_of[t]))
            dirty.add(res[t])
            for e in signals[t]:
                count[e] += 1
                if count[e] == graph.event_threshold[e]:
                    fire(e)
    if done != n:
        stuck = int(np.flatnonzero(start < 0)[0])
        raise DeadlockError(
            f"{n - done} tasks never ran (first: task {stuck}, kind {graph.kind[stuck]}, step {graph.step[stuck]})"
        )
    return Schedule(start, end, unit_of)


class OnlineScheduler:
    """`schedule()` for a graph that grows while it runs, step by step (sim_backend/recording/stream.py).

    Same decisions as `schedule()` on the whole graph, provided every task that could be
    ready at a decision is in the graph by then. With the step structure of
    stepgraph.GraphBuilder that holds when steps up to `needed_step()` are admitted:
    a task of step j can be ready only once some task of a step >= j - lookahead has
    completed (or j < free_steps). `run(through_step)` stops before a decision that
    needs more; a task admitted ready although a decision since its readiness went
    without it raises (the argument above failed). Completed tasks and fired events no
    later step can wait on are forgotten, so memory stays bounded by the steps in flight.
    """

    def __init__(self, units: list[int], lookahead_steps: int, free_steps: int):
        self.units = units
        self.lookahead_steps = lookahead_steps
        self.free_steps = free_steps
        self.now = 0  # time of the next decision
        self.max_done_step = -1  # highest step of a completed task
        self.admitted_step = -1  # highest step admitted
        self.started: list[tuple[int, int, int, int]] = []  # (task, start, end, unit); the caller drains it
        self.held_tasks = 0  # admitted, not completed
        self._ready: list[list[tuple[int, int]]] = [[] for _ in units]
        self._free: list[list[int]] = [list(range(u)) for u in units]
        self._running: list[tuple[int, int]] = []  # (end time, task)
        self._dirty: set[int] = set()
        self._task: dict[int, list] = {}  # task -> [resource, priority, dur, signals, pending waits, step, unit]
        self._event: dict[int, list] = {}  # event -> [threshold, count, dependants, step, fired at (-1: not yet)]
        self._fired: list[int] = []  # fired events later steps may still wait on
        self._decided = -1  # time of the last decision

    def needed_step(self) -> int:
        """The last step that must be admitted before the next decision."""
        return max(self.free_steps - 1, self.max_done_step + self.lookahead_steps)

    def admit(self, part: GraphPart) -> None:
        """Take in the tasks and events of `part` (one or more whole steps, in order)."""
        cols = part.columns
        steps = cols["step"].tolist()
        events = self._event
        for k, threshold in enumerate(part.event_threshold):
            events[part.event_base + k] = [threshold, 0, [], -1, -1]
        for k, sig in enumerate(part.signals):
            for e in sig:
                events[e][3] = steps[k]  # an event's signallers are of its step
        if steps:
            self.admitted_step = max(self.admitted_step, max(steps))
        for k, threshold in enumerate(part.event_threshold):
            e = part.event_base + k
            if threshold == 0:  # nobody signals it
                events[e][3] = self.admitted_step
                self._fire(e)
        self._forget_fired()
        res, prio, dur = cols["resource"].tolist(), cols["priority"].tolist(), cols["dur_ps"].tolist()
        for k, waits in enumerate(part.waits):
            t = part.task_base + k
            pending, ready_at = 0, 0
            for e in waits:
                ev = events.get(e)
                if ev is None:
                    raise RuntimeError(f"task {t} (step {steps[k]}) waits on event {e}, of a step no longer held")
                if ev[4] < 0:
                    pending += 1
                    ev[2].append(t)
                else:
                    ready_at = max(ready_at, ev[4])
            self._task[t] = [res[k], prio[k], dur[k], part.signals[k], pending, steps[k], -1]
            if pending == 0:
                if ready_at <= self._decided:
                    raise RuntimeError(
                        f"task {t} (step {steps[k]}) was ready at {ready_at} ps but admitted after the decision "
                        f"at {self._decided} ps: the graph grew too late to schedule it exactly"
                    )
                heapq.heappush(self._ready[res[k]], (prio[k], t))
                self._dirty.add(res[k])
        self.held_tasks += len(part)

    def run(self, through_step: int | None = None) -> None:
        """Schedule until the next decision needs a step past `through_step` (None: the graph
        is complete; run it to the end) or nothing is left to run."""
        ready, free, running, task = self._ready, self._free, self._running, self._task
        while True:
            if through_step is not None and self.needed_step() > through_step:
                return
            now = self.now
            self._decided = now
            for r in sorted(self._dirty):
                while ready[r] and free[r]:
                    _, t = heapq.heappop(ready[r])
                    u = heapq.heappop(free[r])
                    rec = task[t]
                    rec[6] = u
                    heapq.heappush(running, (now + rec[2], t))
                    self.started.append((t, now, now + rec[2], u))
            self._dirty.clear()
            if not running:
                return
            self.now = now = running[0][0]
            while running and running[0][0] == now:
                _, t = heapq.heappop(running)
                r, _, _, signals, _, step, u = task.pop(t)
                self.held_tasks -= 1
                self.max_done_step = max(self.max_done_step, step)
                heapq.heappush(free[r], u)
                self._dirty.add(r)
                for e in signals:
                    ev = self._event[e]
                    ev[1] += 1
                    if ev[1] == ev[0]:
                        self._fire(e)

    def check_done(self) -> None:
        """After the last run(): every admitted task ran."""
        if self.held_tasks:
            t = min(self._task)
            raise DeadlockError(f"{self.held_tasks} tasks never ran (first: task {t}, step {self._task[t][5]})")

    def _fire(self, e: int) -> None:
        ev = self._event[e]
        ev[4] = self.now
        for t in ev[2]:
            rec = self._task[t]
            rec[4] -= 1
            if rec[4] == 0:
                heapq.heappush(self._ready[rec[0]], (rec[1], t))
                self._dirty.add(rec[0])
        ev[2] = []
        self._fired.append(e)

    def _forget_fired(self) -> None:
        """Drop fired events that no step from the next admitted one on can wait on
        (the initialisation's, step -1, every step may)."""
        oldest = self.admitted_step + 1 - self.lookahead_steps
        keep = []
        for e in self._fired:
            step = self._event[e][3]
            if step < 0 or step >= oldest:
                keep.append(e)
            else:
                del self._event[e]
        self._fired = keep

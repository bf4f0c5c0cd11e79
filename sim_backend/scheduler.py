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

from sim_backend.taskgraph import TaskGraph


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

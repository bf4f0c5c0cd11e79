"""Task graph with events (docs/emulator.md): tasks run on resources; events count completions.

A task waits on events and, when it completes, signals others. An event fires when
its counter reaches its threshold, which is the number of tasks that signal it (so
"all SC forward tasks of step i done" is one event). A task becomes ready once every
event it waits on has fired. Columns are kept as Python lists while building and
handed to the scheduler as numpy arrays.

A graph built while it runs (sim_backend/recording/stream.py) is handed out in parts: `drain()`
returns the tasks and events added since the last call and forgets them, keeping ids
global (`task_base`, `event_base`: the ids of the first ones still held).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiler.trace_fields import TYPED_FIELDS

# Per-task arguments (-1 = none): the emulator's own (table group, chip) and every numeric typed
# event field but the step, which is a task column of its own (recorded with each event).
EVENT_ARGS = tuple(f for f in TYPED_FIELDS if not f.is_string and f.name != "step")
ARG_NAMES = ("group", "chip", *(f.name for f in EVENT_ARGS))


@dataclass
class TaskGraph:
    """Tasks (columns) and events (threshold, signallers, dependants)."""

    kind: list[int] = field(default_factory=list)
    resource: list[int] = field(default_factory=list)
    dur_ps: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    priority: list[int] = field(default_factory=list)
    waits: list[tuple[int, ...]] = field(default_factory=list)
    signals: list[tuple[int, ...]] = field(default_factory=list)
    args: dict[str, list[int]] = field(default_factory=lambda: {a: [] for a in ARG_NAMES})
    event_names: list[str] = field(default_factory=list)
    event_threshold: list[int] = field(default_factory=list)
    task_base: int = 0  # id of the first task held (drain() hands out the ones before)
    event_base: int = 0  # id of the first event held

    def event(self, name: str = "") -> int:
        """A new event; its threshold grows with every task that signals it."""
        self.event_names.append(name)
        self.event_threshold.append(0)
        return self.event_base + len(self.event_threshold) - 1

    def add(
        self,
        kind: int,
        resource: int,
        dur_ps: int,
        step: int,
        priority: int,
        wait: tuple[int, ...] = (),
        signal: tuple[int, ...] = (),
        **args: int,
    ) -> int:
        """Add one task; returns its id."""
        tid = self.task_base + len(self.kind)
        self.kind.append(kind)
        self.resource.append(resource)
        self.dur_ps.append(int(dur_ps))
        self.step.append(step)
        self.priority.append(priority)
        self.waits.append(tuple(wait))
        self.signals.append(tuple(signal))
        for e in signal:
            if e < self.event_base:  # its threshold was handed out as final
                raise ValueError(f"task {tid} signals event {e}, which drain() already handed out")
            self.event_threshold[e - self.event_base] += 1
        for name, col in self.args.items():
            col.append(int(args.get(name, -1)))
        return tid

    def __len__(self) -> int:
        """Tasks held (all of them, unless drain() was called)."""
        return len(self.kind)

    def drain(self) -> GraphPart:
        """The tasks and events added since the last drain(), forgotten here (ids stay global).

        Every event's threshold must be final: all tasks that signal it are in this part.
        """
        part = GraphPart(
            self.task_base,
            self.columns(),
            self.waits,
            self.signals,
            self.event_base,
            self.event_threshold,
        )
        self.task_base += len(self.kind)
        self.event_base += len(self.event_threshold)
        for name in ("kind", "resource", "dur_ps", "step", "priority", "waits", "signals"):
            setattr(self, name, [])
        self.args = {a: [] for a in ARG_NAMES}
        self.event_names, self.event_threshold = [], []
        return part

    def columns(self) -> dict[str, np.ndarray]:
        """Task columns as numpy arrays (kind, resource, dur_ps, step, priority, args)."""
        out = {
            k: np.asarray(getattr(self, k), dtype=np.int64) for k in ("kind", "resource", "dur_ps", "step", "priority")
        }
        out.update({k: np.asarray(v, dtype=np.int64) for k, v in self.args.items()})
        return out

    def signallers(self) -> list[list[int]]:
        """For each event, the tasks that signal it."""
        out: list[list[int]] = [[] for _ in self.event_threshold]
        for tid, sig in enumerate(self.signals):
            for e in sig:
                out[e].append(tid)
        return out


@dataclass(frozen=True)
class GraphPart:
    """Tasks task_base.. and events event_base.. of a graph, as drain() hands them out."""

    task_base: int
    columns: dict[str, np.ndarray]  # as TaskGraph.columns()
    waits: list[tuple[int, ...]]
    signals: list[tuple[int, ...]]
    event_base: int
    event_threshold: list[int]

    def __len__(self) -> int:
        return len(self.waits)

"""Run a workload end to end on the simulated slice (no trace writing: see recording/instrument.py).

config -> per step: generate batch -> preprocess (real, numpy) -> task graph -> schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sim_backend.config import RunConfig
from sim_backend.costmodel import CostModel, make_cost_model
from sim_backend.debug_checks import StepChecks, run_checks
from sim_backend.dense import DenseWork, dense_work
from sim_backend.fdo_stats import StackFdoStats, new_stats
from sim_backend.generate import generate_step
from sim_backend.hardware import HardwareSpec, resolve_hardware
from sim_backend.limits import StackLimits
from sim_backend.memory import (
    ChipMemory,
    Failure,
    StaticMemory,
    compile_failure,
    find_oom,
    memory_timeline,
    static_memory,
)
from sim_backend.preprocess import StepResult, preprocess_step
from sim_backend.recording.check_events import nan_failure
from sim_backend.scheduler import Schedule, schedule
from sim_backend.stacking import Layout, StackGroup, plan_groups
from sim_backend.stepgraph import Resources, build_graph
from sim_backend.taskgraph import TaskGraph


@dataclass
class Simulation:
    """Everything one run decided: inputs, preprocessing results, graph and schedule."""

    cfg: RunConfig
    hw: HardwareSpec
    limits: dict[str, StackLimits]
    groups: list[StackGroup]
    cost: CostModel
    dense: DenseWork
    steps: list[StepResult]
    graph: TaskGraph
    resources: Resources
    schedule: Schedule
    observed: InputStats | None = None  # per stack: what derived limits and FDO stats are made of
    timings_s: dict[str, float] = field(default_factory=dict)  # wall time per phase
    memory: StaticMemory | None = None  # static sizes (memory.py)
    timeline: list[ChipMemory] = field(default_factory=list)  # per chip, over time
    failure: Failure | None = None  # compile error (no steps ran) or HBM OOM
    checks: list[StepChecks | None] = field(default_factory=list)  # per step (debug_checks.py)


def setup(cfg: RunConfig) -> tuple[HardwareSpec, dict[str, StackLimits], list[StackGroup], Layout]:
    """Resolve hardware, stacks with their limits (by stack name) and batch layout of a config."""
    h = cfg.hardware
    overrides = {k: getattr(h, k) for k in h.__dataclass_fields__ if k not in ("generation", "num_chips")}
    hw = resolve_hardware(h.generation, h.num_chips, overrides)
    groups = plan_groups(cfg, hw)
    limits = {
        g.name: StackLimits(g.max_ids_per_partition, g.max_unique_ids_per_partition, g.limit_source, g.ignored_limits)
        for g in groups
    }
    lay = Layout(cfg.global_batch, hw.num_chips, hw.sparsecores_per_chip)
    return hw, limits, groups, lay


@dataclass(frozen=True)
class RunSetup:
    """What a run fixes before step 0: hardware, limits, table groups, cost model, static
    memory, resources and (when the program does not compile) the compile error."""

    cfg: RunConfig
    hw: HardwareSpec
    limits: dict[str, StackLimits]
    groups: list[StackGroup]
    layout: Layout
    cost: CostModel
    dense: DenseWork
    memory: StaticMemory
    resources: Resources
    failure: Failure | None
    # sparsecore.preprocessing = "reference": the child process running jax-tpu-embedding
    # (reference_preprocess.ReferenceSession); closed when the run ends (close_inputs)
    reference: object | None = None


def prepare(cfg: RunConfig) -> RunSetup:
    """Everything a run fixes before step 0 (setup(), the cost model, static memory)."""
    hw, limits, groups, lay = setup(cfg)
    cost = make_cost_model(cfg.cost_model, hw, cfg.cost, cfg.perf_tables)
    dense = dense_work(cfg, cost.c.activation_bytes)
    mem = static_memory(cfg, hw, groups, cost)
    res = Resources(hw.num_chips, hw.sparsecores_per_chip, cfg.host.num_threads)
    failure = compile_failure(cfg, hw, groups, mem)
    reference = None
    if cfg.sparsecore.preprocessing == "reference" and failure is None:
        from sim_backend.reference_preprocess import ReferenceSession, session_setup  # the optional extra

        reference = ReferenceSession(session_setup(cfg, groups, lay))
    return RunSetup(
        cfg=cfg,
        hw=hw,
        limits=limits,
        groups=groups,
        layout=lay,
        cost=cost,
        dense=dense,
        memory=mem,
        resources=res,
        failure=failure,
        reference=reference,
    )


def close_inputs(su: RunSetup) -> None:
    """End what a run's host preprocessing holds (the reference backend's child process)."""
    if su.reference is not None:
        su.reference.close()


def run_setup(sim: Simulation) -> RunSetup:
    """The RunSetup of a finished simulation (its failure: the compile error, if any)."""
    lay = Layout(sim.cfg.global_batch, sim.hw.num_chips, sim.hw.sparsecores_per_chip)
    failure = sim.failure if not sim.steps else None
    return RunSetup(
        cfg=sim.cfg,
        hw=sim.hw,
        limits=sim.limits,
        groups=sim.groups,
        layout=lay,
        cost=sim.cost,
        dense=sim.dense,
        memory=sim.memory,
        resources=sim.resources,
        failure=failure,
    )


def run_step_inputs(
    su: RunSetup, step: int, timings: dict[str, float] | None = None
) -> tuple[StepResult, StepChecks | None]:
    """One step's host side: generate its IDs, run the debug checks, preprocess (for real).
    `timings` ("generate", "preprocess"): wall seconds added to."""
    cfg = su.cfg
    t0 = time.perf_counter()
    batches, checks = run_checks(cfg, step, generate_step(cfg, step))
    t1 = time.perf_counter()
    if su.reference is not None:
        from sim_backend.reference_preprocess import reference_step

        sr = reference_step(su.reference, step, batches, su.groups, su.layout, cfg)
    else:
        sr = preprocess_step(step, batches, su.groups, su.layout, cfg.sparsecore)
    if timings is not None:
        timings["generate"] += t1 - t0
        timings["preprocess"] += time.perf_counter() - t1
    return sr, checks


@dataclass
class InputStats:
    """What the steps' preprocessing observed, per stack: the largest IDs / unique IDs one
    SparseCore sent one partition (derived limits, as the library's FDO takes the maximum
    over partitions) and the stats rows the library's FDO client would record each step."""

    chips: int
    limits: dict[str, tuple[int, int]] = field(default_factory=dict)
    fdo: dict[str, StackFdoStats] = field(default_factory=dict)

    def add(self, sr: StepResult) -> None:
        for gr in sr.groups:
            name = gr.group.name
            max_ids, max_uniq, required, dropped = gr.fdo_stats(self.chips)
            self.fdo.setdefault(name, new_stats()).add(max_ids, max_uniq, required, dropped)
            old = self.limits.get(name, (0, 0))
            self.limits[name] = (max(old[0], int(max_ids.max())), max(old[1], int(max_uniq.max())))


def simulate(cfg: RunConfig, progress: Callable[[int, int], None] | None = None) -> Simulation:
    """Run every step of `cfg`: preprocessing for real, device work on the task graph.

    The whole run at once, every task kept (for tests and analyses); `scprof record`
    streams instead (recording/stream.py), with the same schedule.
    """
    su = prepare(cfg)
    try:
        return _simulate(su, progress)
    finally:
        close_inputs(su)


def _simulate(su: RunSetup, progress: Callable[[int, int], None] | None) -> Simulation:
    cfg = su.cfg
    hw, limits, groups, cost, dense, mem = su.hw, su.limits, su.groups, su.cost, su.dense, su.memory
    failure = su.failure
    if failure is not None:  # the program does not compile: nothing runs
        empty = schedule(TaskGraph(), [])
        return Simulation(
            cfg=cfg,
            hw=hw,
            limits=limits,
            groups=groups,
            cost=cost,
            dense=dense,
            steps=[],
            graph=TaskGraph(),
            resources=su.resources,
            schedule=empty,
            memory=mem,
            failure=failure,
        )
    timings = {"generate": 0.0, "preprocess": 0.0}
    observed = InputStats(hw.num_chips)
    results = []
    checks: list[StepChecks | None] = []
    for step in range(cfg.steps):
        sr, step_checks = run_step_inputs(su, step, timings)
        checks.append(step_checks)
        results.append(sr)
        observed.add(sr)
        if progress:
            progress(step + 1, cfg.steps)
    t0 = time.perf_counter()
    graph, res = build_graph(cfg, hw, groups, results, cost, dense)
    t1 = time.perf_counter()
    sched = schedule(graph, res.units())
    timings["graph"] = t1 - t0
    timings["schedule"] = time.perf_counter() - t1
    sim = Simulation(
        cfg=cfg,
        hw=hw,
        limits=limits,
        groups=groups,
        cost=cost,
        dense=dense,
        steps=results,
        graph=graph,
        resources=res,
        schedule=sched,
        observed=observed,
        timings_s=timings,
        memory=mem,
        checks=checks,
    )
    sim.timeline = memory_timeline(sim)
    failures = [f for f in (find_oom(mem, sim.timeline), nan_failure(sim)) if f is not None]
    sim.failure = min(failures, key=lambda f: f.ts_ps) if failures else None
    return sim

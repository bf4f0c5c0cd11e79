"""The one list of analyzers (read by the CLI, the UI and the tests) and the run report."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, severity_rank
from analyzers.rules import (
    allocations,
    async_overlap,
    breakdown,
    debug_checks,
    failures,
    id_dropping,
    idle_gaps,
    memory,
    minibatching,
    op_profile,
    overlap,
    skew,
    stacking,
    utilization,
)
from profiler.store import Store

# Each module has NAME, QUESTION and analyze(ctx: RunContext) -> Analysis.
ANALYZERS: tuple[ModuleType, ...] = (
    failures,
    breakdown,
    idle_gaps,
    utilization,
    async_overlap,
    overlap,
    minibatching,
    id_dropping,
    skew,
    memory,
    allocations,
    debug_checks,
    stacking,
    op_profile,
)

MEMORY_PEAK_FIGURES = ("memory.hbm_peak_bytes", "allocations.device_peak_bytes")  # RunReport.memory_peak's order


@dataclass
class RunReport:
    """Every analyzer's result for one run, with the findings sorted by severity."""

    run: dict[str, Any]
    analyses: dict[str, Analysis]
    findings: list[Finding] = field(default_factory=list)

    def memory_peak(self) -> tuple[str, int] | None:
        """The run's device memory peak, one figure for every surface (the Overview's card, `scprof
        compare`, the Compare page): (its figure path, bytes): the memory counters' peak where the run
        records counters (memory.hbm_peak_bytes: the highest chip's heap and stack), else its device
        allocators' peak (allocations.device_peak_bytes: a GPU capture's memory profile); None without
        either."""
        for path in MEMORY_PEAK_FIGURES:
            name, key = path.split(".")
            a = self.analyses.get(name)
            value = (a.figures or {}).get(key) if a is not None else None
            if value is not None:
                return path, int(value)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": {k: self.run[k] for k in ("run_id", "uuid", "name", "source", "status")},
            "figures": {name: a.figures for name, a in self.analyses.items() if a.figures},
            "findings": [f.to_dict() for f in self.findings],
            "notes": {name: a.notes for name, a in self.analyses.items() if a.notes},
        }


def analyze_run(store: Store, run_id: int, only: tuple[str, ...] | None = None) -> RunReport:
    """Run the analyzers (all, or those named in `only`) on one run."""
    ctx = RunContext(store, run_id)
    chosen = [m for m in ANALYZERS if only is None or m.NAME in only]
    # The wall-time split runs in a background thread (breakdown.start_timeline_splits): start it
    # first and run the analyzers that wait for it last, so the others' work overlaps it.
    waits = {breakdown.NAME, overlap.NAME}
    if waits & {m.NAME for m in chosen}:
        breakdown.start_timeline_splits(ctx)
    done = {m.NAME: m.analyze(ctx) for m in sorted(chosen, key=lambda m: m.NAME in waits)}
    analyses = {m.NAME: done[m.NAME] for m in chosen}  # in ANALYZERS order
    return RunReport(ctx.run, analyses, ranked_findings(analyses))


def ranked_findings(analyses: dict[str, Analysis]) -> list[Finding]:
    """Every analysis's findings, by severity, then rule (a stable sort: in the analyses' order)."""
    return sorted((f for a in analyses.values() for f in a.findings), key=lambda f: (severity_rank(f), f.rule))

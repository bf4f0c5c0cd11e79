"""The data flow as a rule: sim_backend -> profiler -> analyzers -> exporters / ui -> the CLI.

A lower layer never imports a higher one (at module level or inside a function), and no
package imports another in a cycle. An AST scan: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.tracekit import REPO

# What each package may import from the others (the emulator writes through the profiler's
# recorder; the analyzers read the store; exporters and the UI read both; the CLI reads all).
ALLOWED: dict[str, set[str]] = {
    "profiler": set(),
    "sim_backend": {"profiler"},
    "analyzers": {"profiler"},
    "exporters": {"profiler", "analyzers"},
    "ui": {"profiler", "analyzers", "exporters", "whatif"},
    # the what-if engine: an orchestrator above the emulator and the analyzers (neither imports it)
    "whatif": {"profiler", "sim_backend", "analyzers"},
    "scprof": {"profiler", "sim_backend", "analyzers", "exporters", "ui", "whatif"},
}


def _imports(path: Path) -> list[tuple[str, int]]:
    """Top-level packages `path` imports (absolute imports; relative ones stay inside), with lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module.split(".")[0], node.lineno))
    return out


def _package_imports() -> dict[str, list[str]]:
    """package -> ["file:line imports other", ...] for every import of another project package."""
    found: dict[str, list[str]] = {p: [] for p in ALLOWED}
    for pkg in ALLOWED:
        for f in sorted((REPO / pkg).rglob("*.py")):
            if f.name.endswith("_pb2.py"):
                continue
            for target, line in _imports(f):
                if target in ALLOWED and target != pkg:
                    found[pkg].append(f"{f.relative_to(REPO)}:{line} imports {target}")
    return found


def test_every_package_is_known():
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests", "benchmarks"}
    assert packages == set(ALLOWED), "a new package: place it in the layers (ALLOWED) first"


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_no_import_against_the_flow(pkg):
    against = [x for x in _package_imports()[pkg] if x.rsplit(" ", 1)[1] not in ALLOWED[pkg]]
    assert not against, f"{pkg} imports against the data flow: {against}"


def test_no_package_cycle():
    graph = {p: {x.rsplit(" ", 1)[1] for x in imps} for p, imps in _package_imports().items()}

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and reaches(n, b, seen | {n})) for n in graph[a])

    cycles = [p for p in graph if reaches(p, p, {p})]
    assert not cycles, f"packages in an import cycle: {cycles}"

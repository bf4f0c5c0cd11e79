"""Stores with short emulated runs of the bundled configs, shared by the what-if tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.recording.record import record_run

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
STEPS = 8  # 6 counted steps: enough for an interval, quick to simulate


def record_into(store: Store, config: str, out: Path, overrides: tuple[str, ...] = (), name: str | None = None) -> int:
    result = record_run(str(CONFIGS / config), list(overrides), name, STEPS, str(out))
    return ingest_trace(store, result.trace_path).run_id


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """A store with the bundled baseline and tuned runs (8 steps each)."""
    root = tmp_path_factory.mktemp("whatif")
    db = root / "store.duckdb"
    with Store.open(str(db)) as store:
        base = record_into(store, "baseline.toml", root / "baseline")
        tuned = record_into(store, "tuned.toml", root / "tuned")
    return db, base, tuned

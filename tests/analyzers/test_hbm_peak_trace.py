"""An emulated run's device memory: the memory analyzer's HBM peak (the store's hbm_peaks view) per
chip equals the highest heap + stack replayed from the .sctrace file's own counters in plain
Python (profiler/reader.py, not the store), and the run has no allocator figures."""

from __future__ import annotations

import pytest

from analyzers.context import RunContext
from analyzers.rules import allocations, memory
from profiler.reader import read_trace
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.recording.record import record_run
from tests.tracekit import REPO


def trace_hbm_peaks(path: str) -> dict[int, float]:
    """Per chip, the most 'HBM heap' + 'HBM stack' in bytes, each holding its value from its
    sample on (0 before its first), at every sample time of either (the higher of two samples of
    one counter at one instant)."""
    t = read_trace(path)
    tracks = {tr.id: tr for tr in t.tracks}
    samples: dict[int, dict[int, dict[str, float]]] = {}  # chip -> ts -> counter -> value
    c = t.data["counters"]
    for track, ts, value in zip(c["track"].tolist(), c["ts_ps"].tolist(), c["value"].tolist(), strict=True):
        tr = tracks[track]
        if tr.unit == "bytes" and tr.chip >= 0 and tr.line in ("HBM heap", "HBM stack"):
            at = samples.setdefault(tr.chip, {}).setdefault(ts, {})
            at[tr.line] = max(at.get(tr.line, value), value)
    peaks = {}
    for chip, by_ts in samples.items():
        held = {"HBM heap": 0.0, "HBM stack": 0.0}
        best = 0.0
        for ts in sorted(by_ts):
            held.update(by_ts[ts])
            best = max(best, held["HBM heap"] + held["HBM stack"])
        peaks[chip] = best
    return peaks


def test_an_emulated_runs_hbm_peak_equals_its_trace_counters(tmp_path):
    result = record_run(
        str(REPO / "configs" / "hbm_stack_pressure.toml"), ["steps=4"], "hbm", None, str(tmp_path / "r")
    )
    want = trace_hbm_peaks(result.trace_path)
    assert len(want) >= 2 and all(v > 0 for v in want.values())
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as s:
        run_id = ingest_trace(s, result.trace_path, name="hbm").run_id
    with Store.open(db, read_only=True) as s:
        got = {r["chip"]: r["hbm_peak_bytes"] for r in s.rows("SELECT * FROM hbm_peaks WHERE run_id = ?", [run_id])}
        assert got == pytest.approx(want)
        ctx = RunContext(s, run_id)
        assert memory.analyze(ctx).figures["hbm_peak_bytes"] == pytest.approx(max(want.values()))
        assert allocations.analyze(ctx).figures == {}

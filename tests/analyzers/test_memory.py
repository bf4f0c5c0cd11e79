"""Memory analyzer on hand-built runs: which part drives the HBM peak, and which lever it names.

Capacity 1000 bytes; labelled literals give each counter's samples (chip, counter, ts, bytes).
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.rules import memory
from tests.analyzers.runkit import RunSpec, store_with

CAP = 1000


def heap_run(
    tables: float, slots: float, prefetched: list[tuple[int, float]], stack: list[tuple[int, float]]
) -> RunSpec:
    """Heap = tables + slots (static, from t=0) + prefetched inputs (over time); stack over time."""
    times = sorted({0, *(t for t, _ in prefetched), *(t for t, _ in stack)})

    def at(series: list[tuple[int, float]], t: int) -> float:
        return max(((ts, v) for ts, v in series if ts <= t), default=(0, 0.0))[1]

    counters = [(0, "HBM heap: embedding tables", 0, tables), (0, "HBM heap: embedding optimizer state", 0, slots)]
    counters += [(0, "HBM heap: prefetched inputs", t, v) for t, v in [(0, 0.0), *prefetched]]
    counters += [(0, "HBM heap", t, tables + slots + at(prefetched, t)) for t in times]
    counters += [(0, "HBM stack", t, v) for t, v in [(0, 0.0), *stack]]
    return RunSpec(counters=counters, hardware={"num_chips": 1, "hbm_bytes": CAP})


def finding(tmp_path, spec: RunSpec):
    with store_with(tmp_path, spec) as store:
        result = memory.analyze(RunContext(store, 1))
        return result.findings, result.tables


def test_growing_prefetched_inputs_name_the_prefetch_lever(tmp_path):
    # static heap 600 (60%); inputs grow to 300 at t=30, the stack (50) comes later: peak 900 at t=30
    spec = heap_run(400, 200, prefetched=[(10, 100), (20, 200), (30, 300), (40, 100)], stack=[(45, 50), (50, 0)])
    (f,), tables = finding(tmp_path, spec)
    assert f.rule == "hbm_heap_pressure" and f.value == 0.9 and f.severity == "warning"
    assert f.evidence["driver"] == "prefetched inputs" and f.evidence["driver_growth_bytes"] == 300
    assert f.evidence["peak_ts_ps"] == 30 and "maximum_parallel_iterations" in f.recommendation
    assert "prefetched inputs growing" in f.title
    rows = {r["counter"]: r for r in tables["memory_contributors"].to_pylist()}
    assert rows["HBM heap: prefetched inputs"]["bytes_at_peak"] == 300
    assert rows["HBM heap: embedding tables"]["growth_bytes"] == 0


def test_static_heap_over_the_threshold_names_its_largest_contributor(tmp_path):
    # tables 300 + Adam-like slots 600 before any step: 90% with nothing grown
    (f,), _ = finding(tmp_path, heap_run(300, 600, prefetched=[(10, 20)], stack=[(10, 10)]))
    assert f.rule == "hbm_heap_pressure" and f.evidence["driver"] == "embedding optimizer state"
    assert "fewer slots" in f.recommendation and "before any step" in f.title


def test_growing_stack_names_serialization(tmp_path):
    # static heap 500, inputs +50, stack +400 at t=20: the stack is the top growing part
    (f,), _ = finding(tmp_path, heap_run(300, 200, prefetched=[(10, 50)], stack=[(20, 400), (30, 0)]))
    assert f.rule == "hbm_stack_pressure" and f.value == 0.95 and f.severity == "critical"
    assert f.evidence["driver"] == "HBM stack" and f.evidence["top_contributors"][0] == "HBM stack"
    assert "xla_sc_num_serialized_tables_to_optimize_hbm" in f.recommendation


def test_below_the_threshold_no_finding(tmp_path):
    assert not finding(tmp_path, heap_run(300, 200, prefetched=[(10, 50)], stack=[(20, 290)]))[0]  # 84%

"""The memory pathology configs: symptom in the trace, one-flag fix; serialization acceptance.

Every figure is read back from the recorded trace (counters `HBM heap`, `HBM heap:
prefetched inputs`, `HBM stack`, `Prefetched steps`, the SparseCore module events, the
header's status tags and the failure event), not from the emulator's internals.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.errors import CompileError
from sim_backend.recording.record import record_run
from tests.sim_backend.conftest import CONFIG_DIR
from tests.sim_backend.test_sim_pathologies import documented_fix

THRESHOLD = 0.85  # the memory analyzer's pressure threshold (share of HBM capacity)
SERIALIZED = "flags.xla_sc_num_serialized_tables_to_optimize_hbm"


def config(name: str) -> str:
    return os.path.join(CONFIG_DIR, f"{name}.toml")


def series(trace, line: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per chip: (times, values) of the counter `line` on the chip's TensorCore plane."""
    ct = trace.data["counters"]
    out = {}
    for t in trace.tracks:
        if t.line == line and t.plane.startswith("/device:TPU:") and "SparseCore" not in t.plane:
            m = ct["track"] == t.id
            o = np.argsort(ct["ts_ps"][m], kind="stable")
            out[t.chip] = (ct["ts_ps"][m][o], ct["value"][m][o])
    return out


def held(s: tuple[np.ndarray, np.ndarray], times: np.ndarray) -> np.ndarray:
    i = np.searchsorted(s[0], times, side="right") - 1
    return np.where(i >= 0, s[1][np.maximum(i, 0)], 0.0)


def hbm_peak_share(trace) -> float:
    """Largest heap + stack (held counters sampled together) over HBM capacity, any chip."""
    heap, stack = series(trace, "HBM heap"), series(trace, "HBM stack")
    peaks = []
    for chip in heap:
        times = np.union1d(heap[chip][0], stack[chip][0])
        peaks.append((held(heap[chip], times) + held(stack[chip], times)).max())
    return max(peaks) / trace.header.hardware.hbm_bytes


def counter_max(trace, line: str) -> float:
    return max(v.max() for _, v in series(trace, line).values())


def sc_time_per_step(trace) -> float:
    """Mean SparseCore time per step and SparseCore: the spans of its module events."""
    ev = trace.data["events"]
    modules = {t.id for t in trace.tracks if t.line == "Sparse Core Modules"}
    m = np.isin(ev["track"], list(modules))
    n_steps = len(np.unique(ev["step"][m]))
    return float(ev["dur_ps"][m].sum()) / n_steps / len(modules)


def record(name: str, overrides: list[str], tmp_path, tag: str, steps: int | None = None):
    return read_trace(record_run(config(name), overrides, tag, steps, str(tmp_path / tag)).trace_path)


def test_hbm_stack_pressure_and_serialization_fix(tmp_path):
    sick = record("hbm_stack_pressure", [], tmp_path, "sick", steps=6)
    fixed = record("hbm_stack_pressure", documented_fix("hbm_stack_pressure"), tmp_path, "fixed", steps=6)
    assert documented_fix("hbm_stack_pressure")[0].startswith(SERIALIZED + "=")
    assert hbm_peak_share(sick) > THRESHOLD > hbm_peak_share(fixed)
    cap = sick.header.hardware.hbm_bytes
    # the stack is what grows past the threshold: the heap alone stays below it
    assert counter_max(sick, "HBM heap") / cap < THRESHOLD - 0.2
    # one group's stack live at a time instead of three groups' (forward and backward of
    # neighbouring steps overlap little: the pipelined order runs SC/F_i+1 before SC/B_i)
    assert counter_max(fixed, "HBM stack") < 0.6 * counter_max(sick, "HBM stack")
    assert counter_max(fixed, "HBM heap") == counter_max(sick, "HBM heap")


def test_deep_prefetch_heap_pressure_and_prefetch_fix(tmp_path):
    sick = record("deep_prefetch", [], tmp_path, "sick", steps=10)
    fixed = record("deep_prefetch", documented_fix("deep_prefetch"), tmp_path, "fixed", steps=10)
    assert documented_fix("deep_prefetch")[0].startswith("flags.maximum_parallel_iterations=")
    assert hbm_peak_share(sick) > THRESHOLD > hbm_peak_share(fixed)
    cap = sick.header.hardware.hbm_bytes
    prefetched = "HBM heap: prefetched inputs"
    # many steps in flight, each holding its inputs: the growing part of the heap
    assert counter_max(sick, "Prefetched steps") > 2 >= counter_max(fixed, "Prefetched steps")
    assert counter_max(sick, prefetched) / cap > 0.1 > counter_max(fixed, prefetched) / cap
    # static heap (first sample) is below the threshold: prefetch is what pushes it over
    assert max(v[0] for _, v in series(sick, "HBM heap").values()) / cap < THRESHOLD


def failure_events(trace) -> list[tuple[str, str]]:
    ev, s = trace.data["events"], trace.strings
    lines = {t.id: t.line for t in trace.tracks}
    return [
        (s[n], lines[t]) for n, c, t in zip(ev["name"], ev["category"], ev["track"], strict=True) if s[c] == "failure"
    ]


@pytest.mark.parametrize(
    "name, kind, text",
    [
        ("spmem_overflow", "spmem_overflow", "do not fit in TileSpmem"),
        ("gather_too_large", "gather_operand_too_large", "Gather operand too large"),
    ],
)
def test_compile_failure_is_recorded_and_one_flag_fixes_it(name, kind, text, tmp_path):
    with pytest.raises(CompileError) as err:
        record_run(config(name), [], "sick", 4, str(tmp_path / "sick"))
    assert text in err.value.message
    sick = read_trace(err.value.trace_path)
    assert sick.header.tags["status"] == "failed" and sick.header.tags["failure"] == kind
    assert failure_events(sick) == [(kind, "Failures")]
    fixed = record_run(config(name), documented_fix(name), "fixed", 4, str(tmp_path / "fixed"))
    tr = read_trace(fixed.trace_path)
    assert tr.header.tags.get("status", "ok") != "failed" and not failure_events(tr)
    assert fixed.steps == 4 and fixed.minibatches_per_step == 1.0


def test_serialization_lowers_peak_stack_and_raises_sparsecore_time(tmp_path):
    """Serialization: peak stack goes down and SC time goes up as the flag grows (k = 0..3).

    The config has three table groups, so k = 2 already runs each alone (the third waits
    for the second's barrier): k = 3 changes nothing, k = 0, 1, 2 change both strictly.
    """
    traces = [record("hbm_stack_pressure", [f"{SERIALIZED}={k}"], tmp_path, f"k{k}", steps=4) for k in range(4)]
    peak_stack = [counter_max(t, "HBM stack") for t in traces]
    sc_time = [sc_time_per_step(t) for t in traces]
    assert all(a >= b for a, b in zip(peak_stack, peak_stack[1:], strict=False))  # never rises
    assert peak_stack[0] > peak_stack[1] > peak_stack[2]  # strict while groups still share a region
    assert all(a <= b for a, b in zip(sc_time, sc_time[1:], strict=False))  # never falls
    assert sc_time[0] < sc_time[1] < sc_time[2]

"""The breakdown analyzer's figures against hand computations: HBM bandwidth (saturation is a
bottleneck the profile must reveal) and the slow steps that carry a mean."""

from __future__ import annotations

import pytest

from analyzers.context import RunContext
from analyzers.rules import breakdown
from tests.analyzers.runkit import SC_OPS, TC_OPS, Ev, RunSpec, store_with


def test_hbm_bandwidth_is_compute_ops_bytes_per_step_time(tmp_path):
    """Three 1000 ps steps on one v5p chip. Per step: a SparseCore lookup moving 600 B, a
    TensorCore pass moving 1400 B, an all-reduce of 10,000 B (ICI, not HBM). HBM traffic
    2000 B per step; 2000 B / 1000 ps = 2e12 B/s; share of v5p's 2765e9 B/s = 0.7233."""
    events = []
    for s in range(3):
        t0 = 1000 * s
        events += [
            Ev(SC_OPS, 0, 0, "SparseDenseMatmulOp", t0, 200, s, "sc_forward", bytes=600),
            Ev(TC_OPS, 0, 0, "dense_forward", t0 + 200, 500, s, "tc_forward", bytes=1400),
            Ev(TC_OPS, 0, 0, "all-reduce.dense_gradients", t0 + 700, 300, s, "tc_collective", bytes=10_000),
        ]
    spec = RunSpec(
        events=events,
        steps=[(0, s, 1000 * s, 1000) for s in range(3)],
        hardware={"generation": "v5p", "num_chips": 1, "hbm_bandwidth_bytes_per_s": 2765e9},
    )
    with store_with(tmp_path, spec) as store:
        figures = breakdown.analyze(RunContext(store, 1)).figures
    assert figures["hbm_bytes_per_step"] == 2000
    assert figures["hbm_bandwidth_bytes_per_s"] == pytest.approx(2e12)
    assert figures["hbm_bandwidth_share"] == pytest.approx(2e12 / 2765e9)


def test_hbm_bandwidth_share_is_none_without_the_chips_bandwidth(tmp_path):
    spec = RunSpec(
        events=[Ev(SC_OPS, 0, 0, "SparseDenseMatmulOp", 0, 100, 0, "sc_forward", bytes=64)],
        steps=[(0, 0, 0, 400)],
        hardware={"generation": "custom", "num_chips": 1},
    )
    with store_with(tmp_path, spec) as store:
        figures = breakdown.analyze(RunContext(store, 1)).figures
    assert figures["hbm_bandwidth_bytes_per_s"] == pytest.approx(64 / 400e-12)
    assert figures["hbm_bandwidth_share"] is None


@pytest.mark.parametrize("slow_ps", [500, 200])
def test_slow_steps_are_counted_steps_over_twice_the_median(tmp_path, slow_ps):
    """Seven steps of 100, 110, 90, 100, 500, 120, 100 ps (one TensorCore op each filling the step).
    Counted: steps 1..5 (a run of 5 or more leaves out its first and last): 110, 90, 100, 500, 120.
    Median 110; over 220: the 500 ps step alone; its share of the counted time 500 / 920. With 200
    ps instead, no step is slow: 0 steps, a share of 0."""
    durations = [100, 110, 90, 100, slow_ps, 120, 100]
    starts = [sum(durations[:i]) for i in range(len(durations))]
    spec = RunSpec(
        events=[
            Ev(TC_OPS, 0, 0, "dense_forward", t, d, s, "tc_forward")
            for s, (t, d) in enumerate(zip(starts, durations, strict=True))
        ],
        steps=[(0, s, t, d) for s, (t, d) in enumerate(zip(starts, durations, strict=True))],
        hardware={"generation": "v5p", "num_chips": 1},
    )
    with store_with(tmp_path, spec) as store:
        figures = breakdown.analyze(RunContext(store, 1)).figures
    counted = durations[1:-1]
    median = sorted(counted)[len(counted) // 2]
    slow = [d for d in counted if d > 2 * median]
    assert figures["steps"] == 5 and figures["slow_steps"] == len(slow) == (1 if slow_ps == 500 else 0)
    assert figures["slow_steps_time_share"] == pytest.approx(sum(slow) / sum(counted))

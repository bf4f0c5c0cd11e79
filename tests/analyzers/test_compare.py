"""Step-time verdicts paired by step when two emulated runs saw the same input data."""

from __future__ import annotations

import math

import numpy as np

from analyzers.compare import bootstrap_change, label, same_input_stream

# an alternating long/short step pattern (prefetch rhythm) whose pairs differ with the input
# data, the candidate 2% faster on every step
BASE = np.array([620.0, 290.0, 700.0, 310.0, 540.0, 280.0, 660.0, 300.0, 580.0, 295.0])
CAND = BASE * 0.98


def test_pairing_cancels_what_the_steps_share() -> None:
    unpaired = bootstrap_change(BASE, CAND)
    paired = bootstrap_change(BASE, CAND, paired=True)
    assert unpaired.verdict == "inconclusive" and unpaired.ci_low < -0.05 and unpaired.ci_high > 0.05
    # every resample of paired steps is exactly 2% faster: the interval is the point
    assert paired.verdict == "improved" and paired.paired
    assert np.isclose(paired.ci_low, -0.02) and np.isclose(paired.ci_high, -0.02)
    assert np.isclose(paired.change, CAND.mean() / BASE.mean() - 1)


def test_a_shifted_rhythm_is_still_a_clear_gain() -> None:
    # the candidate 5% faster per pair of steps, its long/short rhythm one step out of phase
    # (a change in the pipelined schedule): step by step the differences are +-35%, pair by pair -5%
    base = np.array([620.0, 290.0] * 5)
    cand = np.roll(base, 1) * 0.95
    got = bootstrap_change(base, cand, paired=True)
    assert got.verdict == "improved"
    assert np.isclose(got.ci_low, -0.05) and np.isclose(got.ci_high, -0.05)


def test_paired_interval_matches_a_plain_python_bootstrap_t() -> None:
    rng = np.random.default_rng(20261122)  # compare's SEED: same draws as bootstrap_change
    base = np.array([5.0, 7.0, 6.0, 9.0, 4.0, 8.0, 3.0])
    cand = base + np.array([-1.0, 0.0, -2.0, 1.0, -1.0, -1.0, 2.0])
    n = len(base)

    def theta_se(rows: list[int]) -> tuple[float, float]:
        b = [base[i] for i in rows]
        c = [cand[i] for i in rows]
        mb, mc = sum(b) / n, sum(c) / n
        w = [ci / mc - bi / mb for bi, ci in zip(b, c, strict=True)]
        blocks = [sum(w[k : k + 2]) for k in range(0, n, 2)]  # pairs, the last one alone
        return math.log(mc / mb), math.sqrt(sum(x * x for x in blocks)) / n

    theta, se = theta_se(list(range(n)))
    # 4 circular blocks of 2 neighbouring steps (wrapping past the last), cut to 7 steps
    starts = rng.integers(0, n, (4000, 4)).tolist()
    ts = []
    for row in starts:
        th, s = theta_se([(st + k) % n for st in row for k in (0, 1)][:n])
        ts.append(abs(th - theta) / s if s else (0.0 if th == theta else math.inf))
    half = float(np.quantile(ts, 0.95))
    got = bootstrap_change(base, cand, paired=True)
    assert np.isclose(got.ci_low, math.exp(theta - half * se) - 1)
    assert np.isclose(got.ci_high, math.exp(theta + half * se) - 1)
    assert got.verdict == label(got.ci_low, got.ci_high)


def test_same_input_stream_follows_what_the_batches_are_drawn_from() -> None:
    cfg = {
        "seed": 1,
        "global_batch": 64,
        "features": [{"name": "f", "table": "t", "multi_hot": 3}],
        "tables": [{"name": "t", "vocab": 100, "width": 8}],
        "flags": {"maximum_parallel_iterations": 1},
    }
    assert same_input_stream(cfg, {**cfg, "flags": {"maximum_parallel_iterations": 4}, "host": {"num_threads": 9}})
    assert same_input_stream(cfg, {**cfg, "tables": [{"name": "t", "vocab": 100, "width": 64}]})  # width: not data
    assert not same_input_stream(cfg, {**cfg, "seed": 2})
    assert not same_input_stream(cfg, {**cfg, "global_batch": 128})
    assert not same_input_stream(cfg, {**cfg, "tables": [{"name": "t", "vocab": 50, "width": 8}]})
    assert not same_input_stream({}, {})  # real captures: no input stream to pair

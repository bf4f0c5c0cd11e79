"""Step-time verdicts paired by step when two emulated runs saw the same input data."""

from __future__ import annotations

import numpy as np

from analyzers.compare import bootstrap_change, same_input_stream

# an alternating long/short step pattern (prefetch rhythm), the candidate 1% faster on every step
BASE = np.array([620.0, 290.0] * 5)
CAND = BASE * 0.99


def test_pairing_cancels_what_the_steps_share() -> None:
    unpaired = bootstrap_change(BASE, CAND)
    paired = bootstrap_change(BASE, CAND, paired=True)
    assert unpaired.verdict == "no significant change" and unpaired.ci_low < -0.2 and unpaired.ci_high > 0.2
    # every resample of paired steps is exactly 1% faster: the interval is the point
    assert paired.verdict == "improved" and paired.paired
    assert np.isclose(paired.ci_low, -0.01) and np.isclose(paired.ci_high, -0.01)
    assert np.isclose(paired.change, CAND.mean() / BASE.mean() - 1)


def test_paired_interval_matches_a_plain_python_bootstrap() -> None:
    rng = np.random.default_rng(20261122)  # compare's SEED: same draws as bootstrap_change
    base = np.array([5.0, 7.0, 6.0, 9.0, 4.0, 8.0])
    cand = base + np.array([-1.0, 0.0, -2.0, 1.0, -1.0, -1.0])
    picks = rng.integers(0, len(base), (4000, len(base)))
    rel = sorted(float(sum(cand[i] for i in row) / sum(base[i] for i in row) - 1) for row in picks.tolist())
    got = bootstrap_change(base, cand, paired=True)
    assert np.isclose(got.ci_low, np.quantile(rel, 0.025)) and np.isclose(got.ci_high, np.quantile(rel, 0.975))


def test_same_input_stream_follows_what_the_batches_are_drawn_from() -> None:
    cfg = {"seed": 1, "global_batch": 64, "features": [{"name": "f", "table": "t", "multi_hot": 3}],
           "tables": [{"name": "t", "vocab": 100, "width": 8}], "flags": {"maximum_parallel_iterations": 1}}  # fmt: skip
    assert same_input_stream(cfg, {**cfg, "flags": {"maximum_parallel_iterations": 4}, "host": {"num_threads": 9}})
    assert same_input_stream(cfg, {**cfg, "tables": [{"name": "t", "vocab": 100, "width": 64}]})  # width: not data
    assert not same_input_stream(cfg, {**cfg, "seed": 2})
    assert not same_input_stream(cfg, {**cfg, "global_batch": 128})
    assert not same_input_stream(cfg, {**cfg, "tables": [{"name": "t", "vocab": 50, "width": 8}]})
    assert not same_input_stream({}, {})  # real captures: no input stream to pair

"""Coverage of the step-time interval (analyzers/change_stats.log_ratio_interval): over seeded
replications of two independent runs whose true ratio of mean step times is known, the 95%
interval must hold the true log ratio in at least 93% of them, in every cell of
family x counted steps x true ratio where compare gives an interval (n >= MIN_STEPS).

The domain this checks: positive step times that are lognormal (sigma 0.25, 0.5, 1), shifted
Pareto (tail index 2.5 and 3: finite variance), 5% rare steps five times as long, and a period-2
long/short rhythm with AR(1) lognormal noise of lag-1 correlation 0.2 (a pipelined schedule),
5 to 30 counted steps a run, unpaired. Outside it: blocks of two steps carry the correlation
within a period only, so noise correlated across periods is under-covered (lag-1 correlation
0.3: about 0.93; 0.5: about 0.85 at 30 steps). Each replication draws base and candidate from the same family, the candidate scaled
by the true ratio, so log(ratio) is the true log ratio of the population means. Every replication
shares the bootstrap's resample indices (as compare does for any pair of runs), which leaves the
replications independent. B = 999 resamples (compare uses 4,000).
"""

from __future__ import annotations

import numpy as np
import pytest

from analyzers.change_stats import MIN_STEPS, log_ratio_interval

REPLICATIONS = 1000
SAMPLES = 999
STEPS = (5, 8, 14, 30)
RATIOS = (1.0, 0.95)
MIN_COVERAGE = 0.93


def _lognormal(sigma: float):
    return lambda rng, r, n: rng.lognormal(0.0, sigma, (r, n))


def _pareto(alpha: float):
    return lambda rng, r, n: 1.0 + rng.pareto(alpha, (r, n))  # shifted: 1 + Lomax, mean 1 + 1/(alpha-1)


def _outliers(rng: np.random.Generator, r: int, n: int) -> np.ndarray:
    return rng.lognormal(0.0, 0.1, (r, n)) * np.where(rng.random((r, n)) < 0.05, 5.0, 1.0)


def _long_short_ar1(rng: np.random.Generator, r: int, n: int) -> np.ndarray:
    """Steps alternating 1.5 and 0.5 (a random phase per run) times exp(AR(1) noise), phi 0.2,
    marginal sd 0.3 (stationary from the first step)."""
    phi, sd = 0.2, 0.3
    e = np.empty((r, n))
    e[:, 0] = rng.normal(0.0, sd, r)
    innov = rng.normal(0.0, sd * np.sqrt(1 - phi * phi), (r, n))
    for i in range(1, n):
        e[:, i] = phi * e[:, i - 1] + innov[:, i]
    phase = rng.integers(0, 2, (r, 1))
    level = np.where((np.arange(n) + phase) % 2 == 0, 1.5, 0.5)
    return level * np.exp(e)


FAMILIES = {
    "lognormal 0.25": _lognormal(0.25),
    "lognormal 0.5": _lognormal(0.5),
    "lognormal 1": _lognormal(1.0),
    "pareto 2.5": _pareto(2.5),
    "pareto 3": _pareto(3.0),
    "5% outliers x5": _outliers,
    "long/short AR(1)": _long_short_ar1,
}


def coverage_table(replications: int = REPLICATIONS, samples: int = SAMPLES) -> dict[tuple[str, int, float], float]:
    """Coverage of the true log ratio per (family, steps, ratio), seeded."""
    out = {}
    for fi, (name, draw) in enumerate(FAMILIES.items()):
        for n in STEPS:
            for ri, ratio in enumerate(RATIOS):
                rng = np.random.default_rng([fi, n, ri])
                base = draw(rng, replications, n)
                cand = ratio * draw(rng, replications, n)
                _, low, high = log_ratio_interval(base, cand, samples=samples, seed=n)
                truth = np.log(ratio)
                out[(name, n, ratio)] = float(np.mean((low <= truth) & (truth <= high)))
    return out


def test_coverage_at_least_93_percent_where_compare_gives_an_interval() -> None:
    assert MIN_STEPS <= 8  # the interval does not abstain from 8 counted steps on
    table = coverage_table()
    print("\ncoverage of the 95% interval (min over ratios 1.0 and 0.95):")
    for name in FAMILIES:
        print(f"  {name:18s}", "  ".join(f"n={n}: {min(table[(name, n, r)] for r in RATIOS):.3f}" for n in STEPS))
    low = {cell: c for cell, c in table.items() if cell[1] >= MIN_STEPS and c < MIN_COVERAGE}
    assert not low, f"coverage below {MIN_COVERAGE}: {low}"


@pytest.mark.parametrize("n", [MIN_STEPS, 30])
def test_interval_is_not_degenerate(n: int) -> None:
    """Guard against a trivially covering interval: on lognormal 0.5 steps, its median width is
    within a factor 3 of the normal-theory width 2 * 1.96 * sqrt(2 * var / n) of the log ratio."""
    rng = np.random.default_rng(7)
    base, cand = rng.lognormal(0, 0.5, (400, n)), rng.lognormal(0, 0.5, (400, n))
    _, low, high = log_ratio_interval(base, cand, samples=SAMPLES)
    cv2 = np.exp(0.5**2) - 1  # squared coefficient of variation of a lognormal
    ref = 2 * 1.96 * np.sqrt(2 * cv2 / n)
    assert ref / 3 < np.median(high - low) < 3 * ref

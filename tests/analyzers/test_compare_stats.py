"""Properties of the comparison statistics (analyzers/change_stats.py): intervals bounded in
(-100%, +inf) around the change, one label function, invariance to the unit, abstention below
MIN_STEPS, and the t quantile against scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.change_stats import (
    MIN_EFFECT,
    MIN_STEPS,
    label,
    read_verdict,
    student_t_ppf,
    welch_log_ratio,
)
from analyzers.compare import bootstrap_change, verdict_text

STEP_LABELS = {"improved", "regressed", "no change", "inconclusive", "not enough steps"}


@st.composite
def steps(draw, min_n: int = 1, max_n: int = 60) -> np.ndarray:
    """Positive step times, 1e3..1e12 ps: a base level times log-uniform noise, some heavy tails."""
    n = draw(st.integers(min_n, max_n))
    level = draw(st.floats(3.0, 11.0))
    spread = draw(st.sampled_from([0.0, 0.01, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = 10 ** (level + spread * rng.standard_normal(n))
    if draw(st.booleans()):  # rare long steps
        x = np.where(rng.random(n) < 0.1, x * 50, x)
    return np.clip(x, 1e3, 1e12)


@settings(max_examples=60, deadline=None)
@given(steps(), steps(), st.booleans())
def test_interval_bounded_around_the_change_and_labelled_by_it(base: np.ndarray, cand: np.ndarray, pair: bool) -> None:
    paired = pair and len(base) == len(cand)
    got = bootstrap_change(base, cand, paired=paired)
    assert got.verdict in STEP_LABELS
    assert math.isclose(got.change, cand.mean() / base.mean() - 1, rel_tol=1e-12, abs_tol=1e-15)
    if min(len(base), len(cand)) < MIN_STEPS:
        assert got.verdict == "not enough steps" and got.ci_low is None and got.ci_high is None
        assert "needed each" in got.text()
        return
    assert math.isfinite(got.ci_low) and math.isfinite(got.ci_high)
    assert -1 < got.ci_low <= got.change <= got.ci_high < math.inf
    assert got.verdict == label(got.ci_low, got.ci_high)
    # the unit does not matter (up to rounding: logs of scaled means)
    for k in (1024.0, 3.7e-3):
        other = bootstrap_change(base * k, cand * k, paired=paired)
        assert math.isclose(other.ci_low, got.ci_low, rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(other.ci_high, got.ci_high, rel_tol=1e-9, abs_tol=1e-12)
        assert other.verdict == label(other.ci_low, other.ci_high) == got.verdict


@settings(max_examples=30, deadline=None)
@given(steps(min_n=MIN_STEPS))
def test_identical_runs_are_no_change(base: np.ndarray) -> None:
    for paired in (False, True):
        got = bootstrap_change(base, base.copy(), paired=paired)
        assert got.change == 0 and got.ci_low <= 0 <= got.ci_high
    assert bootstrap_change(base, base.copy(), paired=True).verdict == "no change"  # paired: the point


def test_constant_steps_give_the_point() -> None:
    got = bootstrap_change(np.full(8, 1e6), np.full(8, 0.9e6))
    assert got.ci_low == pytest.approx(-0.1) and got.ci_high == pytest.approx(-0.1) and got.verdict == "improved"


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-0.999, 5.0),
    st.floats(0.0, 5.0),
)
def test_label_follows_the_interval(low: float, width: float) -> None:
    high = low + width
    got = label(low, high)
    if low >= -MIN_EFFECT and high <= MIN_EFFECT:
        assert got == "no change"
    elif high < 0:
        assert got == "improved"
    elif low > 0:
        assert got == "regressed"
    else:
        assert got == "inconclusive"
    assert label(low, high, better="faster", worse="slower") in {"faster", "slower", "no change", "inconclusive"}
    assert label(low, high, base_steps=MIN_STEPS - 1, cand_steps=50) == "not enough steps"


def test_label_examples() -> None:
    assert label(-0.015, -0.001) == "improved"  # not "no change": the interval reaches -1.5%
    assert label(-0.009, 0.004) == "no change"
    assert label(-0.02, 0.004) == "inconclusive"
    assert label(None, None) == "inconclusive"
    assert read_verdict("no significant change") == "inconclusive" and read_verdict("improved") == "improved"
    assert verdict_text("no significant change", -0.001, None, None) == "inconclusive: \u22120.1%"


@st.composite
def op_sides(draw) -> tuple[float, float, int]:
    n = draw(st.integers(1, 60))
    mean = draw(st.floats(1e3, 1e12))
    cv = draw(st.floats(0.0, 5.0))
    return mean, (cv * mean) ** 2, n


@settings(max_examples=200, deadline=None)
@given(op_sides(), op_sides())
def test_op_interval_bounded_and_labelled(base: tuple[float, float, int], cand: tuple[float, float, int]) -> None:
    low, high, change = welch_log_ratio(base, cand)
    assert math.isclose(change, cand[0] / base[0] - 1, rel_tol=1e-12, abs_tol=1e-15)
    if min(base[2], cand[2]) < 2:
        assert low is None and high is None
        return
    assert -1 < low <= change <= high < math.inf
    words = label(low, high, base_steps=base[2], cand_steps=cand[2], better="faster", worse="slower")
    if min(base[2], cand[2]) < MIN_STEPS:
        assert words == "not enough steps"
    else:
        assert words == label(low, high, better="faster", worse="slower")
    k = 1024.0  # the unit does not matter
    scaled = welch_log_ratio((base[0] * k, base[1] * k * k, base[2]), (cand[0] * k, cand[1] * k * k, cand[2]))
    assert scaled == pytest.approx((low, high, change), rel=1e-9, abs=1e-12)


def test_op_interval_against_a_hand_computation() -> None:
    # 20 steps each, means 100 and 52, sds 30 and 20: the delta method on log(52/100)
    a, c = 30**2 / (20 * 100**2), 20**2 / (20 * 52**2)
    df = (a + c) ** 2 / (a * a / 19 + c * c / 19)
    half = student_t_ppf(0.975, df) * math.sqrt(a + c)
    low, high, change = welch_log_ratio((100.0, 900.0, 20), (52.0, 400.0, 20))
    assert change == pytest.approx(-0.48)
    assert low == pytest.approx(math.exp(math.log(0.52) - half) - 1)
    assert high == pytest.approx(math.exp(math.log(0.52) + half) - 1)
    assert low > -1 and label(low, high, better="faster", worse="slower") == "faster"


def test_few_steps_op_is_not_called_the_same() -> None:
    # a -48% op over 3 counted steps with a large spread: once "same" with an interval below -100%
    low, high, change = welch_log_ratio((100.0, 80.0**2, 3), (52.0, 60.0**2, 3))
    assert low > -1 and change == pytest.approx(-0.48)
    assert label(low, high, base_steps=3, cand_steps=3, better="faster", worse="slower") == "not enough steps"


def test_t_quantile_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 1.3, 1.7, 2, 2.5, 3, 3.7, 4, 5, 7.5, 10, 30, 100, 1e4):
        for q in (0.6, 0.9, 0.975, 0.995, 0.9999, 0.025):
            assert student_t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-8), (q, df)


def test_t_quantile_hand_values() -> None:
    # printed tables: t_0.975 with 1, 4, 10 and 30 df
    assert student_t_ppf(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert student_t_ppf(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    assert student_t_ppf(0.975, 10) == pytest.approx(2.2281, abs=1e-4)
    assert student_t_ppf(0.975, 30) == pytest.approx(2.0423, abs=1e-4)

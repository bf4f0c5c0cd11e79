"""The statistics behind a comparison's verdicts: intervals of a relative change and their label.

Step time (`log_ratio_interval`): a symmetric studentized (bootstrap-t) block bootstrap of
theta = log(mean_cand / mean_base). The standard error of theta comes from the steps' influence
values (u_i = b_i / mean_b - 1, v_j = c_j / mean_c - 1; paired: w_i = v_i - u_i), summed over
non-overlapping blocks of BLOCK_STEPS neighbouring steps, so the long/short rhythm of a
pipelined schedule (period 2) is carried in the block sums. Each resample joins circular blocks
(a block may wrap from the last step to the first), so no step is left out when n is odd. The
interval is theta +- q_0.95(|t*|) * se with t* = (theta* - theta) / se*, mapped back by
exp(.) - 1: a relative change always inside (-100%, +inf). A percentile bootstrap of the mean
undercovers with a few steps (its spread is about sqrt((n - 1) / n) too narrow); the studentized
log ratio corrects that, and the symmetric form (|t*|) keeps its coverage on heavy-tailed steps
(rare long steps), where the equal-tailed one fell to 88% at 30 steps
(tests/analyzers/test_compare_coverage.py measures it).

Per op (`welch_log_ratio`): the delta method on the log ratio of two means, with a Student t
quantile at the Welch-Satterthwaite degrees of freedom (`student_t_ppf`, no scipy at run time).

One label for every surface (`label`): "no change" when the whole interval lies within
+-MIN_EFFECT, the better word when it lies below 0, the worse word when above 0, else
"inconclusive"; "not enough steps" when a side has fewer than MIN_STEPS counted steps.
"""

from __future__ import annotations

import math

import numpy as np

BOOTSTRAP_SAMPLES = 4000
CONFIDENCE = 0.95
MIN_EFFECT = 0.01  # a change whose whole interval lies within +-1% is "no change"
MIN_STEPS = 5  # fewer counted steps on a side: no interval (the coverage test's domain)
SEED = 20261122  # fixed, so the same two runs always get the same interval
BLOCK_STEPS = 2  # steps resampled together: the pipelined schedule's period (i -> i+2)
CELLS = 1 << 22  # resampled steps held at once by log_ratio_interval (about 32 MiB a float array)
LOG_BOUND = 30.0  # |log ratio| bound of an interval end: exp(-30) - 1 is still above -100%
STEP_METHOD = (
    f"symmetric bootstrap-t of the log ratio of mean step times, {BOOTSTRAP_SAMPLES:,} circular block resamples"
)
OP_METHOD = "delta method on the log ratio of mean times per step, Welch t"

NOT_ENOUGH_STEPS = "not enough steps"
NO_CHANGE = "no change"
INCONCLUSIVE = "inconclusive"
# verdicts stored before these labels (whatif_trials.verdict) and what they read as now: an old
# "no significant change" merged "no change" with "inconclusive"; which one cannot be recovered
OLD_VERDICTS = {"no significant change": INCONCLUSIVE, "same": INCONCLUSIVE}


def label(
    low: float | None,
    high: float | None,
    *,
    base_steps: int | None = None,
    cand_steps: int | None = None,
    better: str = "improved",
    worse: str = "regressed",
) -> str:
    """THE verdict of an interval [low, high] of a relative change (negative is faster). The
    step counts, when given, must both reach MIN_STEPS; a missing interval is inconclusive."""
    if base_steps is not None and cand_steps is not None and min(base_steps, cand_steps) < MIN_STEPS:
        return NOT_ENOUGH_STEPS
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return INCONCLUSIVE
    if low >= -MIN_EFFECT and high <= MIN_EFFECT:
        return NO_CHANGE
    if high < 0:
        return better
    if low > 0:
        return worse
    return INCONCLUSIVE


def read_verdict(verdict: str | None) -> str | None:
    """A stored verdict in today's words: an old "no significant change" reads "inconclusive"."""
    return OLD_VERDICTS.get(verdict, verdict) if verdict is not None else None


def circular_block_starts(rng: np.random.Generator, n: int, samples: int) -> np.ndarray:
    """The first step of each block of `samples` circular block resamples of n steps, shape
    (samples, ceil(n / L)) for blocks of L = BLOCK_STEPS neighbouring steps (circular_block_picks)."""
    return rng.integers(0, n, (samples, -(-n // min(BLOCK_STEPS, n))))


def circular_block_picks(rng: np.random.Generator, n: int, samples: int) -> np.ndarray:
    """Indices of `samples` circular block resamples of n steps, shape (samples, n): ceil(n / L)
    blocks of L = BLOCK_STEPS neighbouring steps, each starting at any step and wrapping past the
    last one, cut to n. Positions 2k and 2k+1 of a resample come from one block."""
    return _picks(circular_block_starts(rng, n, samples), n)


def _picks(starts: np.ndarray, n: int) -> np.ndarray:
    """The step indices of resamples from their blocks' first steps (circular_block_starts)."""
    size = min(BLOCK_STEPS, n)
    return ((starts[:, :, None] + np.arange(size)) % n).reshape(len(starts), -1)[:, :n]


def _block_sq_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis's non-overlapping blocks of BLOCK_STEPS (the last one shorter when
    n is odd) of the squared block sums."""
    n = x.shape[-1]
    pad = (-n) % BLOCK_STEPS
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad))], axis=-1)
    sums = x.reshape(*x.shape[:-1], -1, BLOCK_STEPS).sum(axis=-1)
    return (sums * sums).sum(axis=-1)


def _theta_se(b: np.ndarray, c: np.ndarray, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """log(mean c / mean b) over the last axis and its block standard error."""
    mb, mc = b.mean(axis=-1), c.mean(axis=-1)
    u = b / mb[..., None] - 1
    v = c / mc[..., None] - 1
    if paired:
        var = _block_sq_sum(v - u) / b.shape[-1] ** 2
    else:
        var = _block_sq_sum(u) / b.shape[-1] ** 2 + _block_sq_sum(v) / c.shape[-1] ** 2
    return np.log(mc) - np.log(mb), np.sqrt(var)


def log_ratio_interval(
    base: np.ndarray,
    cand: np.ndarray,
    *,
    paired: bool = False,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    chunk: int = 64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bootstrap-t interval of theta = log(mean cand / mean base), for each row of `base` (R, nb)
    and `cand` (R, nc) at once (one pair of runs: R = 1): (theta, low, high), arrays of R. Every
    row draws the same resample indices (from `seed`). `paired`: nb == nc and step i of one run
    is step i of the other, so both are resampled at the same steps. se = 0 (identical steps)
    gives the point; the ends are kept within +-LOG_BOUND."""
    base, cand = np.atleast_2d(np.asarray(base, float)), np.atleast_2d(np.asarray(cand, float))
    theta, se = _theta_se(base, cand, paired)
    rng = np.random.default_rng(seed)
    starts_b = circular_block_starts(rng, base.shape[1], samples)
    starts_c = starts_b if paired else circular_block_starts(rng, cand.shape[1], samples)
    half = np.empty(len(theta))
    # bounded memory: at most about CELLS resampled steps at once (rows x samples x steps)
    per = max(1, CELLS // max(1, base.shape[1] + cand.shape[1]))
    for start in range(0, len(theta), chunk):
        rows = slice(start, start + chunk)
        n_rows = len(theta[rows])
        t = np.empty((n_rows, samples))
        step = max(1, per // n_rows)
        for s0 in range(0, samples, step):
            pick_b = _picks(starts_b[s0 : s0 + step], base.shape[1])
            pick_c = pick_b if paired else _picks(starts_c[s0 : s0 + step], cand.shape[1])
            th_s, se_s = _theta_se(base[rows][:, pick_b], cand[rows][:, pick_c], paired)
            diff = th_s - theta[rows, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                t[:, s0 : s0 + step] = np.where(diff == 0, 0.0, diff / se_s)  # se* = 0, theta* != theta: +-inf
        with np.errstate(invalid="ignore"):  # infinite t*: the interval grows to LOG_BOUND
            half[rows] = np.quantile(np.abs(t), confidence, axis=1)
    with np.errstate(invalid="ignore"):
        low = np.where(se > 0, theta - half * se, theta)
        high = np.where(se > 0, theta + half * se, theta)
    low = np.clip(np.nan_to_num(low, nan=-LOG_BOUND), -LOG_BOUND, theta)
    high = np.clip(np.nan_to_num(high, nan=LOG_BOUND), theta, LOG_BOUND)
    return theta, low, high


def relative_interval(
    base: np.ndarray, cand: np.ndarray, *, paired: bool = False, seed: int = SEED
) -> tuple[float, float | None, float | None]:
    """(change, low, high) of mean step time from `base` to `cand`: change = mean_c / mean_b - 1
    and its 95% bootstrap-t interval (None, None with fewer than MIN_STEPS steps on a side)."""
    change = float(cand.mean() / base.mean() - 1)
    if min(len(base), len(cand)) < MIN_STEPS:
        return change, None, None
    _, low, high = log_ratio_interval(base, cand, paired=paired and len(base) == len(cand), seed=seed)
    return change, min(float(np.expm1(low[0])), change), max(float(np.expm1(high[0])), change)


def welch_log_ratio(
    base: tuple[float, float, int], cand: tuple[float, float, int], confidence: float = CONFIDENCE
) -> tuple[float | None, float | None, float]:
    """Interval of the relative change of a mean from `base` to `cand`, each (mean, sample
    variance, samples), and the change: log(mc / mb) +- t_df * sqrt(vb / (nb mb^2) + vc / (nc mc^2))
    with Welch-Satterthwaite df, mapped by exp(.) - 1, so it lies in (-100%, +inf). No interval
    with fewer than 2 samples on a side or a mean that is not positive."""
    (mb, vb, nb), (mc, vc, nc) = base, cand
    if not mb or mb <= 0:
        return None, None, float("nan")
    change = mc / mb - 1
    if nb < 2 or nc < 2 or mc <= 0:
        return None, None, change
    a, c = vb / (nb * mb * mb), vc / (nc * mc * mc)
    theta = math.log(mc / mb)
    if a + c <= 0:
        return change, change, change
    ra, rc = a / (a + c), c / (a + c)  # shares of the variance: no underflow of a^2
    df = 1 / (ra * ra / (nb - 1) + rc * rc / (nc - 1))
    half = student_t_ppf(1 - (1 - confidence) / 2, df) * math.sqrt(a + c)
    low = math.expm1(max(theta - half, -LOG_BOUND))
    high = math.expm1(min(theta + half, LOG_BOUND))
    return min(low, change), max(high, change), change


def normal_ppf(q: float) -> float:
    """Quantile of the standard normal distribution (Newton's method on math.erfc)."""
    if not 0 < q < 1:
        raise ValueError(f"normal_ppf: q={q} is not in (0, 1)")
    x = 0.0
    for _ in range(100):
        err = 0.5 * math.erfc(-x / math.sqrt(2)) - q
        step = err / (math.exp(-x * x / 2) / math.sqrt(2 * math.pi))
        x -= max(min(step, 1.0), -1.0)
        if abs(step) < 1e-14 * max(1.0, abs(x)):
            break
    return x


def student_t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t distribution with real df >= 1: Hill's 1970 algorithm 396 as the
    start, then Newton steps on the exact distribution function (`student_t_cdf`);
    tests/analyzers/test_compare_stats.py checks it against scipy."""
    t = _hill_t_ppf(q, df)
    if q == 0.5 or math.isinf(df) or df > 1e7:
        return t
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(20):
        pdf = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = (student_t_cdf(t, df) - q) / pdf
        t -= step
        if abs(step) < 1e-13 * max(1.0, abs(t)):
            break
    return t


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with real df > 0, from the regularized incomplete beta function."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    tiny = 1e-300
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + num / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if abs(1 - c * d) < 1e-15:
            break
    return front * (f - 1) / a


def _hill_t_ppf(q: float, df: float) -> float:
    """Hill's (1970) approximation of Student's t quantile, about 6 digits for df >= 2."""
    if not 0 < q < 1:
        raise ValueError(f"student_t_ppf: q={q} is not in (0, 1)")
    if q == 0.5:
        return 0.0
    p = 2 * min(q, 1 - q)  # two-sided tail probability
    sign = 1.0 if q > 0.5 else -1.0
    n = df
    if math.isinf(n) or n > 1e7:
        return sign * -normal_ppf(p / 2)
    if n == 1:
        return sign * math.cos(p * math.pi / 2) / math.sin(p * math.pi / 2)
    if n == 2:
        return sign * math.sqrt(2 / (p * (2 - p)) - 2)
    a = 1 / (n - 0.5)
    b = 48 / (a * a)
    c = ((20700 * a / b - 98) * a - 16) * a + 96.36
    d = ((94.5 / (b + c) - 3) / b + 1) * math.sqrt(a * math.pi / 2) * n
    x = d * p
    y = x ** (2 / n)
    if y > 0.05 + a:
        x = normal_ppf(p / 2)
        y = x * x
        if n < 5:
            c += 0.3 * (n - 4.5) * (x + 0.6)
        c = (((0.05 * d * x - 5) * x - 7) * x - 2) * x + b + c
        y = (((((0.4 * y + 6.3) * y + 36) * y + 94.5) / c - y - 3) / b + 1) * x
        y = a * y * y
        y = math.expm1(y) if y > 0.002 else 0.5 * y * y + y
    else:
        y = ((1 / (((n + 6) / (n * y) - 0.089 * d - 0.822) * (n + 2) * 3) + 0.5 / (n + 4)) * y - 1) * (n + 1) / (
            n + 2
        ) + 1 / y
    return sign * math.sqrt(n * y)

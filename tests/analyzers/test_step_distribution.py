"""Per-step distributions in findings (analyzers/findings.py: step_distribution, per_counted_step,
spread_severity): the helpers against plain-Python computations, a hand-made run whose host wait
three slow steps of fourteen carry, and the real input-pipeline captures' host_bound finding
against a plain-Python walk over the store's events."""

from __future__ import annotations

import os
import random
import statistics

import pytest

from analyzers.context import RunContext
from analyzers.findings import per_counted_step, spread_severity, step_distribution
from analyzers.rules import breakdown, device_wait, id_dropping, idle_gaps, minibatching, skew
from profiler.store import Store
from scprof.cli import main
from tests.analyzers.runkit import HOST, TC_OPS, Ev, RunSpec, partition_stats, store_with

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def percentile_linear(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy's default), by hand."""
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@pytest.mark.parametrize("seed", range(8))
def test_step_distribution_equals_a_plain_python_computation(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    values = [rng.choice([0.0, rng.random(), rng.random() * 10, 0.05]) for _ in range(n)]
    threshold = 0.05
    d = step_distribution(values, threshold)
    assert d["median"] == pytest.approx(statistics.median(values))  # exact: the middle one or the mean of two
    assert d["p90"] == pytest.approx(percentile_linear(values, 90))
    assert d["steps_affected"] == sum(1 for v in values if v > threshold)  # strictly over
    assert d["steps"] == n


def test_step_distribution_without_steps():
    assert step_distribution([], 0.05) == {"median": None, "p90": None, "steps_affected": 0, "steps": 0}


def test_per_counted_step_sums_rows_along_the_counted_steps():
    """Rows of steps 1, 3 (twice: two chips), 7 (not counted) and a null step; counted 1..4."""
    got = per_counted_step([1, 2, 3, 4], [1, 3, 3, 7, float("nan")], [5, 2, 4, 100, 9], fill=-1)
    assert got.tolist() == [5, -1, 6, -1]


@pytest.mark.parametrize(
    ("values", "severity", "expected"),
    [
        ([0.9, 0.9, 0.9, 0.0, 0.0, 0.0, 0.0], "critical", "warning"),  # median 0: three slow steps carry it
        ([0.3, 0.3, 0.3, 0.3, 0.0, 0.0, 0.0], "critical", "critical"),  # median 0.3 > 0.2
        ([0.2, 0.2, 0.2], "critical", "warning"),  # the median must be over the level, not at it
        ([0.0, 0.0], "warning", "warning"),  # only critical is lowered
        ([], "critical", "critical"),  # no per-step values: the severity stands
    ],
)
def test_spread_severity_keeps_critical_only_when_the_median_step_is_over_the_level(values, severity, expected):
    assert spread_severity(severity, values, 0.2) == expected


SLOW = (3, 7, 11)  # of steps 0..15; counted: 1..14


def three_slow_steps() -> RunSpec:
    """16 steps on chip 0 (counted: 1..14, the first and last left out). A fast step is 100 ps, one
    TensorCore op filling it. A slow step (3, 7, 11) is 1,000 ps: the op runs its first 100 ps, then
    the TensorCore waits 900 ps for the host's copy of the next step's input, which ends at 990."""
    events, steps, t = [], [], 0
    for s in range(16):
        dur = 1_000 if s in SLOW else 100
        events.append(Ev(TC_OPS, 0, 0, "fwd", t, 100, step=s, category="tc_forward"))
        if s in SLOW:
            events.append(Ev(HOST, 0, 0, "copy", t + 150, 840, step=s + 1, category="host_to_device"))
        steps.append((0, s, t, dur))
        t += dur
    return RunSpec(events=events, steps=steps, hardware={"generation": "v5p", "num_chips": 1})


def test_a_host_wait_three_slow_steps_carry_says_in_3_of_14_steps(tmp_path):
    """Over the 14 counted steps' TensorCore time the host wait is 2,700 / 4,100 = 66% (critical by the mean),
    but 11 of the 14 counted steps wait nothing: the median step waits 0%, 3 of 14 steps are over 5%,
    and the finding is a warning. Its steps equal breakdown's counted steps."""
    with store_with(tmp_path, three_slow_steps()) as store:
        ctx = RunContext(store, 1)
        result = idle_gaps.analyze(ctx)
        counted = breakdown.analyze(RunContext(store, 1)).figures["steps"]
    # the share covers the counted steps (1..14: 3 slow of 1,000 ps, 11 fast of 100), as the series does
    assert result.figures["tensorcore"]["host"]["share"] == pytest.approx(2_700 / (3 * 1_000 + 11 * 100))
    (f,) = [f for f in result.findings if f.rule == "host_bound"]
    per_step = [900 / 1_000 if s in SLOW else 0.0 for s in range(1, 15)]  # by hand, counted steps 1..14
    assert counted == 14 == f.evidence["steps"]
    assert f.evidence["steps_affected"] == sum(v > idle_gaps.HOST_SHARE for v in per_step) == 3
    assert f.evidence["per_step_median_share"] == statistics.median(per_step) == 0.0
    assert "in 3 of 14 steps" in f.title and "median step 0%" in f.title
    assert f.severity == "warning"


def awaited_by_step(store: Store, run_id: int) -> dict[int, tuple[int, int]]:
    """Per counted step: (device time awaiting host input, device time), walked in plain Python over the
    store's events and step windows: in each idle gap of a device chip inside a counted step's window
    (no device op active), the host input events that end inside the gap were awaited, from the first
    one's start (or the gap's) to the last one's end."""
    con = store.con
    counted = {
        r[0] for r in con.execute("SELECT step FROM step_times WHERE run_id = ? AND counted", [run_id]).fetchall()
    }
    chips = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT chip FROM tracks WHERE run_id = ? AND kind IN ('gpu', 'cpu', 'device')", [run_id]
        ).fetchall()
    ]
    windows = con.execute(
        "SELECT chip, step, start_ps, end_ps FROM step_windows WHERE run_id = ? ORDER BY start_ps", [run_id]
    ).fetchall()
    rows = con.execute(
        "SELECT chip, category, start_ps, end_ps FROM slices WHERE run_id = ? AND category IN "
        "('device_compute', 'device_collective', 'device_memcpy', 'host_to_device', 'host_preprocess')",
        [run_id],
    ).fetchall()
    inputs = [(s, e) for c, cat, s, e in rows if cat == "host_preprocess"]
    out: dict[int, tuple[int, int]] = {}
    for chip, step, w_start, w_end in windows:
        if chip not in chips or step not in counted:
            continue
        ops = sorted((s, e) for c, cat, s, e in rows if c == chip and cat != "host_preprocess")
        gaps, cursor = [], w_start
        for s, e in ops:
            if e <= cursor or s >= w_end:
                continue
            if s > cursor:
                gaps.append((cursor, min(s, w_end)))
            cursor = max(cursor, e)
        if cursor < w_end:
            gaps.append((cursor, w_end))
        awaited = 0
        for g_start, g_end in gaps:
            ended = [(s, e) for s, e in inputs if g_start < e <= g_end]
            if ended:
                awaited += max(e for _, e in ended) - max(min(s for s, _ in ended), g_start)
        a, d = out.get(step, (0, 0))
        out[step] = (a + awaited, d + (w_end - w_start))
    return out


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """The committed prefetched capture and the DataLoader capture with workers, in one store."""
    db = str(tmp_path_factory.mktemp("captures") / "captures.duckdb")
    prefetched = os.path.join(DATA, "input_pipeline", "prefetched")
    workers = os.path.join(DATA, "torch_dataloader", "dataloader_workers.pt.trace.json.gz")
    assert main(["ingest", prefetched, "--name", "prefetched", "--db", db]) == 0
    assert main(["ingest", workers, "--name", "workers", "--db", db]) == 0
    with Store.open(db, read_only=True) as store:
        yield store


def test_the_prefetched_capture_awaits_no_input_and_has_no_host_bound_finding(captures):
    """A pool of threads prepares the batches ahead: no counted step's device waited for host input."""
    ref = awaited_by_step(captures, 1)
    assert len(ref) == breakdown.analyze(RunContext(captures, 1)).figures["steps"] == 14
    assert all(a == 0 for a, _ in ref.values())
    assert not [f for f in idle_gaps.analyze(RunContext(captures, 1)).findings if f.rule == "host_bound"]


def test_a_prefetching_dataloaders_host_bound_finding_reports_its_true_k_of_n(captures):
    """DataLoader workers prefetch, yet some steps still wait for their batch: the finding's k of n and
    median step equal the plain-Python walk, n is breakdown's counted steps, and the mean (a quarter of
    the device time, carried by the slow steps) does not make it critical when the median step waits
    under 20%."""
    ctx = RunContext(captures, 2)
    ref = awaited_by_step(captures, 2)
    shares = [a / d for a, d in (ref[s] for s in sorted(ref))]
    (f,) = [f for f in idle_gaps.analyze(ctx).findings if f.rule == "host_bound"]
    k = sum(v > device_wait.HOST_INPUT_SHARE for v in shares)
    assert f.evidence["steps"] == len(shares) == breakdown.analyze(RunContext(captures, 2)).figures["steps"]
    assert f.evidence["steps_affected"] == k and f"in {k} of {len(shares)} steps" in f.title
    assert f.evidence["per_step_median_share"] == pytest.approx(statistics.median(shares))
    assert f.value == pytest.approx(sum(a for a, _ in ref.values()) / sum(d for _, d in ref.values()))
    assert f.value > device_wait.CRITICAL_SHARE > statistics.median(shares)  # the mean alone would be critical
    assert f.severity == "warning"


def stats_run(minibatches: list[int], dropped: list[int], ids: list[list[int]]) -> RunSpec:
    """Seven 100 ps steps on chip 0 (counted: 1..5) with partition statistics of one table on 4
    SparseCores per step: the step's minibatches and dropped IDs (on each SparseCore) and its loads."""
    n = len(minibatches)
    stats = partition_stats(
        n,
        4,
        ids=[v for step in ids for v in step],
        unique=10,
        limit_ids=128,
        limit_unique=8,
        minibatches=[m for m in minibatches for _ in range(4)],
        dropped=[d for d in dropped for _ in range(4)],
    )
    return RunSpec(
        events=[Ev(TC_OPS, 0, 0, "fwd", 100 * s, 100, step=s, category="tc_forward") for s in range(n)],
        steps=[(0, s, 100 * s, 100) for s in range(n)],
        partition_stats=stats,
        hardware={"generation": "v5p", "num_chips": 1},
    )


def test_sparsecore_findings_count_the_counted_steps_they_affect(tmp_path):
    """Steps 0..6, counted 1..5. Minibatches 4 in steps 0, 2 and 4: 2 of the 5 counted steps, median
    step 1, so the table's up-to-4 minibatches are a warning, not critical. Dropped IDs in steps 2, 4
    and 6: 2 of 5 steps. Loads: 3,700 on SparseCore 0 and 100 on the others in steps 2 and 4 (max/mean
    3.7, a mean over the 7 steps of 1.77: an info finding), even elsewhere: 2 of 5 steps over 1.25x,
    median step 1.0x."""
    minibatches = [4, 1, 4, 1, 4, 1, 1]
    dropped = [0, 0, 5, 0, 5, 0, 5]
    ids = [[3_700, 100, 100, 100] if s in (2, 4) else [100] * 4 for s in range(7)]
    with store_with(tmp_path, stats_run(minibatches, dropped, ids)) as store:
        ctx = RunContext(store, 1)
        n = breakdown.analyze(ctx).figures["steps"]
        (mb,) = minibatching.analyze(ctx).findings
        (drop,) = id_dropping.analyze(ctx).findings
        (sk,) = skew.analyze(ctx).findings
    counted = range(1, 6)
    assert n == 5 == mb.evidence["steps"] == drop.evidence["steps"] == sk.evidence["steps"]
    k_mb = sum(minibatches[s] > 1 for s in counted)
    assert mb.evidence["steps_affected"] == k_mb == 2 and f"split {k_mb} of {n} steps into up to 4" in mb.title
    assert mb.evidence["per_step_median_minibatches"] == statistics.median(minibatches[s] for s in counted) == 1
    assert mb.severity == "warning"  # critical by its most minibatches, but the median step needs one
    k_drop = sum(dropped[s] > 0 for s in counted)
    assert drop.evidence["steps_affected"] == k_drop == 2 and f"dropped in {k_drop} of {n} steps" in drop.title
    ratios = [max(ids[s]) / (sum(ids[s]) / 4) for s in counted]
    assert sk.evidence["steps_affected"] == sum(r > 1.25 for r in ratios) == 2
    assert sk.evidence["per_step_median_max_over_mean"] == statistics.median(ratios)
    assert f"in 2 of {n} steps over 1.25×" in sk.title

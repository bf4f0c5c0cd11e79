"""analyzers/rules/skew.py on hand-built partition statistics: per table the mean over steps of the
hottest partition's load over the mean load, its coefficient of variation, the hottest partition
and how often it is the hottest, each against numpy; the fix; and the severity from what the skew
costs: the hot SparseCore's excess over the mean, as far as it paces the chip or the TensorCore waits
for it, against a hand-computed reference on hand-built timelines."""

from __future__ import annotations

import numpy as np

from analyzers.context import RunContext
from analyzers.rules import skew
from tests.analyzers.runkit import SC_OPS, TC_OPS, Ev, RunSpec, concat_stats, partition_stats, store_with


def test_skew_names_the_hot_partition(tmp_path):
    spec = RunSpec(
        partition_stats=partition_stats(
            5, 4, ids=[100, 100, 400, 100], unique=50, limit_ids=512, limit_unique=512, minibatches=1, dropped=0
        )
    )
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    assert f.entities["scs"] == [2] and f.entities["chips"] == [0]
    assert abs(f.value - 400 / 175) < 1e-9 and f.evidence["persistence_share"] == 1


def test_uniform_load_has_no_skew(tmp_path):
    spec = RunSpec(partition_stats=partition_stats(5, 4, 100, 50, 512, 512, 1, 0))
    with store_with(tmp_path, spec) as store:
        assert not skew.analyze(RunContext(store, 1)).findings


def test_figures_match_numpy_per_step_then_averaged(tmp_path):
    """t0's hot partition moves: SparseCore 2 is the hottest in 3 of 4 steps, SparseCore 0 in one."""
    loads = np.array([[100, 100, 400, 100], [100, 100, 300, 100], [500, 100, 100, 100], [100, 200, 600, 100]])
    stats = partition_stats(
        4, 4, ids=loads.ravel(), unique=50, limit_ids=1024, limit_unique=1024, minibatches=1, dropped=0
    )
    with store_with(tmp_path, RunSpec(partition_stats=stats)) as store:
        result = skew.analyze(RunContext(store, 1))
    max_over_mean = loads.max(axis=1) / loads.mean(axis=1)
    cv = loads.std(axis=1) / loads.mean(axis=1)
    got = result.figures["tables"]["t0"]
    assert abs(got["max_over_mean"] - max_over_mean.mean()) < 1e-9 and abs(got["cv"] - cv.mean()) < 1e-9
    (f,) = result.findings
    assert f.entities == {"tables": ["t0"], "chips": [0], "scs": [2]}
    assert f.evidence["persistence_share"] == 3 / 4 and f.evidence["steps_with_stats"] == 4
    assert f.evidence["steps"] == 0 and "median step" not in f.title  # no step markers: no counted steps
    assert abs(f.evidence["worst_max_over_mean"] - max_over_mean.max()) < 1e-9


def test_without_a_timeline_a_skew_is_info_and_names_the_hot_partition_on_another_chip(tmp_path):
    """Mean-over-steps ratios 1.6, 2.5 and 1.4 (none); t1's hot partition is chip 1's SparseCore 3.
    No SparseCore op events: what the skew costs cannot be measured, so both are info."""

    def table(name, hot, chip_of_hot=0):
        s = partition_stats(
            2,
            4,
            ids=[100, 100, 100, hot],
            unique=50,
            limit_ids=4096,
            limit_unique=4096,
            minibatches=1,
            dropped=0,
            table=name,
        )
        s["chip"] = np.full(len(s["ids"]), chip_of_hot)
        return s

    # ratio = hot / ((300 + hot) / 4): 200 -> 1.6, 500 -> 2.5, 175 -> 1.47
    stats = concat_stats(table("t0", 200), table("t1", 500, chip_of_hot=1), table("t2", 175))
    with store_with(tmp_path, RunSpec(partition_stats=stats)) as store:
        result = skew.analyze(RunContext(store, 1))
    by_table = {f.entities["tables"][0]: f for f in result.findings}
    assert set(by_table) == {"t0", "t1"}
    assert by_table["t0"].severity == "info" and abs(by_table["t0"].value - 1.6) < 1e-9
    assert by_table["t1"].severity == "info" and abs(by_table["t1"].value - 2.5) < 1e-9
    assert by_table["t0"].evidence["step_time_cost_share"] is None
    assert (by_table["t1"].entities["chips"], by_table["t1"].entities["scs"]) == ([1], [3])
    assert abs(result.figures["tables"]["t2"]["max_over_mean"] - 175 / (475 / 4)) < 1e-9


STEPS = 6  # steps 1 .. 4 are counted (the first and last are not)


def timed_run(step_len, sc_busy, tc_op, hot_sc=None, config=None, hot_ids=400, name="run"):
    """One chip, 4 SparseCores, STEPS identical steps of `step_len`: SparseCore k busy
    [0, sc_busy[k]) of each step, the TensorCore op at tc_op = (start, dur) of each step.
    Partition statistics: hot_ids IDs on the hot SparseCore (hot_sc: one per step, default
    SparseCore 0 every step), 100 on the others."""
    events, windows = [], []
    for s in range(STEPS):
        t = s * step_len
        windows.append((0, s, t, step_len))
        events += [
            Ev(SC_OPS, 0, k, "SparseDenseMatmulOp", t, d, step=s, category="sc_forward", table="t0")
            for k, d in enumerate(sc_busy)
        ]
        events.append(Ev(TC_OPS, 0, 0, "dense", t + tc_op[0], tc_op[1], step=s, category="tc_forward"))
    hot = hot_sc or [0] * STEPS
    ids = [hot_ids if k == hot[s] else 100 for s in range(STEPS) for k in range(4)]
    stats = partition_stats(STEPS, 4, ids=ids, unique=50, limit_ids=1024, limit_unique=1024, minibatches=1, dropped=0)
    return RunSpec(events=events, steps=windows, partition_stats=stats, config=config, name=name)


def reference_cost(step_len, sc_busy, tc_busy, tc_wait):
    """Per step (all alike): excess of the hot SparseCore over the mean, bounded by how far it
    paces the chip beyond the mean or the TensorCore's wait for SparseCore work; over the step."""
    mean = sum(sc_busy) / len(sc_busy)
    hot = max(sc_busy)
    excess = hot - mean
    margin = max(0, hot - max(mean, tc_busy))
    return min(excess, max(margin, tc_wait)) / step_len


def test_a_hot_sparsecore_that_paces_the_step_costs_its_excess(tmp_path):
    """SparseCore 0 busy 90 of each 100, the others 50, the TensorCore 40: SparseCore 0 is the
    chip's busiest core; its excess over the mean (90 - 60) is step time: 30% -> critical."""
    spec = timed_run(100, [90, 50, 50, 50], (0, 40), config={"sparsecore": {"shuffle_ids": False}})
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    want = reference_cost(100, [90, 50, 50, 50], 40, tc_wait=60)
    assert abs(f.evidence["step_time_cost_share"] - want) < 1e-9 and abs(want - 0.3) < 1e-12
    assert f.severity == "critical" and f.fix["set"] == {"sparsecore.shuffle_ids": True}
    assert f.entities == {"tables": ["t0"], "chips": [0], "scs": [0]}


def test_a_hot_sparsecore_the_tensorcore_waits_for_costs_its_excess(tmp_path):
    """The TensorCore is the busiest core (100 of each 200) but starts only after SparseCore 0's
    op (busy 90, the others 50) ended: it waits for the hot SparseCore, which costs 30 of 200."""
    spec = timed_run(200, [90, 50, 50, 50], (95, 100))
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    want = reference_cost(200, [90, 50, 50, 50], 100, tc_wait=100)
    assert abs(f.evidence["step_time_cost_share"] - want) < 1e-9 and abs(want - 0.15) < 1e-12
    assert f.severity == "critical"


def test_a_costly_skew_with_the_ids_shuffled_already_is_info(tmp_path):
    """The same costly skew (30% of the step) in a run whose IDs are shuffled already: what stays
    hot is single rows, which no remapping spreads; nothing in the config to change, so info."""
    spec = timed_run(100, [90, 50, 50, 50], (0, 40), config={"sparsecore": {"shuffle_ids": True}})
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    assert abs(f.evidence["step_time_cost_share"] - 0.3) < 1e-9
    assert f.severity == "info" and f.fix is None and "shuffled already" in f.recommendation


def test_a_hot_sparsecore_off_the_critical_path_is_info(tmp_path):
    """The TensorCore is busy the whole step: the hot SparseCore (90 of 100) ends before it and
    no step waits for it, so the same skew costs nothing."""
    spec = timed_run(100, [90, 50, 50, 50], (0, 100), config={"sparsecore": {"shuffle_ids": False}})
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    assert f.evidence["step_time_cost_share"] == 0 and f.severity == "info"
    assert f.evidence["hot_sc_excess_ps"] == 4 * 30  # the excess is there, over the 4 counted steps


def test_a_hot_partition_that_moves_is_sampling_noise_info_without_the_shuffle(tmp_path):
    """The hottest partition changes every step (0, 1, 2, 3, 0, 1): not hot IDs but noise; however
    its SparseCore's time costs, the ID shuffle does not spread it."""
    spec = timed_run(
        100, [90, 50, 50, 50], (0, 40), hot_sc=[0, 1, 2, 3, 0, 1], config={"sparsecore": {"shuffle_ids": False}}
    )
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    assert f.evidence["persistence_share"] < skew.PERSISTENT and f.severity == "info" and f.fix is None


def test_the_fix_is_the_id_shuffle_only_where_it_is_off(tmp_path):
    stats = partition_stats(
        2, 4, ids=[100, 100, 400, 100], unique=50, limit_ids=1024, limit_unique=1024, minibatches=1, dropped=0
    )
    off = RunSpec(partition_stats=stats, config={"sparsecore": {"shuffle_ids": False}}, name="off")
    unset = RunSpec(partition_stats=stats, name="unset")
    with store_with(tmp_path, off, unset) as store:
        (f_off,) = skew.analyze(RunContext(store, 1)).findings
        (f_unset,) = skew.analyze(RunContext(store, 2)).findings
    assert f_off.fix["set"] == {"sparsecore.shuffle_ids": True} and "shuffle_ids=true" in f_off.recommendation
    assert f_unset.fix is None and "shuffle_ids" not in f_unset.recommendation


def test_a_milder_skew_is_reported_only_where_it_costs(tmp_path):
    """The hot partition carries 160 IDs against 100: 160 / (460 / 4) = 1.39x the mean, under
    MAX_OVER_MEAN. Where its SparseCore paces the step (as above, 30%) it is a warning; where the
    TensorCore is busy the whole step it costs nothing and is not reported at all."""
    assert skew.COSTLY_MAX_OVER_MEAN <= 160 / (460 / 4) < skew.MAX_OVER_MEAN
    paced = timed_run(100, [90, 50, 50, 50], (0, 40), hot_ids=160, name="paced")
    hidden = timed_run(100, [90, 50, 50, 50], (0, 100), hot_ids=160, name="hidden")
    with store_with(tmp_path, paced, hidden) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
        assert not skew.analyze(RunContext(store, 2)).findings
    assert f.severity == "critical" and abs(f.value - 160 / 115) < 1e-9

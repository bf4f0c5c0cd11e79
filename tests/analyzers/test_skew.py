"""analyzers/skew.py on hand-built partition statistics: per table the mean over steps of the
hottest partition's load over the mean load, its coefficient of variation, the hottest partition
and how often it is the hottest, each against numpy; the severity bands and the fix."""

from __future__ import annotations

import numpy as np

from analyzers import skew
from analyzers.context import RunContext
from tests.analyzers.runkit import RunSpec, concat_stats, partition_stats, store_with


def test_skew_names_the_hot_partition(tmp_path):
    spec = RunSpec(partition_stats=partition_stats(5, 4, ids=[100, 100, 400, 100], unique=50, limit_ids=512, limit_unique=512,
                                                   minibatches=1, dropped=0))  # fmt: skip
    with store_with(tmp_path, spec) as store:
        (f,) = skew.analyze(RunContext(store, 1)).findings
    assert f.entities["scs"] == [2] and f.entities["chips"] == [0]
    assert abs(f.value - 400 / 175) < 1e-9 and f.evidence["persistence"] == 1


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
    assert f.evidence["persistence"] == 3 / 4 and f.evidence["steps"] == 4
    assert abs(f.evidence["worst_max_over_mean"] - max_over_mean.max()) < 1e-9


def test_severity_bands_and_the_hot_partition_on_another_chip(tmp_path):
    """Mean-over-steps ratios 1.6 (warning), 2.5 (critical) and 1.4 (none); t1's hot partition is
    chip 1's SparseCore 3."""

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
    assert by_table["t0"].severity == "warning" and abs(by_table["t0"].value - 1.6) < 1e-9
    assert by_table["t1"].severity == "critical" and abs(by_table["t1"].value - 2.5) < 1e-9
    assert (by_table["t1"].entities["chips"], by_table["t1"].entities["scs"]) == ([1], [3])
    assert abs(result.figures["tables"]["t2"]["max_over_mean"] - 175 / (475 / 4)) < 1e-9


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

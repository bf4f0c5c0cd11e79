"""analyzers/rules/minibatching.py on hand-built partition statistics: which stack it blames, the limits it
suggests (the observed maximum rounded up to a multiple of 8), its counts of minibatched steps, and
the per-op fixed cost from a least-squares line through op durations, each against a hand count."""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.rules import minibatching
from tests.analyzers.runkit import SC_OPS, Ev, RunSpec, concat_stats, partition_stats, store_with


def test_minibatching_finding_names_limits_to_raise(tmp_path):
    spec = RunSpec(
        partition_stats=partition_stats(
            4,
            4,
            ids=[300, 310, 290, 305],
            unique=[150, 160, 140, 155],
            limit_ids=128,
            limit_unique=64,
            minibatches=3,
            dropped=0,
        )
    )
    with store_with(tmp_path, spec) as store:
        (f,) = minibatching.analyze(RunContext(store, 1)).findings
    assert f.rule == "minibatching" and f.entities == {"tables": ["t0"]} and f.value == 3
    assert "max_ids_per_partition from 128 to 312" in f.recommendation  # 310 rounded up to a multiple of 8
    assert "max_unique_ids_per_partition from 64 to 160" in f.recommendation


def test_no_minibatching_no_finding(tmp_path):
    spec = RunSpec(partition_stats=partition_stats(4, 4, 100, 50, 128, 64, 1, 0))
    with store_with(tmp_path, spec) as store:
        assert not minibatching.analyze(RunContext(store, 1)).findings


def test_round_up_to_a_multiple_of_eight():
    assert [minibatching.round_up(n) for n in (0, 1, 8, 9, 310, 312)] == [0, 8, 8, 16, 312, 312]


def test_a_stack_within_its_limits_is_named_not_blamed(tmp_path):
    """t0 is over its limits (3 minibatches); t1 is within its own but runs the same 3: one finding,
    for t0, naming t1 as a stack that ran them too."""
    over = partition_stats(3, 4, ids=300, unique=100, limit_ids=128, limit_unique=128, minibatches=3, dropped=0)
    carried = partition_stats(3, 4, 50, 20, 128, 128, 3, 0, table="t1")
    with store_with(tmp_path, RunSpec(partition_stats=concat_stats(over, carried))) as store:
        result = minibatching.analyze(RunContext(store, 1))
    (f,) = result.findings
    assert f.entities == {"tables": ["t0"]} and f.severity == "critical"
    assert f.evidence["stacks_minibatched_within_limits"] == 1 and "(t1)" in f.recommendation
    assert result.figures["tables"] == 2 and result.figures["tables_minibatched"] == 2


def test_title_counts_the_minibatched_steps_and_only_the_limit_exceeded_is_raised(tmp_path):
    """4 steps x 2 SparseCores; steps 1 and 2 split in two: 2 of 4 steps, up to 2 (a warning), a
    mean of 12 / 8 = 1.5 minibatches per partition. Only the unique IDs (70 > 64) exceed a limit."""
    stats = partition_stats(
        4, 2, ids=100, unique=[60, 70], limit_ids=128, limit_unique=64, minibatches=[1, 1, 2, 2, 2, 2, 1, 1], dropped=0
    )
    with store_with(tmp_path, RunSpec(partition_stats=stats)) as store:
        (f,) = minibatching.analyze(RunContext(store, 1)).findings
    assert "split 2 of 4 steps into up to 2 minibatches" in f.title and f.severity == "warning"
    assert f.evidence["mean_minibatches"] == 1.5
    assert (f.evidence["observed_max_unique_ids"], f.evidence["observed_max_ids"]) == (70, 100)
    assert "max_unique_ids_per_partition from 64 to 72" in f.recommendation
    assert "max_ids_per_partition from" not in f.recommendation


def test_fixed_cost_per_op_is_the_intercept_of_duration_on_ids(tmp_path):
    """Forward ops of t0 take 1,000 + 2 x ids ps exactly: the fit's intercept is 1,000 ps, and each
    extra minibatch costs one op forward and one backward, 1,000 x (3 - 1) x 2 = 4,000 ps a step,
    2/5 of the 10,000 ps steps. Two SparseCores x 3 minibatches: 6 forward ops a step."""
    steps, events = 4, []
    for s in range(steps):
        for core in range(2):
            for mb, ids in enumerate((100, 200, 300)):
                events.append(
                    Ev(
                        SC_OPS,
                        0,
                        core,
                        "fwd",
                        s * 10_000 + mb * 2_000,
                        1_000 + 2 * ids,
                        step=s,
                        category="sc_forward",
                        table="t0",
                        ids=ids,
                    )
                )
    stats = partition_stats(steps, 2, ids=300, unique=100, limit_ids=128, limit_unique=128, minibatches=3, dropped=0)
    spec = RunSpec(events=events, steps=[(0, s, s * 10_000, 10_000) for s in range(steps)], partition_stats=stats)
    with store_with(tmp_path, spec) as store:
        (f,) = minibatching.analyze(RunContext(store, 1)).findings
    ev = f.evidence
    assert abs(ev["fixed_ps_per_op"] - 1_000) < 1e-6 and ev["fwd_ops_per_step"] == 6 and ev["sparsecores"] == 2
    assert abs(ev["estimated_overhead_ps_per_step"] - 4_000) < 1e-6
    assert abs(ev["estimated_overhead_share"] - 0.4) < 1e-9


def test_a_run_without_partition_statistics_says_so(tmp_path):
    with store_with(tmp_path, RunSpec(steps=[(0, 0, 0, 100)])) as store:
        result = minibatching.analyze(RunContext(store, 1))
    assert not result.findings and "no SparseCore partition statistics" in result.notes[0]

"""Each analyzer on a tiny hand-built run: the finding it must raise, or its absence."""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.rules import id_dropping, idle_gaps, memory, overlap
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, partition_stats, store_with


def test_overlap_matches_interval_reference(tmp_path):
    # TC busy [0,40) and [60,80); SC busy [30,70) on two cores overlapping each other.
    events = [
        Ev(TC_OPS, 0, 0, "f", 0, 40, category="tc_forward"),
        Ev(TC_OPS, 0, 0, "b", 60, 20, category="tc_backward"),
        Ev(SC_OPS, 0, 0, "s", 30, 30, category="sc_forward"),
        Ev(SC_OPS, 0, 1, "s", 40, 30, category="sc_forward"),
    ]
    tc = {t for e in events[:2] for t in range(e.start, e.start + e.dur)}
    sc = {t for e in events[2:] for t in range(e.start, e.start + e.dur)}
    with store_with(tmp_path, RunSpec(events=events, steps=[(0, 0, 0, 100)])) as store:
        row = overlap.per_chip(RunContext(store, 1)).to_pylist()[0]
    assert (row["tc_busy_ps"], row["sc_busy_ps"], row["overlap_ps"]) == (len(tc), len(sc), len(tc & sc))


def alternating(steps: int, pipelined: bool) -> RunSpec:
    """SC forward, TC forward+backward, SC backward per step; input in HBM well ahead."""
    events, windows, t = [], [], 0
    for s in range(steps):
        events.append(Ev(HOST, -1, 0, "transfer", max(t - 300, 0), 10, step=s, category="host_to_device"))
        sc0 = t if not pipelined or s == 0 else t - 40
        events += [
            Ev(SC_OPS, 0, 0, "fwd", sc0, 40, step=s, category="sc_forward"),
            Ev(TC_OPS, 0, 0, "tcf", t + 40, 30, step=s, category="tc_forward"),
            Ev(TC_OPS, 0, 0, "tcb", t + 70, 30, step=s, category="tc_backward"),
            Ev(SC_OPS, 0, 0, "bwd", t + 100, 40, step=s, category="sc_backward"),
        ]
        windows.append((0, s, t, 140))
        t += 140
    return RunSpec(events=events, steps=windows)


def test_turn_taking_cores_are_reported_not_pipelined(tmp_path):
    with store_with(tmp_path, alternating(6, pipelined=False)) as store:
        result = overlap.analyze(RunContext(store, 1))
    assert [f.rule for f in result.findings] == ["not_pipelined"]
    assert result.figures["overlap_share_of_sc"] == 0


def test_turn_taking_with_pipelining_off_gets_the_flag_as_its_fix(tmp_path):
    spec = alternating(6, pipelined=False)
    spec.config = {"flags": {"tf_xla_disable_full_embedding_pipelining": True}}
    with store_with(tmp_path, spec) as store:
        (f,) = overlap.analyze(RunContext(store, 1)).findings
    assert f.rule == "not_pipelined" and f.evidence["pipelining_disabled"] is True
    assert f.fix["set"] == {"flags.tf_xla_disable_full_embedding_pipelining": False}


def test_low_overlap_with_pipelining_on_does_not_advise_enabling_it(tmp_path):
    """The run's config has pipelining on: the finding says what bounds the overlap instead.
    SparseCore busy 80 of each 140, TensorCore 60: 60/80 of the SparseCore time could overlap, none
    does, so a dependency (not too little TensorCore work) keeps them apart."""
    spec = alternating(6, pipelined=False)
    spec.config = {"flags": {"tf_xla_disable_full_embedding_pipelining": False}}
    with store_with(tmp_path, spec) as store:
        (f,) = overlap.analyze(RunContext(store, 1)).findings
    assert f.rule == "low_overlap" and f.fix is None
    assert "Enable" not in f.recommendation and "already on" in f.recommendation
    assert f.evidence["overlap_bound_share_of_sc"] == 60 / 80 and f.severity == "warning"
    assert "dependency" in f.recommendation


def test_sparsecore_starved_of_input_is_host_bound_not_unpipelined(tmp_path):
    spec = alternating(6, pipelined=False)
    # every step's input lands just as its SC forward starts: the SC could not run ahead
    sc_start = {e.step: e.start for e in spec.events if e.category == "sc_forward"}
    for e in spec.events:
        if e.category == "host_to_device":
            e.start, e.dur = sc_start[e.step] - 30, 30
    with store_with(tmp_path, spec) as store:
        ctx = RunContext(store, 1)
        gaps = idle_gaps.gaps(ctx).to_pylist()
        # every SparseCore gap before the last step's: the next step's input was not there yet
        assert {g["cause"] for g in gaps if g["track_kind"] == "sparsecore" and g["step"] < 5} == {"host"}
        assert not overlap.analyze(ctx).findings


def test_dropped_share_against_processed_ids(tmp_path):
    events = [
        Ev(SC_OPS, 0, k, "fwd", 0, 10, step=s, category="sc_forward", table="t0", ids=100)
        for s in range(2)
        for k in range(4)
    ]  # 800 IDs kept
    spec = RunSpec(events=events, partition_stats=partition_stats(2, 4, 100, 50, 100, 64, 1, dropped=[25, 0, 0, 0]))
    with store_with(tmp_path, spec) as store:
        (f,) = id_dropping.analyze(RunContext(store, 1)).findings
    assert f.metric == "dropped_share" and abs(f.value - 50 / 850) < 1e-12 and f.severity == "critical"


def test_hbm_pressure_against_header_capacity(tmp_path):
    cap = 1000
    spec = RunSpec(
        counters=[(0, "HBM heap", 0, 500.0), (0, "HBM stack", 10, 460.0), (0, "HBM stack", 20, 100.0)],
        hardware={"num_chips": 1, "hbm_bytes": cap},
    )
    with store_with(tmp_path, spec) as store:
        (f,) = memory.analyze(RunContext(store, 1)).findings
    # the heap (50%) is static; the stack is what grows past the threshold, so it drives the peak
    assert f.rule == "hbm_stack_pressure" and f.value == 0.96 and f.severity == "critical"


def test_memory_without_capacity_says_so(tmp_path):
    spec = RunSpec(counters=[(0, "HBM heap", 0, 500.0)], hardware={"num_chips": 1})
    with store_with(tmp_path, spec) as store:
        result = memory.analyze(RunContext(store, 1))
    assert not result.findings and any("HBM capacity" in n for n in result.notes)

"""analyzers/rules/idle_gaps.py on hand-built runs: each TensorCore gap, the event that closed it and its
cause (the other core, a collective, another core of the same kind, nothing, the host), the time
per cause over the TensorCore's observed time, and the host-bound finding, against hand counts."""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.rules import idle_gaps
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, store_with

TC_CORE = ("/device:TPU:{chip} TensorCore {core}", "XLA Ops", "tensorcore")  # a second TensorCore of the chip


def test_gap_closed_by_host_input_names_its_blocker(tmp_path):
    # TensorCore idle from 10 to 30 on chip 0; the host transfer of step 1 ends at 25, preprocessing
    # of step 3 (ahead) at 28: the transfer is the blocker, the work ahead blocks nothing.
    events = [
        Ev(TC_OPS, 0, 0, "fwd", 0, 10, step=0, category="tc_forward"),
        Ev(HOST, 0, 0, "copy", 15, 10, step=1, category="host_to_device"),
        Ev(HOST, 0, 0, "prep", 20, 8, step=3, category="host_preprocess"),
        Ev(TC_OPS, 0, 0, "fwd", 30, 10, step=1, category="tc_forward"),
    ]
    with store_with(tmp_path, RunSpec(events=events, steps=[(0, 0, 0, 30), (0, 1, 30, 10)])) as store:
        gaps = idle_gaps.gaps(RunContext(store, 1)).to_pylist()
    assert [(g["gap_start_ps"], g["gap_end_ps"], g["blocker_name"], g["cause"]) for g in gaps] == [
        (10, 30, "copy", "host")
    ]


def four_causes() -> RunSpec:
    """One 1,300 ps step on chip 0. TensorCore 0 runs [0,100) [300,400) [600,700) [900,1000)
    [1200,1300); what ends inside its gaps: a SparseCore forward at 290, a SparseCore collective
    at 590, TensorCore 1's op at 880, nothing in [1000,1200)."""
    tc = [
        Ev(TC_OPS, 0, 0, f"op{i}", start, 100, step=0, category="tc_forward")
        for i, start in enumerate((0, 300, 600, 900, 1200))
    ]
    others = [
        Ev(SC_OPS, 0, 0, "S", 100, 190, step=0, category="sc_forward"),
        Ev(SC_OPS, 0, 1, "X", 400, 190, step=0, category="sc_collective"),
        Ev(TC_CORE, 0, 1, "E", 650, 230, step=0, category="tc_forward"),
    ]
    return RunSpec(events=tc + others, steps=[(0, 0, 0, 1300)])


def test_each_gap_gets_the_cause_of_what_ended_inside_it(tmp_path):
    with store_with(tmp_path, four_causes()) as store:
        rows = idle_gaps.gaps(RunContext(store, 1)).to_pylist()
    tc = sorted(
        (g["gap_start_ps"], g["gap_end_ps"], g["blocker_name"], g["cause"], g["cause_ps"])
        for g in rows
        if g["track_kind"] == "tensorcore"
    )
    assert tc == [
        (100, 300, "S", "other_core", 200),
        (400, 600, "X", "collective", 200),
        (700, 900, "E", "same_core", 200),
        (1000, 1200, None, "other", 200),
    ]


def test_time_per_cause_is_a_share_of_the_tensorcores_observed_time(tmp_path):
    """Two TensorCore op tracks with events, one 1,300 ps step: 2,600 ps observed; each cause 200 ps.
    No gap waits for the host: no finding."""
    with store_with(tmp_path, four_causes()) as store:
        result = idle_gaps.analyze(RunContext(store, 1))
        assert idle_gaps.track_time_ps(RunContext(store, 1), "tensorcore") == 2_600
    tc = result.figures["tensorcore"]
    assert set(tc) == {"other_core", "collective", "same_core", "other"}
    assert all(v == {"gaps": 1, "gap_ps": 200, "share": 200 / 2_600} for v in tc.values())
    assert not result.findings


def test_tensorcore_waiting_for_the_host_is_a_host_bound_finding(tmp_path):
    """TensorCore idle 20 of its 40 ps while the host copies step 1's input: a share of 0.5, past
    0.2, so critical. No preprocessing in a counted step: the input threads' load is unknown, so
    the fix is a deeper prefetch, the next depth after the default 2."""
    events = [
        Ev(TC_OPS, 0, 0, "fwd", 0, 10, step=0, category="tc_forward"),
        Ev(HOST, 0, 0, "copy", 15, 10, step=1, category="host_to_device"),
        Ev(TC_OPS, 0, 0, "fwd", 30, 10, step=1, category="tc_forward"),
    ]
    with store_with(tmp_path, RunSpec(events=events, steps=[(0, 0, 0, 30), (0, 1, 30, 10)])) as store:
        result = idle_gaps.analyze(RunContext(store, 1))
    assert result.figures["tensorcore"]["host"] == {"gaps": 1, "gap_ps": 20, "share": 0.5}
    (f,) = result.findings
    assert f.rule == "host_bound" and f.severity == "critical"
    assert f.evidence["gaps"] == 1 and f.evidence["idle_ps"] == 20
    assert f.fix["set"] == {"flags.maximum_parallel_iterations": 4}


def test_deeper_prefetch_depths():
    assert idle_gaps._deeper(None) == [4, 8] and idle_gaps._deeper(4) == [8] and idle_gaps._deeper(8) == [16, 32]


def update_then_input(update_step: int, pipelined: bool = True) -> RunSpec:
    """Chip 0, steps 1 [0,100) and 2 [100,200). SparseCore 0 runs step 1's forward [0,10), an
    embedding update (backward) of step `update_step` [30,80), then step 2's forward [80,100);
    step 2's input lands at 50 (its copy [40,50)). The SparseCore's gap [10,30) closes before the
    input lands. TensorCore 0 runs [0,20) and [110,130): its gap [20,110) is closed by step 2's
    SparseCore forward (ending at 100)."""
    events = [
        Ev(TC_OPS, 0, 0, "tc1", 0, 20, step=1, category="tc_forward"),
        Ev(SC_OPS, 0, 0, "fwd1", 0, 10, step=1, category="sc_forward"),
        Ev(SC_OPS, 0, 0, "update", 30, 50, step=update_step, category="sc_backward"),
        Ev(HOST, 0, 0, "copy", 40, 10, step=2, category="host_to_device"),
        Ev(SC_OPS, 0, 0, "fwd2", 80, 20, step=2, category="sc_forward"),
        Ev(TC_OPS, 0, 0, "tc2", 110, 20, step=2, category="tc_forward"),
    ]
    config = {"flags": {"tf_xla_disable_full_embedding_pipelining": not pipelined}}
    return RunSpec(events=events, steps=[(0, 1, 0, 100), (0, 2, 100, 100)], config=config)


def tc_gap(tmp_path, spec: RunSpec) -> tuple:
    with store_with(tmp_path, spec) as store:
        rows = idle_gaps.gaps(RunContext(store, 1)).to_pylist()
    (g,) = [
        (r["gap_start_ps"], r["gap_end_ps"], r["blocker_name"], r["cause"], r["cause_ps"])
        for r in rows
        if r["track_kind"] == "tensorcore"
    ]
    return g


def test_a_forward_still_waiting_for_its_update_did_not_wait_for_the_input(tmp_path):
    """Pipelined, step 2's forward waits for step 0's embedding update, which runs [30,80): in the
    SparseCore's gap [10,30) the forward could not have run even with its input there, so the input
    (landing at 50) held nothing back and the TensorCore gap its forward closed is the other
    core's, all 90 ps of it."""
    assert tc_gap(tmp_path, update_then_input(0)) == (20, 110, "fwd2", "other_core", 90)


def test_a_forward_ready_but_for_its_input_waited_for_it(tmp_path):
    """The update in [30,80) is step 1's, which a pipelined step 2 does not wait for: the SparseCore
    could have run step 2's forward in its gap [10,30) had the input been there, so the TensorCore
    gap is the host's, for the 20 ps the SparseCore lost."""
    assert tc_gap(tmp_path, update_then_input(1)) == (20, 110, "fwd2", "host", 20)


def test_without_the_embedding_pipeline_a_forward_waits_for_the_previous_update(tmp_path):
    """Pipelining off: step 2's forward waits for step 1's update, so the same gap is not the input's."""
    assert tc_gap(tmp_path, update_then_input(1, pipelined=False)) == (20, 110, "fwd2", "other_core", 90)

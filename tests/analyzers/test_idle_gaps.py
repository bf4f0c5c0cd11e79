"""analyzers/idle_gaps.py on hand-built runs: each TensorCore gap, the event that closed it and its
cause (the other core, a collective, another core of the same kind, nothing, the host), the time
per cause over the TensorCore's observed time, and the host-bound finding, against hand counts."""

from __future__ import annotations

from analyzers import idle_gaps
from analyzers.context import RunContext
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

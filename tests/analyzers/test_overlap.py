"""analyzers/rules/overlap.py on hand-built timelines: what the SparseCores take turns with when
pipelining is off (the whole rest of the step's chain, collectives included), and when a low
overlap with pipelining on is only info (collective-bound, SparseCore-bound)."""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.rules import overlap
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, store_with

ICI = ("/device:TPU:{chip}", "ICI", "tensorcore")
STEPS = 6
OFF = {"flags": {"tf_xla_disable_full_embedding_pipelining": True}}
ON = {"flags": {"tf_xla_disable_full_embedding_pipelining": False}}


def run(step_len: int, per_step, config: dict) -> RunSpec:
    """STEPS steps of `step_len` (window [step_len * s + 50, + step_len)); per_step(t) gives one
    step's events relative to t = step_len * s + 100; every input in HBM well ahead."""
    events, windows = [], []
    for s in range(STEPS):
        t = step_len * s + 100
        events.append(Ev(HOST, -1, 0, "transfer", 0, 10, step=s, category="host_to_device"))
        events += [
            Ev(where, 0, core, name, t + start, dur, step=s, category=cat)
            for where, core, name, start, dur, cat in per_step
        ]
        windows.append((0, s, t - 50, step_len))
    return RunSpec(events=events, steps=windows, config=config)


def test_pipelining_off_with_the_chain_in_collectives_is_not_pipelined(tmp_path):
    """Pipelining off; per 200: SparseCore forward 60, the activations' all-to-all 50, the
    TensorCore 20 (10%: under the 15% a TensorCore-only partner would need), the gradients'
    all-to-all 10, SparseCore backward 60. The SparseCores idle 80 of 200 (40%) while the rest
    of the chain runs: what pipelining lets the next step's SparseCore work overlap."""
    chain = [
        (SC_OPS, 0, "fwd", -50, 60, "sc_forward"),
        (ICI, -1, "all-to-all", 10, 50, "sc_collective"),
        (TC_OPS, 0, "dense", 60, 20, "tc_forward"),
        (ICI, -1, "all-to-all", 80, 10, "sc_collective"),
        (SC_OPS, 0, "bwd", 90, 60, "sc_backward"),
    ]
    with store_with(tmp_path, run(200, chain, OFF)) as store:
        result = overlap.analyze(RunContext(store, 1))
    (f,) = result.findings
    assert f.rule == "not_pipelined" and f.evidence["pipelining_disabled"] is True
    assert abs(result.figures["tc_busy_share"] - 20 / 200) < 1e-9  # below BUSY_ENOUGH
    assert abs(result.figures["sc_busy_share"] - 120 / 200) < 1e-9 and result.figures["overlap_share_of_sc"] == 0
    assert overlap.BUSY_ENOUGH < 1 - 120 / 200  # the SparseCores idle 40% of the step


def test_low_overlap_while_the_tensorcore_waits_for_its_collectives_is_collective_bound(tmp_path):
    """Pipelining on; per 200: TensorCore 60, then the dense all-reduce 135 it waits for before the
    next step; the SparseCores (forward 40 ahead of the step, backward 40 after the TensorCore)
    never overlap it. The TensorCore waits for the interconnect, not the SparseCores: info."""
    steps = [
        (SC_OPS, 0, "fwd", -50, 40, "sc_forward"),
        (TC_OPS, 0, "dense", 0, 60, "tc_forward"),
        (SC_OPS, 0, "bwd", 60, 40, "sc_backward"),
        (ICI, -1, "all-reduce", 60, 135, "tc_collective"),
    ]
    with store_with(tmp_path, run(200, steps, ON)) as store:
        (f,) = overlap.analyze(RunContext(store, 1)).findings
    assert f.rule == "low_overlap" and f.severity == "info" and "collective-bound" in f.title
    assert f.evidence["tc_wait_for_collectives_ps"] > f.evidence["tc_wait_for_sc_ps"] == 0


def test_low_overlap_with_little_tensorcore_work_left_alone_is_sparsecore_bound(tmp_path):
    """Pipelining on; per 100: SparseCore forward 40 and backward 40, TensorCore 20 of which 8
    overlap the backward: overlap 8/80 = 10% of SparseCore time, far below its ceiling 20/80, but
    the TensorCore work left alone is 12% of the step (under BUSY_ENOUGH): nothing a better
    overlap could save, the SparseCores pace the step: info."""
    steps = [
        (SC_OPS, 0, "fwd", -49, 40, "sc_forward"),
        (TC_OPS, 0, "dense", -8, 20, "tc_forward"),
        (SC_OPS, 0, "bwd", 4, 40, "sc_backward"),
    ]
    with store_with(tmp_path, run(100, steps, ON)) as store:
        result = overlap.analyze(RunContext(store, 1))
    (f,) = result.findings
    assert abs(result.figures["overlap_share_of_sc"] - 8 / 80) < 1e-9
    assert f.rule == "low_overlap" and f.severity == "info" and "SparseCore-bound" in f.title
    assert f.evidence["tc_wait_for_sc_ps"] > 0 == f.evidence["tc_wait_for_collectives_ps"]

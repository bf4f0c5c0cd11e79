"""The memory analyzer's HBM stack estimate: the doc's formulas from trace data alone.

Reference: the emulator's own static memory model (computed from the config, not the
trace) for the compiled limits, and the formulas by hand over the partition statistics
for the observed unique IDs.
"""

from __future__ import annotations

import pytest

from analyzers.context import RunContext
from analyzers.rules import memory
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.config_load import load_config
from sim_backend.emulator import simulate
from sim_backend.recording.record import record_run
from tests.tracekit import REPO

CONFIGS = ("tuned", "hbm_stack_pressure")
STEPS = 4


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    db = str(tmp / "s.duckdb")
    sims = {}
    with Store.open(db) as s:
        for name in CONFIGS:
            path = str(REPO / "configs" / f"{name}.toml")
            result = record_run(path, [f"steps={STEPS}"], name, None, str(tmp / name))
            ingest_trace(s, result.trace_path, name=name)
            sims[name] = simulate(load_config(path, [f"steps={STEPS}"]))
    with Store.open(db, read_only=True) as s:
        yield s, sims


@pytest.mark.parametrize("name", CONFIGS)
def test_compiled_stack_per_group_matches_the_emulators_model(runs, name):
    store, sims = runs
    sim = sims[name]
    rows = {
        r["stack_name"]: r
        for r in RunContext(store, store.resolve_run(name)).sql("analysis.memory.stack_estimate").to_pylist()
    }
    spc = sim.hw.sparsecores_per_chip
    assert set(rows) == {g.name for g in sim.groups}
    for g, gm in zip(sim.groups, sim.memory.groups, strict=True):
        assert rows[g.name]["forward_bytes"] == gm.stack_forward_per_sc * spc
        assert rows[g.name]["backward_bytes"] == gm.stack_backward_per_sc * spc


@pytest.mark.parametrize("name", CONFIGS)
def test_observed_estimate_uses_the_most_unique_ids_a_partition_saw(runs, name):
    store, sims = runs
    sim = sims[name]
    run = store.resolve_run(name)
    n_sc, spc = sim.hw.num_total_sparse_cores, sim.hw.sparsecores_per_chip
    got = memory.stack_estimate(RunContext(store, run))
    fwd = bwd = 0
    for g in sim.groups:
        seen = max(
            int(gr.partition_unique_ids.max()) for sr in sim.steps for gr in sr.groups if gr.group.name == g.name
        )
        fwd += (2 * g.width + 1) * seen * n_sc * 4 * spc
        bwd += 3 * g.width * seen * n_sc * 4 * spc
    assert got["stack_estimate_observed_one_pass_bytes"] == max(fwd, bwd)
    assert got["stack_estimate_observed_both_passes_bytes"] == fwd + bwd


@pytest.mark.parametrize("name", CONFIGS)
def test_recorded_peak_lies_between_one_pass_and_both_passes(runs, name):
    store, _ = runs
    result = memory.analyze(RunContext(store, store.resolve_run(name)))
    f = result.figures
    # at most forward and backward at once, plus the next step's backward region starting before
    # the last group of this step's backward ends (pipelined steps on one chip's SparseCores:
    # hbm_stack_pressure's three stacks overlap so for ~18 us of a 700 us pass)
    one, both = f["stack_estimate_one_pass_bytes"], f["stack_estimate_both_passes_bytes"]
    assert one <= f["stack_peak_bytes"] <= both + one


def test_stack_finding_quotes_the_estimate(runs):
    store, _ = runs
    (finding,) = memory.analyze(RunContext(store, store.resolve_run("hbm_stack_pressure"))).findings
    assert finding.rule == "hbm_stack_pressure"
    assert (
        finding.evidence["stack_estimate_observed_one_pass_bytes"] < finding.evidence["stack_estimate_one_pass_bytes"]
    )
    assert "doc's stack formulas" in finding.recommendation

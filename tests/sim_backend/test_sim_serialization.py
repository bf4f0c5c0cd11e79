"""Table serialization costs SparseCore-side parallelism (SparseCore guide §9, §10, §11).

The document: `xla_sc_num_serialized_tables_to_optimize_hbm` "serializes processing for
more tables, which can reduce peak HBM stack usage, but may cost performance due to
reduced parallelism"; with it set high "expect slower SparseCore performance". The
emulator's model (docs/emulator.md "Serialization"): a serialized group is a phase of
the whole slice, its lookups and its activation all-to-all (forward), its gradient
all-to-all and its update (backward), with a barrier after it. The overlap lost is
then hand-computable: with pipelining off every step is one chain, and each serialized
group g exposes its own activation all-to-all (which ran under group g+1's lookups)
and group g+1's gradient all-to-all (which ran under group g's update).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sim_backend.config import config_from_dict
from sim_backend.emulator import simulate
from sim_backend.metrics import step_time_ps
from sim_backend.stepgraph import A2A_BWD, A2A_FWD, SC_BWD, SC_FWD

SERIALIZED = "xla_sc_num_serialized_tables_to_optimize_hbm"


def three_groups(small_raw: dict, serialized: int) -> dict:
    """The small workload unstacked (3 groups: big, mid, tiny), pipelining off, host out of the way."""
    raw = copy.deepcopy(small_raw)
    raw["steps"] = 6
    raw["sparsecore"]["disable_table_stacking"] = True
    raw["host"]["num_threads"] = 16
    raw["flags"]["tf_xla_disable_full_embedding_pipelining"] = True
    raw["flags"][SERIALIZED] = serialized
    return raw


def collective_ps(sim, kind: int, group: int) -> float:
    """Mean per step (steps 1.. as step_time_ps counts them) of the slowest chip's
    all-to-all of `kind` for `group`."""
    c, s = sim.graph.columns(), sim.schedule
    per_step = []
    for step in range(1, sim.cfg.steps):
        m = (c["kind"] == kind) & (c["group"] == group) & (c["step"] == step)
        dur = s.end_ps[m] - s.start_ps[m]
        per_step.append(max(dur[c["chip"][m] == chip].sum() for chip in range(sim.hw.num_chips)))
    return float(np.mean(per_step))


def lost_overlap_ps(sim, serialized: int) -> float:
    """What the k serialized groups stop overlapping, per step, from the task durations."""
    groups = len(sim.groups)
    return sum(
        collective_ps(sim, A2A_FWD, g) + collective_ps(sim, A2A_BWD, g + 1) for g in range(min(serialized, groups - 1))
    )


@pytest.mark.parametrize("k", [1, 2])
def test_serializing_groups_costs_at_least_the_overlap_it_loses(small_raw, k):
    free = simulate(config_from_dict(three_groups(small_raw, 0)))
    serial = simulate(config_from_dict(three_groups(small_raw, k)))
    assert serial.graph.dur_ps == free.graph.dur_ps  # same work: only the order changes
    lost = lost_overlap_ps(serial, k)
    assert lost > 0.05 * step_time_ps(free)  # a visible share of the step, not noise
    rise = step_time_ps(serial) - step_time_ps(free)
    assert rise >= 0.98 * lost
    # and not more than the exposed collectives plus the SparseCores' imbalance
    assert rise <= 1.1 * lost


def test_serialized_phases_are_sequential_on_the_slice(small_raw):
    """Group g+1's lookups start after group g's activations left every chip; group g+1's
    gradients travel after group g's update finished on every SparseCore."""
    sim = simulate(config_from_dict(three_groups(small_raw, 2)))
    c, s = sim.graph.columns(), sim.schedule

    def span(step: int, kind: int, group: int) -> tuple[int, int]:
        m = (c["step"] == step) & (c["kind"] == kind) & (c["group"] == group)
        return int(s.start_ps[m].min()), int(s.end_ps[m].max())

    for step in range(sim.cfg.steps):
        for g in range(2):
            fwd_end = max(span(step, SC_FWD, g)[1], span(step, A2A_FWD, g)[1])
            assert span(step, SC_FWD, g + 1)[0] >= fwd_end
            assert span(step, A2A_BWD, g + 1)[0] >= span(step, SC_BWD, g)[1]
            assert span(step, SC_BWD, g + 1)[0] >= span(step, SC_BWD, g)[1]


def test_unserialized_groups_overlap_collectives_with_lookups(small_raw):
    """Without serialization group 0's activation all-to-all runs under group 1's lookups
    (the overlap serialization gives up), so the test above measures something real."""
    sim = simulate(config_from_dict(three_groups(small_raw, 0)))
    c, s = sim.graph.columns(), sim.schedule
    m_a2a = (c["kind"] == A2A_FWD) & (c["group"] == 0) & (c["step"] == 2)
    m_sc = (c["kind"] == SC_FWD) & (c["group"] == 1) & (c["step"] == 2)
    assert s.start_ps[m_a2a].min() < s.end_ps[m_sc].max()
    assert s.start_ps[m_sc].min() < s.end_ps[m_a2a].max()

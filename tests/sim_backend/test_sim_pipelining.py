"""Pipelining (SparseCore guide §5): never slower than the strict order, and in the documented order.

The document's pipelined flow: step i+1's SC forward runs while the TensorCore works on
step i, step i's SC backward after it (gradients visible at step i+2); up to 2x lower
device step time. On ICI, step i's dense gradient sync gates the TensorCore's step i+1,
its embedding gradients only step i+2's lookups: pipelined, the emulator sends the sync
first when the TensorCore's step is the longer chain (docs/emulator.md "Pipelining").
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sim_backend.config import config_from_dict
from sim_backend.config_load import load_config
from sim_backend.emulator import simulate
from sim_backend.metrics import step_time_ps
from sim_backend.stepgraph import A2A_BWD, ALLREDUCE, SC_BWD, SC_FWD
from tests.sim_backend.conftest import CONFIG_DIR

PIPELINING_OFF = "tf_xla_disable_full_embedding_pipelining"


def workload(gen: str, chips: int, tables: int, widths: list[int], dist: str, threads: int, depth: int) -> dict:
    """An untuned workload: one hand-set limit for every stack (some minibatch), small dense
    part, 5 steps."""
    feature = {"zipf": {"distribution": "zipf", "zipf_exponent": 1.1}, "hot_set": {"distribution": "hot_set"}}[dist]
    return {
        "name": "untuned",
        "seed": 1,
        "steps": 5,
        "global_batch": 1024,
        "hardware": {"generation": gen, "num_chips": chips},
        "host": {"num_threads": threads},
        "dense": {"num_dense_features": 13, "bottom_mlp": [256, 64], "top_mlp": [256, 1], "cross_layers": 1},
        "sparsecore": {
            "max_ids_per_chip_per_sample": 4096,
            "max_ids_per_partition": 4096,
            "max_unique_ids_per_partition": 2048,
        },
        "flags": {"maximum_parallel_iterations": depth},
        "tables": [
            {"name": f"t{i}", "vocab": 20000 + 100 * i, "width": widths[i % len(widths)]} for i in range(tables)
        ],
        "features": [{"name": f"f{i}", "table": f"t{i}", "multi_hot": 4, **feature} for i in range(tables)],
    }


SWEEP = {
    "v6e x2, 100 narrow zipf tables, host-bound": workload("v6e", 2, 100, [1, 2, 4, 8], "zipf", 2, 2),
    "v5p x4, 26 hot-set tables": workload("v5p", 4, 26, [64], "hot_set", 16, 2),
    "v4 x1, 2 wide zipf tables, no prefetch": workload("v4", 1, 2, [128], "zipf", 4, 1),
    "v5p x8, 50 mixed tables": workload("v5p", 8, 50, [8, 32, 128], "zipf", 8, 4),
    "v6e x1, 10 hot-set tables": workload("v6e", 1, 10, [16, 32], "hot_set", 1, 2),
}


def both(raw: dict):
    on, off = (
        dict(raw, flags={**raw["flags"], PIPELINING_OFF: False}),
        dict(raw, flags={**raw["flags"], PIPELINING_OFF: True}),
    )
    return simulate(config_from_dict(on)), simulate(config_from_dict(off))


@pytest.mark.parametrize("name", list(SWEEP))
def test_pipelining_is_never_slower_than_the_strict_order(name):
    on, off = both(SWEEP[name])
    assert step_time_ps(on) <= step_time_ps(off) * 1.005
    assert on.schedule.end_ps.max() <= off.schedule.end_ps.max() * 1.005


def tuned(steps: int = 6, pipelining: bool = True):
    over = [f"steps={steps}", f"flags.{PIPELINING_OFF}={str(not pipelining).lower()}"]
    return simulate(load_config(os.path.join(CONFIG_DIR, "tuned.toml"), over))


def test_the_dense_all_reduce_is_not_queued_behind_embedding_gradients():
    """Pipelining on, TensorCore-bound (tuned.toml): step i's all-reduce gates the
    TensorCore's step i+1, its embedding gradients only step i+2's lookups; on every
    chip's ICI the all-reduce goes first."""
    sim = tuned()
    c, s = sim.graph.columns(), sim.schedule
    for step in range(sim.cfg.steps - 1):  # the last step: no TensorCore step follows
        for chip in range(sim.hw.num_chips):
            mine = (c["step"] == step) & (c["chip"] == chip)
            assert s.start_ps[mine & (c["kind"] == ALLREDUCE)].min() < s.start_ps[mine & (c["kind"] == A2A_BWD)].min()


def test_sparsecore_runs_the_next_forward_before_the_update():
    """The document's flow: SC/F_i+1 overlaps TC work of step i, SC/B_i comes after it."""
    sim = tuned()
    c, s = sim.graph.columns(), sim.schedule
    for step in range(sim.cfg.steps - 1):
        for r in np.unique(c["resource"][c["kind"] == SC_FWD]):
            on_sc = c["resource"] == r
            next_fwd = s.end_ps[on_sc & (c["kind"] == SC_FWD) & (c["step"] == step + 1)].max()
            update = s.start_ps[on_sc & (c["kind"] == SC_BWD) & (c["step"] == step)].min()
            assert next_fwd <= update


def test_pipelining_gain_on_the_tuned_config():
    """tuned.toml is TensorCore-bound: pipelined, the SparseCore and the embedding
    all-to-alls hide under the dense step, so the gain is 1 + (hidden work) / (step)."""
    on, off = tuned(12, True), tuned(12, False)
    assert step_time_ps(off) / step_time_ps(on) > 1.3

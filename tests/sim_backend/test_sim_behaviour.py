"""Behaviour the SparseCore guide predicts, checked on small workloads.

Times come from the simulated clock, never the wall clock.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.config import config_from_dict
from sim_backend.emulator import simulate
from sim_backend.metrics import step_time_ps, union_length
from sim_backend.recording.instrument import write_trace
from sim_backend.stepgraph import (
    A2A_BWD,
    A2A_FWD,
    ALLREDUCE,
    HOST,
    INFEED,
    SC_BWD,
    SC_FWD,
    TC_BWD,
    TC_FWD,
)


def run(raw: dict):
    return simulate(config_from_dict(raw))


def busy_per_step(sim, kinds, chip=0, core=None) -> float:
    """Mean per-step busy time of tasks of `kinds` on one resource of chip `chip`."""
    c = sim.graph.columns()
    m = np.isin(c["kind"], kinds) & (c["chip"] == chip)
    if core is not None:
        m &= c["sc"] == core
    return float((sim.schedule.end_ps[m] - sim.schedule.start_ps[m]).sum()) / sim.cfg.steps


def fast_comm(raw: dict) -> dict:
    """Host and ICI out of the way: prefetch deep, host and links fast."""
    raw = copy.deepcopy(raw)
    raw["steps"] = 8
    raw["global_batch"] = 2048
    raw["flags"]["maximum_parallel_iterations"] = 4
    raw["host"]["num_threads"] = 16
    raw["hardware"]["ici_bandwidth_bytes_per_s"] = 1e15
    raw["cost"] = {"host_ps_per_id": 1, "host_task_overhead_ps": 1000, "ici_latency_ps": 1000}
    # limits near the observed buffers (SMALL's 4096 would make the SparseCores sort mostly
    # empty buffer slots, docs/emulator.md "Cost model"), so TC work can reach 5x SC work
    # (the stack big_mid sees up to 489 / 258 per partition, tiny 118 / 1)
    raw["sparsecore"]["max_ids_per_partition"] = 576
    raw["sparsecore"]["max_unique_ids_per_partition"] = 320
    return raw


def balance(raw: dict, tc_over_sc: float) -> dict:
    """Scale TensorCore efficiency until TC work per step = tc_over_sc x SC work."""
    raw = copy.deepcopy(raw)
    raw["flags"]["tf_xla_disable_full_embedding_pipelining"] = True
    eff = 0.5
    for _ in range(4):
        raw["cost"]["tc_efficiency"] = eff
        sim = run(raw)
        sc = busy_per_step(sim, (SC_FWD, SC_BWD), core=0)
        tc = busy_per_step(sim, (TC_FWD, TC_BWD, ALLREDUCE))
        eff *= tc / (tc_over_sc * sc)
    return raw


def pipelining_speedup(raw: dict) -> float:
    off = copy.deepcopy(raw)
    off["flags"]["tf_xla_disable_full_embedding_pipelining"] = True
    on = copy.deepcopy(raw)
    on["flags"]["tf_xla_disable_full_embedding_pipelining"] = False
    return step_time_ps(run(off)) / step_time_ps(run(on))


def test_pipelining_gives_1_5_to_2x_when_sc_and_tc_are_balanced(small_raw):
    raw = balance(fast_comm(small_raw), 1.0)
    sim = run(raw)
    sc = busy_per_step(sim, (SC_FWD, SC_BWD), core=0)
    tc = busy_per_step(sim, (TC_FWD, TC_BWD, ALLREDUCE))
    assert sc == pytest.approx(tc, rel=0.05)
    assert 1.5 <= pipelining_speedup(raw) <= 2.0


@pytest.mark.parametrize("tc_over_sc", [0.2, 0.5, 2.0, 5.0])
def test_pipelining_is_never_worse_when_unbalanced(small_raw, tc_over_sc):
    raw = balance(fast_comm(small_raw), tc_over_sc)
    assert pipelining_speedup(raw) >= 1.0


def test_pipelining_is_only_a_dependency(small_raw):
    """Same tasks and durations with pipelining on and off: only the waits differ."""
    on, off = copy.deepcopy(small_raw), copy.deepcopy(small_raw)
    off["flags"]["tf_xla_disable_full_embedding_pipelining"] = True
    a, b = run(on).graph, run(off).graph
    assert a.kind == b.kind and a.dur_ps == b.dur_ps and a.resource == b.resource
    assert a.waits != b.waits


def single_table(raw: dict, **feature) -> dict:
    raw = copy.deepcopy(raw)
    raw["tables"] = [{"name": "t", "vocab": 50_000, "width": 32}]
    raw["features"] = [{"name": "f", "table": "t", "multi_hot": 16, **feature}]
    raw["sparsecore"]["max_unique_ids_per_partition"] = 1_000_000  # only max_ids binds
    raw["hardware"]["spmem_bytes_per_tile"] = 1 << 24  # room for that limit's SPMEM buffers
    return raw


def _reference_steps(raw: dict) -> list[dict]:
    """The plain-Python reference (test_sim_preprocess.reference) of every step of `raw`."""
    from sim_backend.generate import generate_step
    from tests.sim_backend.test_sim_preprocess import reference

    cfg = config_from_dict(raw)
    hw = run(raw).hw
    return [reference(raw, generate_step(cfg, s), hw.num_chips, hw.sparsecores_per_chip) for s in range(cfg.steps)]


def test_limits_below_observed_give_the_predicted_minibatches(small_raw, tmp_path):
    raw = single_table(small_raw, distribution="uniform")
    observed = [sr.groups[0].ids_sp for sr in run(raw).steps]
    limit = int(max(o.max() for o in observed)) // 3  # a few minibatches; one hash bucket fits
    raw["sparsecore"]["max_ids_per_partition"] = limit
    sim = run(raw)
    predicted = [ref["minibatches"] for ref in _reference_steps(raw)]
    assert min(predicted) >= 3
    assert [sr.minibatches for sr in sim.steps] == predicted
    # and the trace shows it: SC forward ops per SparseCore per step, minibatch indices
    path = str(tmp_path / "t.sctrace")
    write_trace(sim, path, "mb", "mb", {}, {}, "test")
    tr = read_trace(path)
    ev, names = tr.data["events"], np.array(tr.strings, dtype=object)
    fwd = names[ev["name"]] == "SparseDenseMatmulOp"
    n_sc = sim.hw.num_total_sparse_cores
    per_step = np.bincount(ev["step"][fwd], minlength=sim.cfg.steps)
    assert per_step.tolist() == [p * n_sc for p in predicted]
    ps = tr.data["partition_stats"]
    pairs = set(zip(ps["step"].tolist(), ps["minibatches"].tolist(), strict=True))
    assert sorted(pairs) == list(enumerate(predicted))
    assert (ps["max_ids_per_partition"] == limit).all()


def test_with_dropping_the_dropped_count_equals_the_overflow(small_raw, tmp_path):
    """Minibatching off: a buffer keeps its first `limit` IDs in sorted order; every ID past
    them is dropped, counted with its repeats in its bag (as jax-tpu-embedding counts)."""
    raw = single_table(small_raw, distribution="zipf", zipf_exponent=1.2)
    observed = [sr.groups[0].ids_sp for sr in run(raw).steps]
    limit = int(np.median(observed[0]))
    raw["sparsecore"].update(max_ids_per_partition=limit, allow_id_dropping=True, enable_minibatching=False)
    sim = run(raw)
    overflow = [int(np.maximum(o - limit, 0).sum()) for o in observed]  # entries past the limit
    assert min(overflow) > 0
    refs = _reference_steps(raw)
    expected = [sum(e["count"] for g in ref["groups"] for e in g["entries"] if e["dropped"]) for ref in refs]
    assert [sum(1 for g in ref["groups"] for e in g["entries"] if e["dropped"]) for ref in refs] == overflow
    assert [sr.dropped_ids for sr in sim.steps] == expected
    assert all(d >= o for d, o in zip(expected, overflow, strict=True))
    path = str(tmp_path / "t.sctrace")
    write_trace(sim, path, "drop", "drop", {}, {}, "test")
    tr = read_trace(path)
    ev, names = tr.data["events"], np.array(tr.strings, dtype=object)
    fwd = names[ev["name"]] == "SparseDenseMatmulOp"
    assert int(ev["dropped_ids"][fwd].sum()) == sum(expected)
    assert int(tr.data["partition_stats"]["dropped_ids"].sum()) == sum(expected)


def max_over_mean_partition_load(sim) -> float:
    load = sum(sr.groups[0].ids_sp.sum(axis=0) for sr in sim.steps)
    return float(load.max() / load.mean())


def test_skewed_ids_raise_the_max_over_mean_partition_load(small_raw):
    uniform = run(single_table(small_raw, distribution="uniform"))
    zipf = run(single_table(small_raw, distribution="zipf", zipf_exponent=1.3))
    hot = run(single_table(small_raw, distribution="hot_set", hot_set_size=2, hot_fraction=0.5))
    u, z, h = (max_over_mean_partition_load(s) for s in (uniform, zipf, hot))
    assert u < 1.1
    assert z > u + 0.2
    assert h > u + 0.4


def test_stacking_spreads_hot_rows_of_different_tables(small_raw):
    """Step 8 of the limits procedure: the i-th table of a stack is rotated by i x 4 shards (the
    SparseCores of a chip), so on 4 chips the hot rows of 4 tables land on 4 chips."""
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["num_chips"] = 4
    raw["tables"] = [{"name": f"t{i}", "vocab": 1000 * (i + 1), "width": 32} for i in range(4)]
    raw["features"] = [
        {
            "name": f"f{i}",
            "table": f"t{i}",
            "multi_hot": 4,
            "distribution": "hot_set",
            "hot_set_size": 1,
            "hot_fraction": 0.9,
        }
        for i in range(4)
    ]
    stacked = run(raw)
    raw["sparsecore"]["disable_table_stacking"] = True
    unstacked = run(raw)

    def sc_load(sim):
        return sum(g.ids_mp.sum(axis=0) for sr in sim.steps for g in sr.groups)

    s, u = sc_load(stacked), sc_load(unstacked)
    assert s.sum() == u.sum()
    assert u.max() / u.mean() > 2 * (s.max() / s.mean())


def idle_intervals(sim, chip: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Intervals inside the run when no device resource of the chip is busy."""
    c = sim.graph.columns()
    m = np.isin(c["kind"], (SC_FWD, SC_BWD, TC_FWD, TC_BWD, A2A_FWD, A2A_BWD, ALLREDUCE)) & (c["chip"] == chip)
    st, en = sim.schedule.start_ps[m], sim.schedule.end_ps[m]
    o = np.argsort(st)
    st, en = st[o], np.maximum.accumulate(en[o])
    gap = st[1:] > en[:-1]
    return en[:-1][gap], st[1:][gap]


def covered_by(a: np.ndarray, b: np.ndarray, st: np.ndarray, en: np.ndarray) -> int:
    """Length of the intervals [a, b) covered by the union of [st, en)."""
    total = 0
    for lo, hi in zip(a.tolist(), b.tolist(), strict=True):
        total += union_length(st, en, lo, hi)
    return total


def test_fewer_prefetched_steps_turn_a_slow_host_into_device_idle_gaps(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["steps"] = 10
    raw["host"]["num_threads"] = 1
    raw["flags"]["maximum_parallel_iterations"] = 4
    raw["cost"] = {"host_ps_per_id": 0, "host_task_overhead_ps": 0}
    fast = run(raw)
    device_step = step_time_ps(fast)
    ids_per_step = sum(int(sr.raw_ids_per_sc.sum()) for sr in fast.steps) / raw["steps"]
    # host needs 90% of a device step: hidden with prefetch, exposed without
    raw["cost"] = {"host_ps_per_id": int(0.9 * device_step / ids_per_step), "host_task_overhead_ps": 0}
    deep = run(raw)
    raw["flags"]["maximum_parallel_iterations"] = 1
    shallow = run(raw)
    assert step_time_ps(deep) == pytest.approx(device_step, rel=0.05)
    assert step_time_ps(shallow) > 1.2 * device_step
    a_deep, b_deep = idle_intervals(deep)
    a, b = idle_intervals(shallow)
    idle_deep, idle = int((b_deep - a_deep).sum()), int((b - a).sum())
    assert idle > 2 * idle_deep + 0.1 * device_step * (raw["steps"] - 1)
    # the gaps are the host's: preprocessing or the host->HBM copy runs through them
    c = shallow.graph.columns()
    host = np.isin(c["kind"], (HOST, INFEED))
    assert covered_by(a, b, shallow.schedule.start_ps[host], shallow.schedule.end_ps[host]) >= 0.99 * idle


def test_serialized_tables_run_one_group_after_another(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["sparsecore"]["disable_table_stacking"] = True  # 3 groups: big, mid, tiny
    # pipelining off: the SparseCore work is on the step's chain, so its cost shows (with
    # pipelining on it hides under the TensorCore here; test_sim_serialization.py has more)
    raw["flags"]["tf_xla_disable_full_embedding_pipelining"] = True
    free = run(raw)
    raw["flags"]["xla_sc_num_serialized_tables_to_optimize_hbm"] = 3
    serial = run(raw)
    c, s = serial.graph.columns(), serial.schedule
    for kind in (SC_FWD, SC_BWD):
        for step in range(raw["steps"]):
            m = (c["kind"] == kind) & (c["step"] == step)
            ends = [s.end_ps[m & (c["group"] == g)].max() for g in range(3)]
            starts = [s.start_ps[m & (c["group"] == g)].min() for g in range(3)]
            assert starts[1] >= ends[0] and starts[2] >= ends[1]
    assert step_time_ps(serial) > step_time_ps(free)
    assert serial.graph.dur_ps == free.graph.dur_ps  # same work, only the order differs


@pytest.mark.parametrize("on_host, fast", [(True, False), (False, False), (True, True)])
def test_table_initialization_precedes_step_0(small_raw, on_host, fast):
    raw = copy.deepcopy(small_raw)
    raw["include_initialization"] = True
    raw["sparsecore"].update(initialize_tables_on_host=on_host, enable_fast_table_initialization=fast)
    sim = run(raw)
    c, s = sim.graph.columns(), sim.schedule
    init = c["kind"] == 0
    assert init.sum() == sim.hw.num_chips
    device = np.isin(c["kind"], (SC_FWD, TC_FWD)) & (c["step"] == 0)
    assert s.start_ps[device].min() >= s.end_ps[init].max()
    kind, _, _ = sim.resources.describe(int(c["resource"][init][0]))
    assert kind == ("infeed" if on_host and not fast else "tc")

"""Table stacking in the emulator: stack membership and names (jax-tpu-embedding's rules, also
checked against the library itself in test_library_oracle.py), the recorded layout, and the
5-100 sweet spot.

The sweep records one workload of 200 small tables with 1..200 tables per stack and
checks that step time is U-shaped with its minimum inside the doc's 5-100 range, as a
consequence of the model: per-op overhead falls with bigger stacks, while the
all-to-all of one big stack cannot hide behind another stack's SparseCore work.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.config import config_from_dict
from sim_backend.emulator import setup, simulate
from sim_backend.metrics import step_time_ps
from sim_backend.recording.record import record_run
from sim_backend.stacking import stack_name
from sim_backend.stepgraph import A2A_BWD, SC_BWD, SC_FWD
from tests.sim_backend.conftest import CONFIG_DIR
from tests.sim_backend.test_sim_pathologies import documented_fix
from tests.sim_backend.test_sim_record import small_file

SWEEP = (1, 2, 5, 10, 25, 50, 100, 200)


def many_tables(per_stack: int, n: int = 200, pipelining: bool = False) -> dict:
    """200 tables of width 64 (4 IDs per sample each), a small dense part, v5p x4.

    Pipelining off puts every step's SparseCore work, all-to-alls and dense work on one
    chain, so what stacking changes shows in the step time.
    """
    return {
        "name": "many_tables",
        "steps": 4,
        "global_batch": 4096,
        "hardware": {"generation": "v5p", "num_chips": 4},
        "host": {"num_threads": 32},
        "dense": {
            "num_dense_features": 13,
            "bottom_mlp": [64, 32],
            "top_mlp": [64, 1],
            "cross_layers": 1,
            "cross_low_rank": 32,
        },
        # limits that fit each stack's load (4 IDs per sample x 256 samples per SparseCore over 16
        # partitions: 64 per table and partition), so the sweep shows stacking, not minibatching;
        # no activation-memory split (max_tables_per_stack alone sizes the stacks)
        "sparsecore": {
            "max_tables_per_stack": per_stack,
            "max_ids_per_chip_per_sample": 1024,
            "max_ids_per_partition": 160 * (per_stack or n),
            "max_unique_ids_per_partition": 160 * (per_stack or n),
            "stack_activation_mem_bytes_limit": 1 << 40,
        },
        "flags": {"maximum_parallel_iterations": 2, "tf_xla_disable_full_embedding_pipelining": not pipelining},
        "tables": [{"name": f"t{i}", "vocab": 20000, "width": 64} for i in range(n)],
        "features": [{"name": f"f{i}", "table": f"t{i}", "multi_hot": 4} for i in range(n)],
    }


def reference_stacks(raw: dict) -> list[list[str]]:
    """Independent stacking: bucket by (width rounded up to 8, optimizer, combiner, dtype) in
    the order features first read the tables, split first-fit by activation bytes per
    SparseCore (2 MiB unless set), then chunk by max_tables_per_stack."""
    sc = raw.get("sparsecore", {})
    tables = {t["name"]: t for t in raw["tables"]}
    order = []
    for f in raw["features"]:
        if f["table"] not in order:
            order.append(f["table"])
    if sc.get("disable_table_stacking"):
        return [[n] for n in order]
    hw = raw["hardware"]
    n_sc = hw["num_chips"] * hw.get("sparsecores_per_chip", 2 if hw["generation"] == "v6e" else 4)
    per_sc = raw["global_batch"] // n_sc
    limit = sc.get("stack_activation_mem_bytes_limit", 2 * 1024 * 1024)
    buckets: dict[tuple, list[str]] = {}
    for n in order:
        t = tables[n]
        key = (
            (t.get("width", 128) + 7) // 8 * 8,
            t.get("optimizer", "adagrad"),
            t.get("combiner", "sum"),
            t.get("dtype", "f32"),
        )
        buckets.setdefault(key, []).append(n)
    act = {
        n: (tables[n].get("width", 128) + 7) // 8 * 8 * per_sc * 4 * sum(f["table"] == n for f in raw["features"])
        for n in order
    }
    out = []
    for names in buckets.values():
        split: list[list[str]] = []
        for n in names:
            fits = [c for c in split if sum(act[m] for m in c) + act[n] <= limit]
            if fits:
                fits[0].append(n)
            else:
                split.append([n])
        out += split
    k = sc.get("max_tables_per_stack", 0)
    return [s[i : i + (k or len(s))] for s in out for i in range(0, len(s), k or len(s))]


def layout_events(path: str) -> list[dict]:
    """The table_layout events of a trace with their arguments, in file order."""
    tr = read_trace(path)
    ev = tr.data["events"]
    strings = np.array(tr.strings, dtype=object)
    idx = np.flatnonzero(strings[ev["name"]] == "table_layout")
    out = [
        {
            "stack": strings[ev["table"][i]],
            "category": strings[ev["category"][i]],
            "bytes": int(ev["bytes"][i]),
            "dur_ps": int(ev["dur_ps"][i]),
        }
        for i in idx
    ]
    keys, kinds = strings[ev["arg_key"]], ev["arg_kind"]
    pos = {int(i): n for n, i in enumerate(idx)}
    for e, k, kind, vi, vs in zip(ev["arg_event"], keys, kinds, ev["arg_int"], ev["arg_string"], strict=True):
        if int(e) in pos:
            out[pos[int(e)]][k] = strings[vs] if kind == 3 else int(vi)
    return out


# -- stack sizes -------------------------------------------------------------------------------


@pytest.mark.parametrize("per_stack", [0, 1, 2, 3])
def test_max_tables_per_stack_splits_in_config_order(small_raw, per_stack):
    raw = copy.deepcopy(small_raw)
    raw["tables"].append({"name": "big2", "vocab": 999, "width": 32})
    raw["features"].append({"name": "f_big2", "table": "big2"})
    raw["sparsecore"]["max_tables_per_stack"] = per_stack
    _, _, groups, _ = setup(config_from_dict(raw))
    assert [list(g.tables) for g in groups] == reference_stacks(raw)
    assert [g.name for g in groups] == ["_".join(g.tables) for g in groups]


def test_activation_memory_splits_a_stack_first_fit(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["tables"] = [{"name": f"w{i}", "vocab": 100, "width": w} for i, w in enumerate([32, 30, 32, 64, 25, 32])]
    raw["features"] = [{"name": f"f{i}", "table": f"w{i}"} for i in range(6)]
    # 32 samples per SparseCore: a width-32 table's activations are 32 x 32 x 4 = 4 KiB
    raw["sparsecore"]["stack_activation_mem_bytes_limit"] = 3 * 4096
    _, _, groups, _ = setup(config_from_dict(raw))
    assert [list(g.tables) for g in groups] == reference_stacks(raw) == [["w0", "w1", "w2"], ["w4", "w5"], ["w3"]]


def test_long_stack_names_are_cut_and_hashed_as_the_library_does():
    names = [f"table_number_{i}" for i in range(10)]
    joined = "_".join(names)
    import hashlib

    assert stack_name(names) == joined[:50] + "..." + hashlib.sha256(joined.encode()).hexdigest()[:12]
    assert stack_name(["only"]) == "only" and stack_name(["a", "b"]) == "a_b"


def test_stack_limits_are_never_scaled_or_summed(small_raw):
    """A stack's limit is what the config gives the stack: a limit its buffers cannot hold in
    SPMEM fails to compile (the library does not shrink it), whatever the stack's size."""
    raw = copy.deepcopy(small_raw)
    raw["sparsecore"].update(max_ids_per_partition=123, max_unique_ids_per_partition=45)
    _, _, groups, _ = setup(config_from_dict(raw))
    assert {(g.max_ids_per_partition, g.max_unique_ids_per_partition) for g in groups} == {(123, 45)}


# -- the layout in the trace -------------------------------------------------------------------


def test_layout_events_match_an_independent_count(small_raw, tmp_path):
    raw = copy.deepcopy(small_raw)
    raw["tables"] += [
        {"name": "narrow", "vocab": 10, "width": 1},
        {"name": "half", "vocab": 33, "width": 3, "dtype": "bf16"},
    ]
    raw["features"] += [{"name": "f_narrow", "table": "narrow"}, {"name": "f_half", "table": "half", "multi_hot": 2}]
    res = record_run(small_file(tmp_path, raw), [], "layout", 2, str(tmp_path / "out"))
    events = layout_events(res.trace_path)
    stacks = reference_stacks(raw)
    n_sc = 8  # 2 chips x 4 SparseCores
    assert len(events) == len(raw["tables"])
    by_table = {e["table_name"]: e for e in events}
    for members in stacks:
        for pos, name in enumerate(members):
            e = by_table[name]
            assert e["stack"] == stack_name(members)
            assert e["stack_tables"] == len(members) and e["stack_position"] == pos
            assert len({by_table[m]["stack"] for m in members}) == 1
    assert {e["category"] for e in events} == {"compile"} and {e["dur_ps"] for e in events} == {0}
    for t in raw["tables"]:
        e = by_table[t["name"]]
        dtype_bytes = 2 if t.get("dtype") == "bf16" else 4
        padded_row = -(-t["width"] * dtype_bytes // 32) * 32
        assert e["vocab"] == t["vocab"] and e["padded_vocab"] == -(-t["vocab"] // (8 * n_sc)) * 8 * n_sc
        assert e["width"] == t["width"] and e["padded_row_bytes"] == padded_row
        assert e["padded_width"] == padded_row // dtype_bytes
        assert e["bytes"] == e["padded_vocab"] * padded_row
    assert by_table["narrow"]["padded_width"] == 8  # width 1 f32: 4 of 32 bytes used, 7/8 waste
    assert by_table["half"]["padded_width"] == 16 and by_table["half"]["padded_vocab"] == 64
    assert by_table["tiny"]["padded_vocab"] == 64
    assert by_table["mid"]["features"] == 2  # feature stacking: two features read it


# -- what stacking changes in time ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep() -> dict[int, object]:
    return {k: simulate(config_from_dict(many_tables(k))) for k in SWEEP}


def test_sweep_is_u_shaped_with_its_minimum_inside_5_to_100(sweep):
    step = {k: step_time_ps(sim) for k, sim in sweep.items()}
    best = min(step, key=step.get)
    assert 5 <= best <= 100, step
    assert step[1] > 2 * step[best] and step[200] > 1.1 * step[best], step
    # falling from 1 table per stack to the minimum, rising after it
    left = [step[k] for k in SWEEP if k <= best]
    assert all(a > b for a, b in zip(left, left[1:], strict=False)), step


def test_per_op_overhead_falls_and_exposed_all_to_all_grows_with_stack_size(sweep):
    ops, exposed = {}, {}
    for k, sim in sweep.items():
        cols = sim.graph.columns()
        sc = np.isin(cols["kind"], (SC_FWD, SC_BWD))
        ops[k] = sc.sum() / sim.cfg.steps / sim.hw.num_total_sparse_cores
        # gradient all-to-all still running after the first embedding update on chip 0 began
        s = sim.schedule
        step1 = cols["step"] == 1
        a2a = (cols["kind"] == A2A_BWD) & step1 & (cols["chip"] == 0)
        upd = (cols["kind"] == SC_BWD) & step1 & (cols["chip"] == 0)
        exposed[k] = s.start_ps[upd].min() - s.start_ps[a2a].min()
    assert [ops[k] for k in SWEEP] == [2 * -(-200 // k) for k in SWEEP]  # forward + backward
    # one stack: its update waits for all gradients; many: the first stack's alone
    assert exposed[200] > 5 * exposed[10]


# -- the bundled pathologies -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["too_few_stacked", "too_many_stacked", "tiny_widths"])
def test_stacking_pathology_and_its_one_flag_fix(name, tmp_path):
    path = os.path.join(CONFIG_DIR, f"{name}.toml")
    sick = record_run(path, [], None, 6, str(tmp_path / "sick"))
    fixed = record_run(path, documented_fix(name), "fixed", 6, str(tmp_path / "fixed"))
    before, after = layout_events(sick.trace_path), layout_events(fixed.trace_path)
    if name == "too_few_stacked":
        assert max(e["stack_tables"] for e in before) == 1 and len(before) == 26
        assert {e["stack_tables"] for e in after} == {16, 10}  # 2 MiB of activations per SparseCore at most
        assert fixed.mean_step_time_ps < 0.9 * sick.mean_step_time_ps
    if name == "too_many_stacked":
        assert {e["stack_tables"] for e in before} == {120}
        assert max(e["stack_tables"] for e in after) <= 100
    if name == "tiny_widths":
        t20 = [e for e in before if e["table_name"] == "t20"][0]
        assert (t20["width"], t20["padded_width"]) == (1, 8)
        assert all(e["padded_width"] == e["width"] for e in after)

"""The scenario generator (whatif/scenarios): each cause's injection and removal differ in the
config, labels are verified by experiment, and the scoring's figures match hand-computed ones."""

from __future__ import annotations

import pytest

from whatif.configs import flatten
from whatif.scenarios.causes import BY_NAME, CAUSES, DERIVE
from whatif.scenarios.runner import Recorded, ScenarioSpec, build, effect, run_scenario, sample_scenarios
from whatif.scenarios.scoring import fix_keys, score
from whatif.scenarios.workloads import sample_base

BIG_BASE = next(s for s in range(100) if len(sample_base(s)["tables"]) >= 60)  # every cause applies


def test_sampling_is_a_pure_function_of_n_and_seed() -> None:
    a, b = sample_scenarios(50, 3), sample_scenarios(50, 3)
    assert a == b and a != sample_scenarios(50, 4)
    assert {s.kind for s in a} == {"healthy", "single", "pair"}
    for s in a:
        assert len(s.causes) == {"healthy": 0, "single": 1, "pair": 2}[s.kind]
        base = sample_base(s.seed)
        assert all(BY_NAME[c].applies(base) for c in s.causes)
        if s.kind == "pair":
            assert BY_NAME[s.causes[0]].group != BY_NAME[s.causes[1]].group


@pytest.mark.parametrize("cause", [c.name for c in CAUSES])
def test_injection_and_removal_differ_in_the_config(cause: str) -> None:
    base = sample_base(BIG_BASE)
    c = BY_NAME[cause]
    with_it, scale = build(base, [c])
    without, removed_scale = build(base, [], removed=c)
    changed = {
        k for k in set(flatten(with_it)) | set(flatten(without)) if flatten(with_it).get(k) != flatten(without).get(k)
    }
    assert changed or scale != removed_scale, f"{cause}: injecting and removing it give the same config"
    if c.remove is None:  # removing it is leaving it out: back to the base
        assert without == base
    assert build(base, [c]) == build(base, [c])  # deterministic


def test_a_pair_removes_one_cause_only() -> None:
    base = sample_base(BIG_BASE)
    a, b = BY_NAME["pipelining_off"], BY_NAME["host_threads_short"]
    both, _ = build(base, [a, b])
    only_b, _ = build(base, [b], removed=a)
    assert both["host"]["num_threads"] == only_b["host"]["num_threads"] == 1
    assert both["flags"]["tf_xla_disable_full_embedding_pipelining"] is True
    assert only_b["flags"]["tf_xla_disable_full_embedding_pipelining"] is False


def test_effects_need_a_difference() -> None:
    cause = BY_NAME["limits_too_low"]
    assert effect(None, cause, Recorded(1, False, 16), Recorded(2, False, 8))[0]  # type: ignore[arg-type]
    assert not effect(None, cause, Recorded(1, False, 8), Recorded(2, False, 8))[0]  # type: ignore[arg-type]
    assert not effect(None, cause, Recorded(1, False, 16), Recorded(2, True, None, "oom"))[0]  # type: ignore[arg-type]
    nans = BY_NAME["nans"]
    assert effect(None, nans, Recorded(1, True, None, "NaN"), Recorded(2, False, 8))[0]  # type: ignore[arg-type]
    assert not effect(None, nans, Recorded(1, False, 8), Recorded(2, False, 8))[0]  # type: ignore[arg-type]


def test_a_scenario_verifies_its_label_and_is_analysed() -> None:
    out = run_scenario(ScenarioSpec(0, 7, "single", ("limits_too_low",)), verify=False)
    assert out["status"] == "ok" and out["effects"]["limits_too_low"]["verified"]
    assert out["expected"] == ["minibatching"]
    assert "minibatching" in {f["rule"] for f in out["findings"]}


def _result(causes: list[str], expected: list[str], findings: list[tuple[str, str]], status: str = "ok") -> dict:
    return {
        "causes": causes,
        "expected": expected,
        "status": status,
        "findings": [{"rule": r, "severity": s, "fix": None, "verified": None} for r, s in findings],
    }


def test_scoring_against_hand_computed_figures() -> None:
    results = [
        _result([], [], []),  # healthy, clean
        _result([], [], [("host_bound", "warning"), ("x_info", "info")]),  # healthy, one false alarm
        _result(["host_threads_short"], ["host_bound"], [("host_bound", "critical")]),  # TP
        _result(["pipelining_off"], ["not_pipelined"], [("host_bound", "warning")]),  # FN not_pipelined, FP host_bound
        _result(["limits_too_low"], ["minibatching"], [("minibatching", "info")]),  # FN, info only
        _result(["limits_too_low"], ["minibatching"], [("minibatching", "critical")], status="discarded"),
    ]
    s = score(results)
    assert (s["scenarios"], s["verified"], s["discarded"]) == (6, 5, 1)
    assert s["micro"] == {
        "tp": 1,
        "fp": 2,
        "fn": 2,
        "precision": round(1 / 3, 4),
        "recall": round(1 / 3, 4),
        "f1": round(1 / 3, 4),
    }
    hb = s["per_rule"]["host_bound"]
    assert (hb["positives"], hb["tp"], hb["fp"], hb["fn"], hb["precision"], hb["recall"]) == (1, 1, 2, 0, 0.3333, 1.0)
    assert s["per_rule"]["minibatching"]["info_only"] == 1 and s["per_rule"]["minibatching"]["recall"] == 0.0
    assert s["healthy"] == {
        "controls": 2,
        "with_false_finding": 1,
        "clean_share": 0.5,
        "false_rules": {"host_bound": 1},
    }
    assert s["confusion"]["pipelining_off"] == {"n": 1, "host_bound": 1}
    assert s["confusion"]["healthy"] == {"n": 2, "(none)": 1, "host_bound": 1}


def test_fix_match_generalises_tables_and_needs_a_faster_simulation() -> None:
    assert fix_keys({"set": {"tables.t3.width": 8}, "derive_limits": True}) == {"tables.*.width", DERIVE}
    finding = {
        "rule": "host_bound",
        "severity": "critical",
        "fix": {"set": {"host.num_threads": 2}},
        "verified": {"ci_high": -0.1},
    }
    wrong = {**finding, "fix": {"set": {"flags.maximum_parallel_iterations": 4}}, "verified": {"ci_high": -0.1}}
    slow = {**finding, "verified": {"ci_high": 0.01}}
    results = [
        {"causes": ["host_threads_short"], "expected": ["host_bound"], "status": "ok", "findings": [f]}
        for f in (finding, wrong, slow)
    ]
    fx = score(results)["fix"]
    assert (fx["true_findings_with_fix_expected"], fx["fix_matches"], fx["fix_matches_and_faster"]) == (3, 2, 1)


def test_skew_injection_puts_every_tables_hot_row_where_only_the_shuffle_spreads_it(tmp_path) -> None:
    """skew_without_shuffle makes row 0 each table's one hot ID. The library's stacking rotation
    (i x SparseCores per chip) sends it to SparseCore 0 of some chip for every table of a stack;
    the emulator's shuffle (sparsecore.shuffle_ids) sends table i's to floor(i x SCs / tables),
    one per SparseCore for 8 tables on 8. A hot set of SparseCores-per-chip IDs (the earlier 4)
    covered every SparseCore of a chip under the rotation already: nothing for the shuffle to do."""
    from sim_backend.config_load import load_config
    from sim_backend.hardware import resolve_hardware
    from sim_backend.stacking import table_rotations
    from whatif.configs import write_toml

    base = sample_base(0)
    base["hardware"] = {"generation": "v5p", "num_chips": 2}  # 4 SparseCores per chip, 8 in all
    base["tables"] = [{"name": f"t{i}", "vocab": 1000, "width": 8} for i in range(8)]
    base["features"] = [{"name": f"f{i}", "table": f"t{i}"} for i in range(8)]
    raw, _ = build(base, [BY_NAME["skew_without_shuffle"]])
    assert {(f["distribution"], f["hot_set_size"]) for f in raw["features"]} == {("hot_set", 1)}
    removed, _ = build(base, [], removed=BY_NAME["skew_without_shuffle"])
    sc_of_row0 = {}
    for name, r in (("cause", raw), ("removal", removed)):
        write_toml(r, str(tmp_path / f"{name}.toml"))
        cfg = load_config(str(tmp_path / f"{name}.toml"))
        hw = resolve_hardware("v5p", 2, {})
        names = [t.name for t in cfg.tables]
        sc_of_row0[name] = sorted({int(s) % hw.num_total_sparse_cores for s in table_rotations(cfg, names, hw)})
    assert sc_of_row0["cause"] == [0, 4]  # SparseCore 0 of chip 0 and of chip 1
    assert sc_of_row0["removal"] == list(range(8))


@pytest.mark.parametrize("seed", [40 * 1_000_003 + i for i in (32, 82, 121, 221, 245, 350)])
def test_memory_causes_fill_hbm_as_the_emulator_sizes_it(seed: int) -> None:
    """heap_pressure_dense: the widest top MLP whose static heap fits 87-91% of HBM (so the cause run
    neither stays below 85% nor runs out before step 0 whatever the embedding tables take), unless
    the tables alone already fill it; hbm_stack_pressure: static heap plus every group's stack (both
    passes, pipelined) at 88-94% of HBM. Sizes from the emulator's own static memory model."""
    from whatif.scenarios.causes import _stack_per_chip
    from whatif.scenarios.workloads import static_memory as _static_memory

    raw, _ = build(sample_base(seed), [BY_NAME["heap_pressure_dense"]])
    mem = _static_memory(raw)
    width = raw["dense"]["top_mlp"][0]
    assert mem.heap_static <= 0.91 * mem.hbm_capacity
    if width > 128:
        raw["dense"]["top_mlp"] = [width + 128] * 4 + [1]
        assert _static_memory(raw).heap_static > 0.87 * mem.hbm_capacity  # one step wider overshoots
    raw, _ = build(sample_base(seed), [BY_NAME["hbm_stack_pressure"]])
    mem = _static_memory(raw)
    if raw["sparsecore"]["max_unique_ids_per_partition"] > 256:
        share = (mem.heap_static + _stack_per_chip(raw, mem)) / mem.hbm_capacity
        assert 0.87 <= share <= 0.94

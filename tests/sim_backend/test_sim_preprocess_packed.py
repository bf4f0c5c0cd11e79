"""The packed preprocessing path (32-bit keys, dedup per bag) against the plain-Python reference.

`preprocess_step` without decoded entries counts stacks of fixed-size bags on the packed
path when no sample can exceed the chip cap; when nothing exceeds its limits that is all it
needs, else it sees the stacks entry by entry. Either way its counts, minibatches and drops
must equal the reference's exactly (test_sim_preprocess.py covers the entry path).
"""

from __future__ import annotations

import numpy as np
import pytest

from sim_backend import preprocess
from sim_backend.config import config_from_dict
from sim_backend.emulator import setup
from sim_backend.errors import PreprocessError
from sim_backend.generate import FeatureBatch, generate_step
from sim_backend.preprocess import preprocess_step
from tests.sim_backend.test_sim_preprocess import outcomes, random_limits, reference


def _fixed_variant(raw: dict, case: int) -> dict:
    """A random small workload whose bags all have a fixed size (the packed path's domain)."""
    rng = np.random.default_rng(1000 + case)
    raw = random_limits(raw, rng, 40, 30, None)
    for f in raw["features"]:
        f.pop("multi_hot_min", None)
    raw["features"][0]["multi_hot"] = int(rng.integers(2, 40))  # zipf bags: many repeats
    if case % 4 == 1:  # non-power-of-two SparseCore count: 2 chips x 3 SCs
        raw["hardware"]["sparsecores_per_chip"] = 3
        raw["global_batch"] = 66
    if case % 4 == 2:  # one chip of v6e: 2 SCs
        raw["hardware"] = {"generation": "v6e", "num_chips": 1}
    if case % 4 == 3:  # odd sub-batch (8 x 9 samples): runs of one sample, untagged
        raw["global_batch"] = 72
    return raw


def _expected(ref_group: dict, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Kept IDs and unique IDs per (minibatch, partition), from the reference's entries."""
    ids_mp = np.zeros(shape, dtype=np.int64)
    rows: dict[tuple[int, int, int], set] = {}
    for e in ref_group["entries"]:
        if not e["dropped"]:
            ids_mp[e["minibatch"], e["partition"]] += 1
            rows.setdefault((e["minibatch"], e["source_sc"], e["partition"]), set()).add(e["col"])
    unique_mp = np.zeros(shape, dtype=np.int64)
    for (m, _, p), cols in rows.items():
        unique_mp[m, p] += len(cols)
    return ids_mp, unique_mp


@pytest.mark.parametrize("case", range(16))
def test_packed_path_matches_reference(small_raw, case, monkeypatch):
    raw = _fixed_variant(small_raw, case)
    cfg = config_from_dict(raw)
    hw, _, groups, lay = setup(cfg)
    batches = generate_step(cfg, case % 4)
    ref = reference(raw, batches, hw.num_chips, hw.sparsecores_per_chip)

    def entry_path(*args, **kwargs):
        raise AssertionError("the entry path ran where the packed path applies")

    if not outcomes(ref):  # nothing over its limits: the packed path alone
        monkeypatch.setattr(preprocess, "group_keys", entry_path)
    try:
        got = preprocess_step(case % 4, batches, groups, lay, cfg.sparsecore)
    except PreprocessError:
        assert ref.get("error") == "overflow"
        return
    assert "error" not in ref
    assert len(got.groups) == len(ref["groups"])
    for rg, gg in zip(ref["groups"], got.groups, strict=True):
        np.testing.assert_array_equal(gg.ids_sp, rg["ids_sp"])
        np.testing.assert_array_equal(gg.unique_sp, rg["unique_sp"])
        assert gg.minibatches == rg["minibatches"]
        ids_mp, unique_mp = _expected(rg, gg.ids_mp.shape)
        np.testing.assert_array_equal(gg.ids_mp, ids_mp)
        np.testing.assert_array_equal(gg.unique_mp, unique_mp)
        dropped = np.zeros_like(gg.dropped_sp)
        for e in rg["entries"]:
            dropped[e["source_sc"], e["partition"]] += e["count"] if e["dropped"] else 0
        np.testing.assert_array_equal(gg.dropped_sp, dropped)


def test_packed_cases_cover_minibatching_dropping_and_errors(small_raw):
    """The cases above must reach minibatching, dropping and the overflow error."""
    seen = set()
    for case in range(16):
        raw = _fixed_variant(small_raw, case)
        cfg = config_from_dict(raw)
        hw, _, _, _ = setup(cfg)
        ref = reference(raw, generate_step(cfg, case % 4), hw.num_chips, hw.sparsecores_per_chip)
        seen |= outcomes(ref)
    assert seen >= {"minibatching", "dropping", "overflow"}, seen


def test_packed_bag_dedup_by_hand():
    """Bags of 3 on 2 SparseCores; repeats inside a bag count once, across bags each time."""
    raw = {
        "global_batch": 4,
        "hardware": {"generation": "v6e", "num_chips": 1},
        "sparsecore": {"max_ids_per_chip_per_sample": 8},
        "tables": [{"name": "t", "vocab": 10, "width": 8}],
        "features": [{"name": "f", "table": "t", "multi_hot": 3}],
    }
    cfg = config_from_dict(raw)
    _, _, groups, lay = setup(cfg)
    # samples 0, 1 go to SparseCore 0 and 2, 3 to SparseCore 1; partition = ID % 2
    fb = FeatureBatch(np.full(4, 3), np.array([1, 1, 2, 3, 1, 3, 4, 4, 4, 2, 5, 2]))
    res = preprocess_step(0, [fb], groups, lay, cfg.sparsecore)
    g = res.groups[0]
    # source 0 keeps {1, 2} and {3, 1}: partition 0 gets [2], partition 1 gets [1, 1, 3]
    # source 1 keeps {4} and {2, 5}: partition 0 gets [2, 4], partition 1 gets [5]
    assert g.ids_sp.tolist() == [[1, 3], [2, 1]]
    assert g.unique_sp.tolist() == [[1, 2], [2, 1]]
    assert res.kept_ids_per_sc.tolist() == [4, 3]
    assert res.raw_ids_per_sc.tolist() == [6, 6]

"""Host preprocessing against an independent plain-Python reference (exact equality).

The reference below walks samples and IDs one by one, following the documented rules
(DOMAIN.md §1 and sim_backend/preprocess.py docstring), and shares no code with the
vectorised implementation beyond the generated input batch.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np
import pytest

from sim_backend.config import config_from_dict
from sim_backend.emulator import setup
from sim_backend.errors import PreprocessError
from sim_backend.generate import FeatureBatch, generate_step
from sim_backend.preprocess import preprocess_step

# -- the reference --------------------------------------------------------------------------


def reference(raw: dict, batches: list[FeatureBatch], n_chips: int, spc: int) -> dict:
    """Slow, loop-per-ID preprocessing of one step. Returns entries and counts per group."""
    sc = raw.get("sparsecore", {})
    n_sc = n_chips * spc
    batch = raw["global_batch"]
    bs = batch // n_sc
    tables = raw["tables"]
    features = raw["features"]
    # table groups: same (width, dtype, optimizer), in order of first appearance
    groups: dict[tuple, list[dict]] = {}
    for t in tables:
        key = (
            (t["name"],)
            if sc.get("disable_table_stacking")
            else (t.get("width", 128), t.get("dtype", "f32"), t.get("optimizer", "adagrad"))
        )
        groups.setdefault(key, []).append(t)
    limits_default = (sc.get("max_ids_per_partition", 256), sc.get("max_unique_ids_per_partition", 256))
    out = []
    # 1) stacked IDs, COO, per-sample dedup, in processing order (group, partition, ID, slot)
    per_group_entries = []
    for members in groups.values():
        names = [t["name"] for t in members]
        start, base = {}, 0
        for i, t in enumerate(members):
            padded = -(-t["vocab"] // n_sc) * n_sc
            start[t["name"]] = base + (i % n_sc if len(members) > 1 else 0)
            base += padded + (n_sc if len(members) > 1 else 0)
        feats = [(fi, f) for fi, f in enumerate(features) if f["table"] in names]
        entries = []
        for slot, (fi, f) in enumerate(feats):
            fb = batches[fi]
            offs = [0]
            for length in fb.lengths.tolist():
                offs.append(offs[-1] + length)
            for sample in range(batch):
                seen = set()
                for raw_id in fb.ids[offs[sample] : offs[sample + 1]].tolist():
                    col = start[f["table"]] + raw_id
                    if col in seen:
                        continue
                    seen.add(col)
                    entries.append(
                        {
                            "source_sc": sample // bs,
                            "partition": col % n_sc,
                            "col": col,
                            "feature_slot": slot,
                            "sample": sample,
                            "table": names.index(f["table"]),
                        }
                    )
        entries.sort(key=lambda e: (e["partition"], e["col"], e["feature_slot"], e["sample"]))
        per_group_entries.append((members, entries))
    # 2) chip cap: per sample, keep the first `cap` IDs in (group, partition, ID, slot) order
    cap = sc.get("max_ids_per_chip_per_sample", 64)
    used: dict[int, int] = defaultdict(int)
    cap_dropped = [0] * n_sc
    for gi, (members, entries) in enumerate(per_group_entries):
        kept = []
        for e in entries:
            if used[e["sample"]] < cap:
                used[e["sample"]] += 1
                kept.append(e)
            else:
                if not sc.get("allow_id_dropping", False):
                    return {"error": "chip_cap"}
                cap_dropped[e["source_sc"]] += 1
        per_group_entries[gi] = (members, kept)
    # 3) buffers, limits, greedy minibatches, dropping
    max_mb = sc.get("max_minibatches", 64) if sc.get("enable_minibatching", True) else 1
    for members, entries in per_group_entries:
        lim = sum(t.get("max_ids_per_partition", limits_default[0]) for t in members)
        ulim = sum(t.get("max_unique_ids_per_partition", limits_default[1]) for t in members)
        buffers = defaultdict(list)
        for e in entries:
            buffers[e["source_sc"], e["partition"]].append(e)
        ids_sp = np.zeros((n_sc, n_sc), np.int64)
        unique_sp = np.zeros((n_sc, n_sc), np.int64)
        per_table_ids: dict[tuple, int] = defaultdict(int)
        per_table_unique: dict[tuple, set] = defaultdict(set)
        for (s, p), buf in buffers.items():
            buf.sort(key=lambda e: (e["col"], e["feature_slot"], e["sample"] % bs))
            ids_sp[s, p] = len(buf)
            unique_sp[s, p] = len({e["col"] for e in buf})
            mb, count, distinct = 0, 0, set()
            for e in buf:
                new = e["col"] not in distinct
                if count + 1 > lim or (new and len(distinct) + 1 > ulim):
                    mb, count, distinct = mb + 1, 0, set()
                count += 1
                distinct.add(e["col"])
                e["minibatch"] = min(mb, max_mb)  # dropped IDs all report max_mb
                e["dropped"] = mb >= max_mb
                per_table_ids[e["table"], s, p] += 1
                per_table_unique[e["table"], s, p].add(e["col"])
        if any(e["dropped"] for e in entries) and not sc.get("allow_id_dropping", False):
            return {"error": "overflow"}
        table_observed = {}
        for ti, t in enumerate(members):
            ids = [v for (tt, _, _), v in per_table_ids.items() if tt == ti]
            uniq = [len(v) for (tt, _, _), v in per_table_unique.items() if tt == ti]
            table_observed[t["name"]] = (max(ids, default=0), max(uniq, default=0))
        m_used = max((e["minibatch"] for e in entries if not e["dropped"]), default=0) + 1
        if any(e["dropped"] for e in entries):
            m_used = max_mb
        out.append(
            {
                "entries": entries,
                "ids_sp": ids_sp,
                "unique_sp": unique_sp,
                "minibatches": m_used,
                "table_observed": table_observed,
            }
        )
    return {"groups": out, "cap_dropped": cap_dropped}


# -- comparison --------------------------------------------------------------------------------

FIELDS = ("source_sc", "partition", "col", "feature_slot", "sample", "table", "minibatch", "dropped")


def run_both(raw: dict, step: int = 0):
    cfg = config_from_dict(raw)
    hw, _, groups, lay = setup(cfg)
    batches = generate_step(cfg, step)
    ref = reference(raw, batches, hw.num_chips, hw.sparsecores_per_chip)
    try:
        got = preprocess_step(step, batches, groups, lay, cfg.sparsecore, table_stats=True, keep_entries=True)
    except PreprocessError as exc:
        got = exc
    return ref, got


def assert_same(ref: dict, got) -> None:
    if "error" in ref:
        assert isinstance(got, PreprocessError), f"reference stopped with {ref['error']}"
        return
    assert not isinstance(got, Exception), got
    assert len(ref["groups"]) == len(got.groups)
    for rg, gg in zip(ref["groups"], got.groups, strict=True):
        mine = sorted(zip(*(gg.entries[f].tolist() for f in FIELDS), strict=True))
        theirs = sorted(tuple(int(e[f]) for f in FIELDS) for e in rg["entries"])
        assert mine == theirs
        np.testing.assert_array_equal(gg.ids_sp, rg["ids_sp"])
        np.testing.assert_array_equal(gg.unique_sp, rg["unique_sp"])
        assert gg.minibatches == rg["minibatches"]
        assert gg.table_observed == rg["table_observed"]
        # per (minibatch, partition) totals follow from the entries
        e = [x for x in rg["entries"] if not x["dropped"]]
        ids_mp = np.zeros_like(gg.ids_mp)
        for x in e:
            ids_mp[x["minibatch"], x["partition"]] += 1
        np.testing.assert_array_equal(gg.ids_mp, ids_mp)
        dropped = np.zeros_like(gg.dropped_sp)
        for x in rg["entries"]:
            dropped[x["source_sc"], x["partition"]] += x["dropped"]
        np.testing.assert_array_equal(gg.dropped_sp, dropped)
    cap = np.array(ref["cap_dropped"])
    limit_dropped = sum(g.dropped_sp.sum(axis=1) for g in got.groups)
    np.testing.assert_array_equal(got.dropped_ids_per_sc, cap + limit_dropped)


def random_limits(
    raw: dict, rng: np.random.Generator, ids_hi: int, unique_hi: int, chip_cap: tuple[int, int] | None
) -> dict:
    """A copy of `raw` with random limits and flags, seed and a 64-sample batch (chip cap: a
    random value in `chip_cap`, or 1000 when None: one that never binds here)."""
    raw = copy.deepcopy(raw)
    sc = raw["sparsecore"]
    sc["max_ids_per_partition"] = int(rng.integers(1, ids_hi))
    sc["max_unique_ids_per_partition"] = int(rng.integers(1, unique_hi))
    sc["allow_id_dropping"] = bool(rng.integers(0, 2))
    sc["enable_minibatching"] = bool(rng.integers(0, 2))
    sc["max_minibatches"] = int(rng.integers(1, 6))
    sc["disable_table_stacking"] = bool(rng.integers(0, 2))
    sc["max_ids_per_chip_per_sample"] = int(rng.integers(*chip_cap)) if chip_cap else 1000
    raw["seed"] = int(rng.integers(0, 1000))
    raw["global_batch"] = 64
    return raw


def outcomes(ref: dict) -> set[str]:
    """What a reference result shows: its error, or minibatching, dropping, chip-cap dropping."""
    if "error" in ref:
        return {ref["error"]}
    seen = set()
    if any(g["minibatches"] > 1 for g in ref["groups"]):
        seen.add("minibatching")
    if any(e["dropped"] for g in ref["groups"] for e in g["entries"]):
        seen.add("dropping")
    if sum(ref.get("cap_dropped", [])):
        seen.add("cap_dropping")
    return seen


def _variant(raw: dict, rng: np.random.Generator) -> dict:
    raw = random_limits(raw, rng, 12, 10, (8, 24))
    if rng.integers(0, 2):
        raw["tables"][1]["max_ids_per_partition"] = int(rng.integers(1, 30))
    return raw


@pytest.mark.parametrize("case", range(24))
def test_matches_reference_on_random_small_batches(small_raw, case):
    rng = np.random.default_rng(case)
    raw = _variant(small_raw, rng)
    if case % 3 == 1:  # non-power-of-two SparseCore count: 2 chips x 3 SCs
        raw["hardware"]["sparsecores_per_chip"] = 3
        raw["global_batch"] = 66
    if case % 3 == 2:  # one chip of v6e: 2 SCs
        raw["hardware"] = {"generation": "v6e", "num_chips": 1}
    ref, got = run_both(raw, step=case % 4)
    assert_same(ref, got)


def test_reference_cases_cover_every_outcome(small_raw):
    """The random cases above must exercise minibatching, dropping, chip caps and errors."""
    seen = set()
    for case in range(24):
        rng = np.random.default_rng(case)
        raw = _variant(small_raw, rng)
        if case % 3 == 1:
            raw["hardware"]["sparsecores_per_chip"] = 3
            raw["global_batch"] = 66
        if case % 3 == 2:
            raw["hardware"] = {"generation": "v6e", "num_chips": 1}
        ref, got = run_both(raw, step=case % 4)
        seen |= outcomes(ref)
    assert seen >= {"minibatching", "dropping", "overflow", "cap_dropping"}, seen


def test_fits_without_minibatching_when_limits_are_high(small_raw):
    ref, got = run_both(small_raw)
    assert_same(ref, got)
    assert all(g.minibatches == 1 for g in got.groups)
    assert got.dropped_ids == 0


def test_coo_and_dedup_of_the_documented_example():
    """DOMAIN.md §1: [[A], [A,B,C], [B,B,D]] -> rows [0,1,1,1,2,2], cols [A,A,B,C,B,D]."""
    raw = {
        "global_batch": 3,
        "hardware": {"num_chips": 1, "sparsecores_per_chip": 1},
        "sparsecore": {"max_ids_per_chip_per_sample": 8},
        "tables": [{"name": "t", "vocab": 10, "width": 8}],
        "features": [{"name": "f", "table": "t", "multi_hot": 3}],
    }
    cfg = config_from_dict(raw)
    hw, _, groups, lay = setup(cfg)
    a, b, c, d = 1, 2, 3, 4
    fb = FeatureBatch(np.array([1, 3, 3]), np.array([a, a, b, c, b, b, d]))
    np.testing.assert_array_equal(fb.row_ids, [0, 1, 1, 1, 2, 2, 2])
    res = preprocess_step(0, [fb], groups, lay, cfg.sparsecore, keep_entries=True)
    e = res.groups[0].entries
    order = np.lexsort((e["col"], e["sample"]))
    assert e["sample"][order].tolist() == [0, 1, 1, 1, 2, 2]
    assert e["col"][order].tolist() == [a, a, b, c, b, d]
    assert res.groups[0].ids_sp.tolist() == [[6]]
    assert res.groups[0].unique_sp.tolist() == [[4]]


def test_overflow_error_names_table_partition_and_values(small_raw):
    small_raw["sparsecore"].update(max_ids_per_partition=1, max_unique_ids_per_partition=1, enable_minibatching=False)
    _, got = run_both(small_raw)
    assert isinstance(got, PreprocessError)
    msg = str(got)
    assert "\n" not in msg
    # tables big + mid (width 32) are stacked: compiled limits add up to 2
    for part in (
        "table 'stack_0'",
        "partition",
        "SparseCore",
        "max_ids_per_partition=2",
        "max_unique_ids_per_partition=2",
        "allow_id_dropping",
    ):
        assert part in msg, (part, msg)


def test_chip_cap_error_names_the_flag(small_raw):
    small_raw["sparsecore"]["max_ids_per_chip_per_sample"] = 3
    _, got = run_both(small_raw)
    assert isinstance(got, PreprocessError)
    assert "max_ids_per_chip_per_sample=3" in str(got)

"""Host preprocessing against an independent plain-Python reference (exact equality).

The reference below walks samples and IDs one by one, following jax-tpu-embedding's rules
(sim_backend/preprocess.py docstring; the library itself is the oracle of
test_library_oracle.py), and shares no code with the vectorised implementation beyond the
generated input batch and the stack membership of test_sim_stacking.reference_stacks; the
minibatching hash is the tests' own numpy HighwayHash (highway_reference.py, checked against
the algorithm's published test vector), not the emulator's C one.
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
from tests.sim_backend.highway_reference import highway_hash64_u32
from tests.sim_backend.test_sim_stacking import reference_stacks

# -- the reference --------------------------------------------------------------------------


def _bucket(col: int) -> int:
    return int(highway_hash64_u32(np.array([col]))[0]) % 64


def _split_bits(counts: list[int], limit: int) -> set[int]:
    """Boundaries (bucket indices where a minibatch starts) of the library's binary-tree split."""
    c = list(counts)
    cuts = set()
    size = 2
    while size <= 64:
        for i in range(0, 64, size):
            left, right = c[i], c[i + size // 2]
            if left + right > limit:
                cuts.add(i + size // 2)
                c[i] = max(left, right)
            else:
                c[i] = left + right
        size *= 2
    return cuts


def _stack_limits(raw: dict, members: list[str], n_sc: int) -> tuple[int, int]:
    sc = raw.get("sparsecore", {})
    default = (sc.get("max_ids_per_partition", 256), sc.get("max_unique_ids_per_partition", 256))
    if len(members) > 1:
        return default
    t = next(t for t in raw["tables"] if t["name"] == members[0])
    out = []
    for i, (key, per_table) in enumerate(
        (("max_ids_per_partition", "max_ids_per_table"), ("max_unique_ids_per_partition", "max_unique_ids_per_table"))
    ):
        if t.get(key) is not None:
            out.append(t[key])
        elif members[0] in (sc.get(per_table) or {}):
            out.append(-(-sc[per_table][members[0]] // n_sc))
        else:
            out.append(default[i])
    return out[0], out[1]


def reference(raw: dict, batches: list[FeatureBatch], n_chips: int, spc: int) -> dict:
    """Slow, loop-per-ID preprocessing of one step. Returns entries and counts per stack."""
    sc = raw.get("sparsecore", {})
    n_sc = n_chips * spc
    batch = raw["global_batch"]
    bs = batch // n_sc
    tables = {t["name"]: t for t in raw["tables"]}
    features = raw["features"]
    stacks = []
    # 1) stacked IDs (rotated inside blocks of n_sc rows), COO, per-bag dedup with repeat counts
    for members in reference_stacks(raw):
        start, shift, base = {}, {}, 0
        for i, name in enumerate(members):
            start[name], shift[name] = base, i * spc % n_sc
            base += -(-tables[name]["vocab"] // (8 * n_sc)) * 8 * n_sc
        feats = [(fi, f) for fi, f in enumerate(features) if f["table"] in members]
        entries = []
        for slot, (fi, f) in enumerate(feats):
            fb = batches[fi]
            offs = [0]
            for length in fb.lengths.tolist():
                offs.append(offs[-1] + length)
            for sample in range(batch):
                seen: dict[int, dict] = {}
                for raw_id in fb.ids[offs[sample] : offs[sample + 1]].tolist():
                    name = f["table"]
                    col = (raw_id + shift[name]) % n_sc + raw_id - raw_id % n_sc + start[name]
                    if col in seen:
                        seen[col]["count"] += 1
                        continue
                    seen[col] = {
                        "source_sc": sample // bs,
                        "partition": col % n_sc,
                        "col": col,
                        "feature_slot": slot,
                        "sample": sample,
                        "table": members.index(name),
                        "count": 1,
                    }
                entries += seen.values()
        entries.sort(key=lambda e: (e["partition"], e["col"], e["feature_slot"], e["sample"]))
        stacks.append({"members": members, "entries": entries, "limits": _stack_limits(raw, members, n_sc)})
    # 2) chip cap: per sample, keep the first `cap` IDs in (stack, partition, ID, slot) order
    cap = sc.get("max_ids_per_chip_per_sample", 64)
    used: dict[int, int] = defaultdict(int)
    cap_dropped = [0] * n_sc
    for st in stacks:
        kept = []
        for e in st["entries"]:
            if used[e["sample"]] < cap:
                used[e["sample"]] += 1
                kept.append(e)
            else:
                if not sc.get("allow_id_dropping", False):
                    return {"error": "chip_cap"}
                cap_dropped[e["source_sc"]] += 1
        st["entries"] = kept
    # 3) buffers; pass 1 counts; is any buffer of any stack over its limits?
    over = False
    for st in stacks:
        lim, ulim = st["limits"]
        buffers = defaultdict(list)
        for e in st["entries"]:
            buffers[e["source_sc"], e["partition"]].append(e)
        st["ids_sp"] = np.zeros((n_sc, n_sc), np.int64)
        st["unique_sp"] = np.zeros((n_sc, n_sc), np.int64)
        for (s, p), buf in buffers.items():
            st["ids_sp"][s, p] = len(buf)
            st["unique_sp"][s, p] = len({e["col"] for e in buf})
            over |= len(buf) > lim or st["unique_sp"][s, p] > ulim
        st["buffers"] = buffers
    # 4) minibatching: buckets, one split over all stacks; then drops per (buffer, bucket)
    minibatching = over and sc.get("enable_minibatching", True)
    cuts: set[int] = set()
    if minibatching:
        for st in stacks:
            lim, ulim = st["limits"]
            for buf in st["buffers"].values():
                ids, cols = [0] * 64, [set() for _ in range(64)]
                for e in buf:
                    ids[_bucket(e["col"])] += 1
                    cols[_bucket(e["col"])].add(e["col"])
                cuts |= _split_bits(ids, lim) | _split_bits([len(c) for c in cols], ulim)
    minibatch_of = [sum(1 for c in cuts if c <= b) for b in range(64)]
    for st in stacks:
        lim, ulim = st["limits"]
        for buf in st["buffers"].values():
            segments = defaultdict(list)
            for e in buf:
                segments[_bucket(e["col"]) if minibatching else 0].append(e)
            for bucket, seg in segments.items():
                distinct: list[int] = []
                for rank, e in enumerate(seg):
                    if e["col"] not in distinct:
                        distinct.append(e["col"])
                    e["dropped"] = over and (rank >= lim or distinct.index(e["col"]) >= ulim)
                    e["minibatch"] = minibatch_of[bucket] if minibatching else 0
        if any(e["dropped"] for e in st["entries"]) and not sc.get("allow_id_dropping", False):
            return {"error": "overflow"}
        st["minibatches"] = len(cuts) + 1
    return {"groups": stacks, "cap_dropped": cap_dropped, "minibatches": len(cuts) + 1}


# -- comparison --------------------------------------------------------------------------------

FIELDS = ("source_sc", "partition", "col", "feature_slot", "sample", "table", "minibatch", "dropped", "count")


def run_both(raw: dict, step: int = 0):
    cfg = config_from_dict(raw)
    hw, _, groups, lay = setup(cfg)
    batches = generate_step(cfg, step)
    ref = reference(raw, batches, hw.num_chips, hw.sparsecores_per_chip)
    try:
        got = preprocess_step(step, batches, groups, lay, cfg.sparsecore, keep_entries=True)
    except PreprocessError as exc:
        got = exc
    return ref, got


def assert_same(ref: dict, got) -> None:
    if "error" in ref:
        assert isinstance(got, PreprocessError), f"reference stopped with {ref['error']}"
        return
    assert not isinstance(got, Exception), got
    assert len(ref["groups"]) == len(got.groups)
    assert got.minibatches == ref["minibatches"]
    for rg, gg in zip(ref["groups"], got.groups, strict=True):
        assert list(gg.group.tables) == rg["members"]
        mine = sorted(zip(*(gg.entries[f].tolist() for f in FIELDS), strict=True))
        theirs = sorted(tuple(int(e[f]) for f in FIELDS) for e in rg["entries"])
        assert mine == theirs
        np.testing.assert_array_equal(gg.ids_sp, rg["ids_sp"])
        np.testing.assert_array_equal(gg.unique_sp, rg["unique_sp"])
        assert gg.minibatches == rg["minibatches"]
        # per (minibatch, partition) totals follow from the entries
        e = [x for x in rg["entries"] if not x["dropped"]]
        ids_mp = np.zeros_like(gg.ids_mp)
        for x in e:
            ids_mp[x["minibatch"], x["partition"]] += 1
        np.testing.assert_array_equal(gg.ids_mp, ids_mp)
        dropped = np.zeros_like(gg.dropped_sp)
        for x in rg["entries"]:
            dropped[x["source_sc"], x["partition"]] += x["count"] if x["dropped"] else 0
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
    if ref["minibatches"] > 1:
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
    """The guide's example: [[A], [A,B,C], [B,B,D]] -> rows [0,1,1,1,2,2], cols [A,A,B,C,B,D]."""
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
    # tables big + mid (width 32) stack as 'big_mid', with the stack-level limits 1 / 1
    for part in (
        "stack 'big_mid'",
        "partition",
        "SparseCore",
        "max_ids_per_partition=1",
        "max_unique_ids_per_partition=1",
        "minibatching is off",
        "allow_id_dropping",
    ):
        assert part in msg, (part, msg)
    small_raw["sparsecore"]["enable_minibatching"] = True
    _, got = run_both(small_raw)
    assert "minibatching cannot split it further" in str(got)


def test_chip_cap_error_names_the_flag(small_raw):
    small_raw["sparsecore"]["max_ids_per_chip_per_sample"] = 3
    _, got = run_both(small_raw)
    assert isinstance(got, PreprocessError)
    assert "max_ids_per_chip_per_sample=3" in str(got)

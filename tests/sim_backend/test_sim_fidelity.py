"""Emulator fidelity against the SparseCore guide's statements (docs/emulator.md, "What the doc
says → what the emulator shows").

Each test names the passage it checks and compares the emulator with a hand computation.
"""

from __future__ import annotations

import copy
import os

import numpy as np

from sim_backend.config import config_from_dict
from sim_backend.config_load import load_raw
from sim_backend.costmodel import AnalyticCostModel, CostConstants
from sim_backend.emulator import setup, simulate
from sim_backend.generate import generate_step
from sim_backend.hardware import resolve_hardware
from sim_backend.preprocess import preprocess_step
from sim_backend.stepgraph import SC_BWD, SC_FWD
from tests.sim_backend.conftest import CONFIG_DIR

# One v5p chip (4 SparseCores of 16 tiles at 1.75 GHz), one f32 table of width 8 (32-byte
# rows): per ID the SparseCore moves ~64 bytes of HBM but spends several cycles, so its
# ops are compute-bound, where the limits' buffer work shows.
NARROW = {
    "name": "narrow",
    "seed": 5,
    "steps": 2,
    "global_batch": 512,
    "hardware": {"generation": "v5p", "num_chips": 1},
    "dense": {"num_dense_features": 4, "bottom_mlp": [16, 8], "top_mlp": [16, 1], "cross_layers": 0},
    "sparsecore": {"max_ids_per_chip_per_sample": 1000},
    "tables": [{"name": "t", "vocab": 4000, "width": 8, "optimizer": "sgd"}],
    "features": [{"name": "f", "table": "t", "multi_hot": 8}],
}


def _run(raw: dict, **table_keys):
    raw = copy.deepcopy(raw)
    raw["tables"][0].update(table_keys)
    return simulate(config_from_dict(raw))


def _ops(sim, kind: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, dur_ps) of the SparseCore ops of `kind`, in task order."""
    c = sim.graph.columns()
    m = c["kind"] == kind
    return c["ids"][m], c["dur_ps"][m]


def test_over_generous_limits_cost_sparsecore_time():
    """Guide §7: "lower limits can lead to higher performance (less data must be processed
    in each step and SPMEM pressure is reduced)": the SparseCore works on buffers sized by
    the compiled limits, so limits 4x the observed maximum make every op slower, by the
    buffer work of the extra slots (docs/emulator.md "Cost model")."""
    probe = _run(NARROW, max_ids_per_partition=100_000, max_unique_ids_per_partition=100_000)
    ids_max = max(sr.groups[0].partition_ids.max() for sr in probe.steps)
    uniq_max = max(sr.groups[0].partition_unique_ids.max() for sr in probe.steps)
    tight = _run(NARROW, max_ids_per_partition=int(ids_max), max_unique_ids_per_partition=int(uniq_max))
    loose = _run(NARROW, max_ids_per_partition=int(4 * ids_max), max_unique_ids_per_partition=int(4 * uniq_max))
    for kind in (SC_FWD, SC_BWD):
        ids_t, dur_t = _ops(tight, kind)
        ids_l, dur_l = _ops(loose, kind)
        assert (ids_t == ids_l).all() and len(ids_t) == 2 * 4  # same IDs, one op per step and SC
        # 4 source buffers per partition, 3 x the limits more slots each; 4 cycles per ID slot,
        # 1 per unique-ID slot; over 16 tiles at 1.75 GHz
        extra_ps = 4 * 3 * (ids_max * 4 + uniq_max * 1) / 16 / 1.75e9 * 1e12
        assert np.abs(dur_l - dur_t - extra_ps).max() <= 1, (dur_l - dur_t, extra_ps)
        assert (dur_l > dur_t).all()


# -- ID shuffling against hot IDs (sparsecore.shuffle_ids) -------------------------------


def _sc_loads(raw: dict, shuffle: bool) -> np.ndarray:
    """IDs each SparseCore partition receives in step 0, summed over table groups."""
    raw = copy.deepcopy(raw)
    raw.setdefault("sparsecore", {})["shuffle_ids"] = shuffle
    cfg = config_from_dict(raw)
    _, _, groups, lay = setup(cfg)
    sr = preprocess_step(0, generate_step(cfg, 0), groups, lay, cfg.sparsecore)
    return sum(g.ids_mp.sum(axis=0) for g in sr.groups)


HOT = {
    "name": "hot",
    "seed": 1,
    "steps": 1,
    "global_batch": 256,
    "hardware": {"generation": "v5p", "num_chips": 2},  # 8 SparseCores
    "sparsecore": {"disable_table_stacking": True, "max_ids_per_partition": 4096},
    "tables": [{"name": f"t{i}", "vocab": 1000, "width": 16} for i in range(8)],
    # every lookup hits ID 0 of its table
    "features": [
        {"name": f"f{i}", "table": f"t{i}", "distribution": "hot_set", "hot_set_size": 1, "hot_fraction": 1.0}
        for i in range(8)
    ],
}


def test_shuffle_ids_spreads_hot_ids_over_sparsecores():
    """Guide §10 (data skew): "if some SparseCore partitions receive disproportionately more
    IDs ... those SparseCores become the bottleneck; shuffling IDs ... can help, for stacked
    tables with hot tables". Unstacked, every table's ID 0 goes to SparseCore 0 % 8 = 0:
    all 8 x 256 lookups on one of 8 SparseCores, max/mean = 8. With shuffle_ids table i is
    shifted by floor(i * 8 / 8) = i: each SparseCore gets one table's 256, max/mean = 1."""
    off, on = _sc_loads(HOT, False), _sc_loads(HOT, True)
    assert off.tolist() == [8 * 256] + [0] * 7
    assert on.tolist() == [256] * 8
    assert off.max() / off.mean() == 8 and on.max() / on.mean() == 1


def test_shuffle_ids_lowers_skew_of_the_bundled_hot_set_config():
    """skewed_ids.toml (hot sets of 4 IDs in 6 unstacked tables, all on SparseCores 0-3)."""
    raw = load_raw(os.path.join(CONFIG_DIR, "skewed_ids.toml"))
    off, on = _sc_loads(raw, False), _sc_loads(raw, True)
    assert off.sum() == on.sum()  # the same lookups, spread differently
    assert on.max() / on.mean() < 0.8 * (off.max() / off.mean())


# -- bf16 SIMD width (Trillium) -------------------------------------------------------------


def _backward_ps(generation: str, dtype_bytes: int) -> int:
    """One embedding update: 10,000 IDs, 100 unique rows, width 128, Adam (2 slots), limits 1000/500."""
    cost = AnalyticCostModel(resolve_hardware(generation, 1, {}), CostConstants())
    ids, unique = np.array([10_000]), np.array([100])
    return int(cost.sc_backward_ps(ids, unique, 128, dtype_bytes, 2, (1000, 500))[0])


def test_bf16_rows_use_the_16_wide_simd_of_trillium_only():
    """Guide §1 table: SIMD width 8 on v4 and v5p, "8 (F32) 16 (BF16)" on Trillium (v6e).

    v6e, 1 chip (2 SCs, 16 tiles at 1.75 GHz): buffer work 2 x (1000 x 4 + 500 x 1) = 9,000
    cycles; row passes (2 + 2 slots) per ID: f32 10,000 x 4 x ceil(128 / 8) = 640,000
    cycles, bf16 10,000 x 4 x ceil(128 / 16) = 320,000. Both compute-bound (HBM: 5.43 MB
    f32 / 5.27 MB bf16 at 1638 GB/s / 2 SCs x 0.7 = 9.5 / 9.2 us < 11.75 us). Difference
    320,000 / 16 / 1.75e9 s = 11.428571 us. On v4 / v5p both widths are 8: the same time.
    """
    f32, bf16 = _backward_ps("v6e", 4), _backward_ps("v6e", 2)
    assert f32 == 1_500_000 + 15_000_000 + int(np.ceil(649_000 / 16 / 1.75e9 * 1e12))
    assert bf16 == 1_500_000 + 15_000_000 + int(np.ceil(329_000 / 16 / 1.75e9 * 1e12))
    assert abs((f32 - bf16) - 11_428_571) <= 1
    for gen in ("v4", "v5p"):
        assert _backward_ps(gen, 4) == _backward_ps(gen, 2)  # compute-bound, 8 lanes either way


# -- SparseCore op bytes: what HBM moves, padded rows ---------------------------------------


def test_sparsecore_op_bytes_are_padded_rows_moved():
    """Guide §10 (padding overhead): "embedding tables are padded to 32 B (8 floats) in the
    feature dimension; a width-1 table wastes 7/8". A width-1 f32 table's row (4 B) moves as
    32 B: a lookup reads each unique row and writes each ID's f32 activation row, 32 B each;
    an SGD update reads each ID's gradient row and reads + writes each unique row."""
    sim = _run(NARROW, width=1)
    c = sim.graph.columns()
    fwd, bwd = c["kind"] == SC_FWD, c["kind"] == SC_BWD
    assert (c["bytes"][fwd] == 32 * c["unique_ids"][fwd] + 32 * c["ids"][fwd]).all()
    assert (c["bytes"][bwd] == 32 * c["ids"][bwd] + 2 * 32 * c["unique_ids"][bwd]).all()
    assert c["bytes"][fwd].sum() > 8 * 4 * c["unique_ids"][fwd].sum()  # unpadded would be 4 B a row

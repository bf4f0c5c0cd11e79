"""scprof's SparseCore input path against the real library: jax-tpu-embedding 0.1.0 as an oracle.

The library (the `reference` test extra) runs in a child process (sim_backend/reference_worker.py)
on the same IDs: its C++ preprocessing may abort, as it aborts a training job. Compared:
- stacking: which tables stack, in what order, the stack names, padded vocabularies, row
  offsets and rotations, and the limits a stack gets (`auto_stack_tables`);
- per step: the outcome (ran, or stopped: the library aborts where scprof raises), the
  minibatch count, max IDs and max unique IDs per (device, partition), required buffer
  sizes, dropped IDs (in-sample repeats counted), the kept entries as sets of (source SC,
  partition, table, ID, sample, feature slot, minibatch) and unique IDs per (source SC,
  partition, minibatch).
Cases are drawn by tests/sim_backend/library_cases.py: 1-40 tables, widths 1-128, all
optimizers and combiners, 1-8 chips of v4 / v5p / v6e, fixed and ragged bags, uniform, Zipf
and hot-set IDs, limits from ample to far too low, dropping and minibatching on and off.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_backend.config import config_from_dict
from sim_backend.emulator import setup
from sim_backend.reference_preprocess import ReferenceSession
from sim_backend.stacking import stack_members
from tests.sim_backend.library_cases import compare_step, random_case

CASES = 150  # drawn workloads per property (each: its stacking, and one step preprocessed)


@pytest.fixture(scope="module")
def session(library_session):
    return library_session


def _assert_agree(session: ReferenceSession, raw: dict, step: int = 0) -> None:
    cmp = compare_step(session, raw, step)
    lib_error, my_error = cmp.stopped
    assert (lib_error is None) == (my_error is None), (lib_error, my_error)
    bad = cmp.differing()
    assert not bad, {k: cmp.values[k] for k in bad[:3]}


@settings(max_examples=CASES, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_preprocessing_agrees_with_the_library(session, seed):
    _assert_agree(session, random_case(np.random.default_rng(seed)), step=seed % 2)


@settings(max_examples=CASES, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), limit_kib=st.sampled_from([64, 512, 2048, 8192]))
def test_stacking_agrees_with_auto_stack_tables(session, seed, limit_kib):
    raw = random_case(np.random.default_rng(seed))
    raw["sparsecore"]["disable_table_stacking"] = False
    raw["sparsecore"]["stack_activation_mem_bytes_limit"] = limit_kib * 1024
    cfg = config_from_dict(raw)
    hw, _, groups, _ = setup(cfg)
    sc = cfg.sparsecore
    # a lone table keeps its own limits in the library: here the config's defaults
    own = {
        "max_ids_per_partition": sc.max_ids_per_partition,
        "max_unique_ids_per_partition": sc.max_unique_ids_per_partition,
    }
    theirs = session.auto_stack(
        {
            "tables": [{**t, **own} for t in raw["tables"]],
            "features": [{"name": f.name, "table": f.table, "hot": f.multi_hot} for f in cfg.features],
            "batch": cfg.global_batch,
            "chips": hw.num_chips,
            "spc": hw.sparsecores_per_chip,
            "stack_max_ids": cfg.sparsecore.max_ids_per_partition,
            "stack_max_unique_ids": cfg.sparsecore.max_unique_ids_per_partition,
            "activation_mem_bytes_limit": limit_kib * 1024,
        }
    )
    n_sc = hw.num_total_sparse_cores
    # the library's stacks, in its order: tables grouped by stack name, in order of appearance
    lib_stacks: dict[str, list[str]] = {}
    for f in cfg.features:
        lib_stacks.setdefault(theirs[f.table]["stack"], [])
        if f.table not in lib_stacks[theirs[f.table]["stack"]]:
            lib_stacks[theirs[f.table]["stack"]].append(f.table)
    assert [g.name for g in groups] == list(lib_stacks)
    assert [list(g.tables) for g in groups] == list(lib_stacks.values())
    assert stack_members(cfg, n_sc) == list(lib_stacks.values())
    for g in groups:
        for i, t in enumerate(g.tables):
            lib = theirs[t]
            assert int(g.padded_vocab[i]) == lib["padded_vocab"], t
            assert int(g.offsets[i]) == lib["row_offset_in_shard"] * n_sc == lib["col_offset"], t
            assert int(g.rotation[i]) == lib["shard_rotation"] == lib["col_shift"], t
            assert g.max_ids_per_partition == lib["max_ids_per_partition"], t
            assert g.max_unique_ids_per_partition == lib["max_unique_ids_per_partition"], t


# -- cases picked by hand --------------------------------------------------------------------------


def _small(**sc) -> dict:
    raw = random_case(np.random.default_rng(7), max_tables=4)
    raw["hardware"] = {"generation": "v5p", "num_chips": 2}
    raw["global_batch"] = 256
    raw["sparsecore"].update(sc)
    return raw


def test_the_library_aborts_where_scprof_refuses(session):
    raw = _small(max_ids_per_partition=2, max_unique_ids_per_partition=1, allow_id_dropping=False)
    for minibatching in (True, False):
        raw["sparsecore"]["enable_minibatching"] = minibatching
        cmp = compare_step(session, copy.deepcopy(raw), 0)
        lib_error, my_error = cmp.stopped
        assert lib_error and "jax-tpu-embedding stopped" in lib_error
        assert my_error and "raise the stack's limits" in my_error


def test_many_minibatches_and_drops_agree(session):
    raw = _small(max_ids_per_partition=3, max_unique_ids_per_partition=2, allow_id_dropping=True)
    cmp = compare_step(session, raw, 1)
    assert cmp.values["minibatches"][0] > 8  # far too low: many of the 64 buckets split
    assert any(v[0] > 0 for k, v in cmp.values.items() if k.startswith("dropped_ids"))
    assert not cmp.differing()


def test_one_chip_stacks_are_not_rotated_and_agree(session):
    raw = _small()
    raw["hardware"] = {"generation": "v6e", "num_chips": 1}
    for t in raw["tables"]:
        t.update(width=16, optimizer="sgd", combiner="sum")
    _, _, groups, _ = setup(config_from_dict(raw))
    assert len(groups) == 1 and not groups[0].rotation.any()
    _assert_agree(session, raw)

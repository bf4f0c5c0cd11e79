"""Tiled layouts and padding (docs/emulator.md "Memory model"): footprints computed by hand."""

from __future__ import annotations

import copy
import itertools
import math

import pytest

from sim_backend.config import config_from_dict
from sim_backend.costmodel import make_cost_model
from sim_backend.dense import dense_param_shapes, dense_work
from sim_backend.emulator import setup
from sim_backend.layout import linear_index, padded_bytes, padded_elements, padded_shape, tpu_tiling
from sim_backend.memory import dense_bytes, embedding_bytes_per_chip


def test_doc_example_element_2_3_of_f32_3x5_with_t2x2_is_17():
    # (tile (1,1) of 2x3 tiles) * 4 + (0,1) inside the tile = (1*3 + 1)*4 + 1
    assert linear_index((2, 3), (3, 5), (2, 2)) == 17


def test_f32_3x5_with_t2x2_holds_24_elements_each_once():
    assert padded_shape((3, 5), (2, 2)) == (4, 6)
    assert padded_elements((3, 5), [(2, 2)]) == 24
    positions = [linear_index(i, (3, 5), (2, 2)) for i in itertools.product(range(3), range(5))]
    assert len(set(positions)) == 15 and max(positions) < 24
    # the first tile holds (0,0) (0,1) (1,0) (1,1) at 0..3
    assert [linear_index(i, (3, 5), (2, 2)) for i in ((0, 0), (0, 1), (1, 0), (1, 1))] == [0, 1, 2, 3]


def test_without_tiling_the_index_is_row_major():
    assert linear_index((2, 3), (3, 5), (1, 1)) == 2 * 5 + 3


def test_index_outside_the_shape_is_refused():
    with pytest.raises(IndexError):
        linear_index((3, 0), (3, 5), (2, 2))


@pytest.mark.parametrize(
    "shape, dtype, tiling, nbytes",
    [
        ((13, 512), "f32", ((8, 128),), 16 * 512 * 4),  # 13 rows pad to 16
        ((8, 128), "f32", ((8, 128),), 8 * 128 * 4),  # exact fit, no padding
        ((3, 5), "f32", ((4, 128),), 4 * 128 * 4),  # second-minor 3 -> (4,128)
        ((4, 200), "f32", ((4, 128),), 4 * 256 * 4),
        ((2, 5), "f32", ((2, 128),), 2 * 128 * 4),  # second-minor 1-2 -> (2,128)
        ((1, 1000), "f32", ((2, 128),), 2 * 1024 * 4),
        ((512,), "f32", ((2, 128),), 2 * 512 * 4),  # rank 1 as [1, n]
        ((10, 3, 130), "f32", ((4, 128),), 10 * 4 * 256 * 4),  # major dims are not padded
        ((13, 512), "bf16", ((8, 128), (2, 1)), 16 * 512 * 2),  # bf16 packing: same tile footprint
        ((3, 5), "bf16", ((8, 128), (2, 1)), 8 * 128 * 2),
        ((9, 129), "s8", ((8, 128), (4, 1)), 16 * 256 * 1),
        ((9, 129), "pred", ((8, 128), (4, 1)), 16 * 256 * 1),  # PRED: one byte per element
    ],
)
def test_tpu_tile_formats_and_their_footprint(shape, dtype, tiling, nbytes):
    assert tpu_tiling(shape, dtype) == tiling
    assert padded_bytes(shape, dtype) == nbytes


def test_feature_width_1_wastes_seven_eighths_of_a_row():
    cost = make_cost_model("analytic", None, {})
    assert cost.padded_row_bytes(1, 4) == 32  # 4 useful bytes of 32
    assert cost.padded_row_bytes(8, 4) == 32 and cost.padded_row_bytes(9, 4) == 64
    assert cost.padded_row_bytes(16, 2) == 32  # bf16: 16 elements per 32 bytes


def test_embedding_heap_pads_rows_and_vocabularies_and_shards_over_chips(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["sparsecore"]["disable_table_stacking"] = True
    raw["tables"] = [
        {"name": "big", "vocab": 100_000, "width": 32},
        {"name": "mid", "vocab": 5000, "width": 32, "optimizer": "adam"},
        {"name": "tiny", "vocab": 7, "width": 1, "dtype": "bf16"},
    ]
    cfg = config_from_dict(raw)
    hw, _, groups, _ = setup(cfg)  # 2 chips x 4 SparseCores: vocab padded to multiples of 8 x 8
    assert [int(g.padded_vocab.sum()) for g in groups] == [100_032, 5056, 64]
    cost = make_cost_model("analytic", hw, {})
    tables, slots = embedding_bytes_per_chip(groups, hw.num_chips, cost.padded_row_bytes)
    # rows x 128 B (32 f32) | rows x 32 B (1 bf16 padded to 32 B); adagrad 1 slot, adam 2
    assert tables == (100_032 * 128 + 5056 * 128 + 64 * 32) // 2
    assert slots == (100_032 * 128 * 1 + 5056 * 128 * 2 + 64 * 32 * 1) // 2


def test_dense_footprint_is_the_tiled_size_of_every_parameter(small_raw):
    cfg = config_from_dict(small_raw)
    shapes = dict(dense_param_shapes(cfg))
    assert sum(math.prod(s) for s in shapes.values()) == dense_work(cfg).params
    # bottom MLP 13 -> 64 -> 32; interaction 32 + 32 + 32 + 32 + 16 = 144; cross rank 32; top 64 -> 1
    assert shapes["bottom_0/kernel"] == (13, 64) and shapes["cross_0/u"] == (144, 32)
    expected = (
        16 * 128
        + 2 * 128  # bottom_0 kernel (13,64) -> (16,128); bias (2,128)
        + 64 * 128
        + 2 * 128  # bottom_1 kernel (64,32) -> (64,128); bias
        + 144 * 128
        + 32 * 256
        + 2 * 256  # cross u (144,32), v (32,144), bias (144,)
        + 144 * 128
        + 2 * 128  # top_0 kernel (144,64) -> (144,128); bias
        + 64 * 128
        + 2 * 128
    ) * 4  # top_1 kernel (64,1) -> (64,128); bias (1,) -> (2,128)
    assert dense_bytes(cfg, 4) == expected

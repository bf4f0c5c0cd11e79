"""Sharded dense part (docs/emulator.md "Sharded dense part"): Shardy syntax, per-device shapes,
groups, invariants, implied collectives (hand-computed), and FSDP against data parallelism end to
end.

The small workload's dense tensors (conftest.SMALL: 2 chips, 256 samples; interaction
width = bottom MLP output 32 + features 32 + 32 + 32 + 16 = 144) are listed in DENSE.
"""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.config import config_from_dict
from sim_backend.dense import dense_param_shapes, dense_work
from sim_backend.emulator import simulate
from sim_backend.errors import ConfigError
from sim_backend.memory import dense_bytes
from sim_backend.recording.instrument import KIND_CATEGORIES
from sim_backend.recording.record import record_run
from sim_backend.sharding import per_device_shape, plan_dense, ring_bytes
from sim_backend.sharding_resolve import local_shape
from sim_backend.shardy import DimSharding, Mesh, Sharding, parse_mesh, parse_sharding
from sim_backend.stepgraph import ALLREDUCE, KIND_NAMES, TC_COLLECTIVES
from tests.sim_backend.test_sim_memory import counters_by_line
from tests.sim_backend.test_sim_record import small_file

INTERACTION = 32 + 32 + 32 + 32 + 16  # bottom MLP output + f_big, f_mid, f_mid2, f_tiny
DENSE = [
    ("bottom_0/kernel", (13, 64)),
    ("bottom_0/bias", (64,)),
    ("bottom_1/kernel", (64, 32)),
    ("bottom_1/bias", (32,)),
    ("cross_0/u", (INTERACTION, 32)),
    ("cross_0/v", (32, INTERACTION)),
    ("cross_0/bias", (INTERACTION,)),
    ("top_0/kernel", (INTERACTION, 64)),
    ("top_0/bias", (64,)),
    ("top_1/kernel", (64, 1)),
    ("top_1/bias", (1,)),
]
FSDP_KERNELS = {"*/kernel": '[{"data"}, {}]'}


def with_sharding(raw: dict, chips: int | None = None, **sharding) -> dict:
    raw = copy.deepcopy(raw)
    if chips is not None:
        raw["hardware"]["num_chips"] = chips
    raw["sharding"] = sharding
    return raw


def error_of(raw: dict) -> str:
    with pytest.raises(ConfigError) as e:
        config_from_dict(raw)
    return str(e.value)


# -- syntax and shapes -------------------------------------------------------------------------


def test_small_workload_tensors_are_the_listed_ones(small_raw):
    assert dense_param_shapes(config_from_dict(small_raw)) == DENSE


def test_shardy_syntax_parses_and_prints_back():
    mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=2]>')
    assert mesh == Mesh((("x", 2), ("y", 2)), "mesh_xy") and mesh.num_devices == 4
    assert str(mesh) == '@mesh_xy = <["x"=2, "y"=2]>'
    assert parse_mesh('["data"=4]') == Mesh((("data", 4),))
    s = parse_sharding('<@mesh_xy, [{"x"}, {}]>', "k")
    assert s == Sharding((DimSharding(("x",)), DimSharding()), "mesh_xy")
    s = parse_sharding('[{"data", ?}, {?}]', "k")
    assert s.dims == (DimSharding(("data",), True), DimSharding((), True))
    assert str(s) == '[{"data", ?}, {?}]'
    assert str(s.closed()) == '[{"data"}, {}]'


@pytest.mark.parametrize("text", ['[{"x"}, {}', '[{"x" "y"}]', '[{?, "x"}]', "[{x}]", "[{}]]"])
def test_bad_sharding_syntax_names_the_key(text):
    with pytest.raises(ConfigError, match=r"^sharding\.weights\.w: "):
        parse_sharding(text, "sharding.weights.w")


def test_per_device_shape_by_hand():
    mesh = parse_mesh('<["x"=2, "y"=2]>')
    assert per_device_shape((1024, 512), parse_sharding('[{"x"}, {"y"}]', "k"), mesh) == (512, 256)
    assert per_device_shape((1024, 512), parse_sharding('[{"x", "y"}, {}]', "k"), mesh) == (256, 512)
    assert per_device_shape((1024, 512), parse_sharding("[{}, {}]", "k"), mesh) == (1024, 512)
    # a dimension the axes do not divide is padded: 13 rows over 4 devices -> 4 per device
    assert per_device_shape((13, 5), parse_sharding('[{"y", "x"}, {}]', "k"), mesh) == (4, 5)
    # only some axes (what a device computes with after gathering the others)
    assert per_device_shape((1024, 512), parse_sharding('[{"x"}, {"y"}]', "k"), mesh, {"y"}) == (1024, 256)


def test_ring_bytes_by_hand():
    assert ring_bytes("all-reduce", 1000, 4) == 1500  # 2 * 3/4 * 1000
    assert ring_bytes("all-gather", 1000, 4) == 750  # 3/4 of the gathered buffer
    assert ring_bytes("reduce-scatter", 999, 3) == 666
    assert ring_bytes("all-reduce", 1000, 1) == 0


# -- invariants: every error names its key ------------------------------------------------------


@pytest.mark.parametrize(
    "sharding, message",
    [
        (
            {"mesh": '<["data"=4]>'},
            r'^sharding\.mesh: the axes of <\["data"=4\]> multiply to 4 devices but '
            r"hardware\.num_chips is 2$",
        ),
        ({"mesh": '<["data"=2, "data"=1]>'}, r"^sharding\.mesh: axis 'data' appears twice"),
        ({"mesh": '<["data"=2>'}, r"^sharding\.mesh: expected"),
        (
            {"activations": '[{"model"}, {}]'},
            r"^sharding\.activations: the activations \[batch, features\]: axis 'model' is not in "
            r"the mesh",
        ),
        (
            {"weights": {"top_*/kernel": '[{"z"}, {}]'}},
            r"^sharding\.weights\.top_\*/kernel: top_0/kernel: axis 'z' is not in the mesh",
        ),
        (
            {"weights": {"top_0/kernel": '[{"data"}, {"data"}]'}},
            r"^sharding\.weights\.top_0/kernel: top_0/kernel: axis 'data' is used twice",
        ),
        (
            {"weights": {"*/bias": '[{"data"}, {}]'}},
            r"^sharding\.weights\.\*/bias: bottom_0/bias has rank 1 \(shape \[64\]\) but the "
            r"sharding \[\{\"data\"\}, \{\}\] lists 2 dimensions$",
        ),
        (
            {"weights": {"mid_*/kernel": '[{"data"}, {}]'}},
            r"^sharding\.weights\.mid_\*/kernel: matches no dense parameter",
        ),
        (
            {"mesh": '@m = <["data"=2]>', "weights": {"top_0/kernel": '<@other, [{"data"}, {}]>'}},
            r"^sharding\.weights\.top_0/kernel: top_0/kernel refers to mesh @other but the program "
            r"has one mesh, @m",
        ),
        (
            {
                "weights": {"top_0/kernel": '[{"data"}, {}]', "top_1/kernel": "[{}, {}]"},
                "groups": {"fc": ["top_*/kernel"]},
            },
            r"^sharding\.groups\.fc: top_0/kernel shards dimension 0 over \{\"data\"\} but "
            r"top_1/kernel over \{\}; tensors of one sharding group must share one sharding$",
        ),
        (
            {"groups": {"a": ["top_0/kernel"], "b": ["top_*/kernel"]}},
            r"^sharding\.groups\.b: top_0/kernel is already in sharding group 'a'",
        ),
        (
            {"groups": {"g": ["top_0/kernel", "top_0/bias"]}},
            r"^sharding\.groups\.g: top_0/kernel has rank 2 but top_0/bias has rank 1",
        ),
        (
            {
                "weights": {"top_0/kernel": '[{"data"}, {}]', "top_1/kernel": "[{?}, {}]", "cross_0/u": "[{}, {}]"},
                "groups": {"g": ["top_*/kernel", "cross_0/u"]},
            },
            r"^sharding\.groups\.g: top_0/kernel shards dimension 0 over \{\"data\"\} but "
            r"cross_0/u over \{\}",
        ),
    ],
)
def test_each_invariant_is_an_error_naming_its_key(small_raw, sharding, message):
    msg = error_of(with_sharding(small_raw, **sharding))
    assert re.search(message, msg), msg
    assert "\n" not in msg


def test_open_dimension_that_the_group_does_not_extend_is_an_error(small_raw):
    msg = error_of(
        with_sharding(
            small_raw,
            4,
            mesh='<["data"=2, "model"=2]>',
            weights={"top_0/kernel": '[{"data", "model"}, {}]', "top_1/kernel": '[{"model", ?}, {}]'},
            groups={"g": ["top_*/kernel"]},
        )
    )
    assert msg.startswith(
        "sharding.groups.g: top_1/kernel opens dimension 0 as "
        '{"model", ?}, which the group\'s {"data", "model"} does not extend'
    )


# -- resolution: open dimensions and groups ---------------------------------------------------


def shardings_of(plan) -> dict[str, str]:
    return {p.name: str(p.sharding) for p in plan.params}


def test_open_dimensions_resolve_to_their_group_and_unset_members_join_it(small_raw):
    cfg = config_from_dict(
        with_sharding(
            small_raw,
            weights={
                "top_0/kernel": '[{"data"}, {}]',
                "top_1/kernel": "[{?}, {?}]",
                "bottom_1/kernel": '[{"data", ?}, {?}]',
            },
            groups={"fc": ["top_*/kernel", "cross_0/u"]},
        )
    )
    s = shardings_of(plan_dense(cfg))
    # group members: the closed member's sharding; open dims and unset members take it
    assert s["top_0/kernel"] == s["top_1/kernel"] == s["cross_0/u"] == '[{"data"}, {}]'
    # outside a group an open dimension keeps its listed axes (no propagation modelled)
    assert s["bottom_1/kernel"] == '[{"data"}, {}]'
    assert s["bottom_0/kernel"] == s["cross_0/v"] == "[{}, {}]"  # unmatched: replicated
    assert s["top_0/bias"] == "[{}]"


def test_group_of_open_members_takes_the_longest_listed_axes(small_raw):
    cfg = config_from_dict(
        with_sharding(
            small_raw,
            4,
            mesh='<["data"=2, "model"=2]>',
            weights={"top_0/kernel": '[{"data", ?}, {?}]', "top_1/kernel": '[{"data", "model", ?}, {?}]'},
            groups={"fc": ["top_*/kernel"]},
        )
    )
    s = shardings_of(plan_dense(cfg))
    assert s["top_0/kernel"] == s["top_1/kernel"] == '[{"data", "model"}, {}]'


def test_first_matching_pattern_wins(small_raw):
    cfg = config_from_dict(with_sharding(small_raw, weights={"top_0/kernel": "[{}, {}]", "*/kernel": '[{"data"}, {}]'}))
    s = shardings_of(plan_dense(cfg))
    assert s["top_0/kernel"] == "[{}, {}]" and s["top_1/kernel"] == '[{"data"}, {}]'


# -- implied collectives, hand-computed --------------------------------------------------------


def collectives(plan) -> dict[tuple[str, str], tuple[tuple[str, ...], int, int, int]]:
    return {(c.phase, c.name): (c.axes, c.num_devices, c.buffer_bytes, c.nbytes) for c in plan.collectives}


def test_default_is_data_parallel_with_the_previous_all_reduce(small_raw):
    cfg = config_from_dict(small_raw)
    plan = plan_dense(cfg)
    params = sum(math.prod(s) for _, s in DENSE)
    assert params == dense_work(cfg).params == 21_681
    assert str(plan.mesh) == '<["data"=2]>' and plan.samples_per_device == 128
    # the previous model: 2 (n-1)/n * params * 4 bytes, one all-reduce over every chip
    assert collectives(plan) == {
        ("update", "all-reduce.dense_gradients"): (("data",), 2, params * 4, int(2 * (2 - 1) / 2 * params * 4))
    }
    assert plan.forward_flops == dense_work(cfg).forward_flops(128)


def test_fsdp_kernels_gather_and_scatter_and_all_reduce_the_rest(small_raw):
    plan = plan_dense(config_from_dict(with_sharding(small_raw, weights=FSDP_KERNELS)))
    # kernels over data=2, rows padded up: 13 -> 7, 64 -> 32, 144 -> 72, 64 -> 32 per device
    stored_kernels = 7 * 64 + 32 * 32 + 72 * 64 + 32 * 1
    assert stored_kernels == 6_112
    rest = 64 + 32 + 2 * INTERACTION * 32 + INTERACTION + 64 + 1  # biases, cross U and V
    assert rest == 9_521
    assert collectives(plan) == {
        ("forward", "all-gather.dense_weights"): (("data",), 2, 2 * stored_kernels * 4, stored_kernels * 4),
        ("update", "reduce-scatter.dense_gradients"): (("data",), 2, 2 * stored_kernels * 4, stored_kernels * 4),
        ("update", "all-reduce.dense_gradients"): (("data",), 2, rest * 4, rest * 4),
    }
    kernel = {p.name: p for p in plan.params}["bottom_0/kernel"]
    assert kernel.stored_shape == (7, 64) and kernel.compute_shape == (13, 64)


def test_tensor_parallel_pair_all_reduces_its_output(small_raw):
    # Megatron pair: column-parallel top_0, row-parallel top_1; open feature dimension
    raw = with_sharding(
        small_raw,
        4,
        mesh='<["data"=2, "model"=2]>',
        activations='[{"data"}, {?}]',
        weights={"top_0/kernel": '[{}, {"model"}]', "top_1/kernel": '[{"model"}, {}]'},
    )
    plan = plan_dense(config_from_dict(raw))
    assert plan.samples_per_device == 128  # 256 samples over the data axis only
    out = 128 * 1 * 4  # top_1's output [128, 1], partial sums over model
    c = collectives(plan)
    assert c[("forward", "all-reduce.dense_activations")] == (("model",), 2, out, out)
    assert c[("backward", "all-reduce.activation_gradients")] == (("model",), 2, out, out)
    assert ("forward", "all-gather.dense_activations") not in c
    macs = 13 * 64 + 64 * 32 + INTERACTION * 32 * 2 + INTERACTION * 32 + 32 * 1
    assert plan.forward_flops == 2 * 128 * macs and plan.backward_flops == 4 * 128 * macs
    # replicated weights: gradients all-reduced over the data axis only (the shards of
    # top_0/top_1 are half the size)
    params = sum(math.prod(s) for _, s in DENSE) - INTERACTION * 64 // 2 - 64 // 2
    assert c[("update", "all-reduce.dense_gradients")] == (("data",), 2, params * 4, params * 4)


def test_closed_feature_dimension_gathers_a_column_parallel_output(small_raw):
    raw = with_sharding(
        small_raw,
        4,
        mesh='<["data"=2, "model"=2]>',
        activations='[{"data"}, {}]',
        weights={"top_0/kernel": '[{}, {"model"}]', "top_1/kernel": '[{"model"}, {}]'},
    )
    c = collectives(plan_dense(config_from_dict(raw)))
    gathered = 128 * 64 * 4  # top_0's output [128, 64], gathered over model
    assert c[("forward", "all-gather.dense_activations")] == (("model",), 2, gathered, gathered // 2)
    assert c[("backward", "reduce-scatter.activation_gradients")] == (("model",), 2, gathered, gathered // 2)
    assert c[("forward", "all-reduce.dense_activations")][3] == 128 * 4


# -- end to end ---------------------------------------------------------------------------------


def kind_bytes(sim) -> dict[str, list[int]]:
    """Per TC collective name: bytes of each task of step 1 (one per chip)."""
    c = sim.graph.columns()
    out = {}
    for k in TC_COLLECTIVES:
        m = (c["kind"] == k) & (c["step"] == 1)
        if m.any():
            out[KIND_NAMES[k]] = c["bytes"][m].tolist()
    return out


def test_default_run_has_one_all_reduce_of_the_previous_size(small_raw):
    sim = simulate(config_from_dict(small_raw))
    params = dense_work(sim.cfg).params
    assert kind_bytes(sim) == {"all-reduce.dense_gradients": [int(2 * 1 / 2 * params * 4)] * 2}


def test_one_chip_keeps_a_zero_byte_all_reduce(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["num_chips"] = 1
    sim = simulate(config_from_dict(raw))
    assert kind_bytes(sim) == {"all-reduce.dense_gradients": [0]}


def test_every_dense_collective_is_a_tc_collective():
    assert {KIND_CATEGORIES[k] for k in TC_COLLECTIVES} == {"tc_collective"}
    assert KIND_NAMES[ALLREDUCE] == "all-reduce.dense_gradients"


def test_fsdp_run_records_gather_and_scatter_and_stores_less(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    dp = record_run(path, [], "dp", None, str(tmp_path / "dp"))
    fsdp = record_run(
        path,
        [
            "sharding.weights.*/kernel='[{\"data\"}, {}]'",
            "sharding.weights.cross_*/[uv]='[{}, {\"data\"}]'",
            "sharding.weights.*/bias='[{\"data\"}]'",
        ],
        "fsdp",
        None,
        str(tmp_path / "fsdp"),
    )
    names = {}
    for label, r in (("dp", dp), ("fsdp", fsdp)):
        tr = read_trace(r.trace_path)
        ev, s = tr.data["events"], tr.strings
        cat = np.array([s[c] for c in ev["category"]])
        name = np.array([s[n] for n in ev["name"]])
        names[label] = {str(n): int((name == n).sum()) for n in np.unique(name[cat == "tc_collective"])}
        series = counters_by_line(tr)
        names[label + "_heap"] = series["/device:TPU:0", "HBM heap: dense weights"][1].max()
    steps, chips = small_raw["steps"], 2
    assert names["dp"] == {"all-reduce.dense_gradients": steps * chips}
    assert names["fsdp"] == {"all-gather.dense_weights": steps * chips, "reduce-scatter.dense_gradients": steps * chips}
    assert names["fsdp_heap"] < names["dp_heap"]
    # the counters are the tiled-layout sizes of each chip's shard
    cfg = config_from_dict(small_raw)
    assert names["dp_heap"] == dense_bytes(cfg, 4)


def test_fsdp_shard_bytes_follow_the_tiled_layout(small_raw):
    cfg = config_from_dict(with_sharding(small_raw, weights=FSDP_KERNELS))

    # f32 tiles: (8,128) when the second-minor dim is > 4, (2,128) when it is 1-2;
    # rank 1 laid out as [1, n] -> (2,128) tiles
    def tiled(shape):
        if len(shape) == 1:
            shape = (1, *shape)
        r, c = shape
        t = 2 if r <= 2 else 4 if r <= 4 else 8
        return -(-r // t) * t * -(-c // 128) * 128 * 4

    stored = {
        "bottom_0/kernel": (7, 64),
        "bottom_1/kernel": (32, 32),
        "top_0/kernel": (72, 64),
        "top_1/kernel": (32, 1),
    }
    want = sum(tiled(stored.get(n, s)) for n, s in DENSE)
    assert dense_bytes(cfg, 4) == want
    assert dense_bytes(config_from_dict(small_raw), 4) == sum(tiled(s) for _, s in DENSE)


# -- manual computations (sdy.manual_computation) ---------------------------------------------

MESH_DM = '<["data"=2, "model"=2]>'
IN_DATA = ['[{"data"}, {?}]']


def manual(name: str, axes: list[str], params: list[str], ins=None, outs=None, parent: str = "") -> dict:
    entry = {
        "name": name,
        "axes": axes,
        "params": params,
        "in_shardings": IN_DATA if ins is None else ins,
        "out_shardings": IN_DATA if outs is None else outs,
    }
    if parent:
        entry["parent"] = parent
    return entry


def test_local_shape_by_hand():
    mesh = parse_mesh('<["x"=2, "y"=2]>')
    s = parse_sharding('[{"x"}, {"y"}]', "k")
    # manual over x: only x divides; the free y split is the automatic partitioner's
    assert local_shape((1024, 512), s, mesh, {"x"}) == (512, 512)
    assert per_device_shape((512, 512), s, mesh, {"y"}) == (512, 256)
    assert local_shape((1024, 512), s, mesh, {"x", "y"}) == (512, 256)
    assert local_shape((1024, 512), s, mesh, set()) == (1024, 512)
    with pytest.raises(
        ConfigError,
        match=r"^sharding\.manual\[2\]\.params: w: dimension of "
        r"size 13 does not split",
    ):
        local_shape((13, 4), s, mesh, {"x"}, "sharding.manual[2].params", "w")


def test_replicated_axes_parse_and_print_back():
    s = parse_sharding('<@m, [{"data"}, {}], replicated={"model"}>', "k")
    assert s.replicated == ("model",) and s.mesh_name == "m"
    assert str(s) == '[{"data"}, {}], replicated={"model"}'
    assert str(s.closed()) == str(s)


@pytest.mark.parametrize(
    ("manuals", "extra", "message"),
    [
        ([manual("r", ["z"], ["top_*"])], {}, r"^sharding\.manual\[0\]\.axes: axis 'z' is not in the mesh"),
        (
            [manual("r", ["model", "data"], ["top_*"], ['[{"data"}, {"model"}]'], ['[{"data"}, {"model"}]'])],
            {},
            r"^sharding\.manual\[0\]\.axes: manual axes \['model', 'data'\] are not in mesh order",
        ),
        ([manual("r", [], ["top_*"])], {}, r"^sharding\.manual\[0\]\.axes: .* at least one"),
        ([manual("r", ["data", "data"], ["top_*"])], {}, r"^sharding\.manual\[0\]\.axes: .*twice"),
        (
            [manual("r", ["data"], ["top_*"], ['<@other, [{"data"}, {}]>'])],
            {"mesh": '@m = <["data"=2, "model"=2]>'},
            r"^sharding\.manual\[0\]\.in_shardings\[0\]: the region's input .* refers to mesh "
            r"@other but the program has one mesh, @m",
        ),
        (
            [manual("r", ["data"], ["top_*"], ['<@a, [{"data"}, {}]>'], ['<@b, [{"data"}, {}]>'])],
            {},
            r"^sharding\.manual\[0\]\.out_shardings\[0\]: refers to mesh @b .* one mesh",
        ),
        (
            [manual("r", ["model"], ["top_*"], ['[{"data"}, {}]'])],
            {},
            r"^sharding\.manual\[0\]\.in_shardings\[0\]: .* does not use manual axis 'model'",
        ),
        (
            [manual("r", ["model"], ["top_*"], ['[{"data"}, {}], replicated={"model"}'], ['[{"data"}, {}]'])],
            {},
            r"^sharding\.manual\[0\]\.out_shardings\[0\]: .* does not use manual axis 'model'",
        ),
        (
            [manual("r", ["data"], ["top_*"], ['[{"model", "data"}, {}]'])],
            {},
            r"^sharding\.manual\[0\]\.in_shardings\[0\]: .* dimension 0 lists free axis 'model' "
            r"before manual axis 'data'",
        ),
        (
            [manual("r", ["data"], ["top_*"])],
            {"weights": {"top_0/kernel": '[{"model", "data"}, {}]'}},
            r"^sharding\.manual\[0\]\.params: top_0/kernel: dimension 0 lists free axis 'model' "
            r"before manual axis 'data' in \{\"model\", \"data\"\}; free axes must be minor",
        ),
        (
            [manual("outer", ["data"], ["top_*"]), manual("inner", ["data"], ["top_0/*"], parent="outer")],
            {},
            r"^sharding\.manual\[1\]\.axes: manual axis 'data' is also manual in the enclosing "
            r"region 'outer'; nested manual computations use disjoint manual axes",
        ),
        (
            [
                manual(
                    "inner", ["model"], ["top_*"], ['[{"data"}, {"model"}]'], ['[{"data"}, {"model"}]'], parent="nope"
                )
            ],
            {},
            r"^sharding\.manual\[0\]\.parent: no manual computation named 'nope'",
        ),
        (
            [
                manual("a", ["data"], ["top_*"], parent="b"),
                manual("b", ["model"], ["top_*"], ['[{}, {"model"}]'], ['[{}, {"model"}]'], parent="a"),
            ],
            {},
            r"^sharding\.manual\[1\]\.parent: nesting of 'a' loops back to 'a'",
        ),
        (
            [manual("a", ["data"], ["top_*"], parent="a")],
            {},
            r"^sharding\.manual\[0\]\.parent: nesting of 'a' loops back to 'a'",
        ),
        (
            [
                manual("outer", ["data"], ["top_1/*"]),
                manual(
                    "inner",
                    ["model"],
                    ["top_0/*"],
                    ['[{"data"}, {"model"}]'],
                    ['[{"data"}, {"model"}]'],
                    parent="outer",
                ),
            ],
            {},
            r"^sharding\.manual\[1\]\.params: top_0/kernel is not covered by the enclosing region",
        ),
        (
            [
                manual("a", ["data"], ["top_*"]),
                manual("b", ["model"], ["top_0/*"], ['[{}, {"model"}]'], ['[{}, {"model"}]']),
            ],
            {},
            r"^sharding\.manual\[1\]\.params: top_0/kernel is also in region 'a' and neither "
            r"encloses the other",
        ),
        (
            [manual("r", ["data"], ["nothing*"])],
            {},
            r"^sharding\.manual\[0\]\.params: pattern 'nothing\*' matches no dense parameter",
        ),
        (
            [manual("r", ["data"], ["top_*"]), manual("r", ["model"], ["cross_*"])],
            {},
            r"^sharding\.manual\[1\]\.name: duplicate manual computation 'r'",
        ),
        (
            [manual("r", ["data"], ["top_*"], ins=[])],
            {},
            r"^sharding\.manual\[0\]\.in_shardings: expected one sharding",
        ),
        (
            [manual("r", ["data"], ["top_1/kernel"])],
            {"weights": {"top_1/kernel": '[{}, {"data"}]'}},
            r"^sharding\.manual\[0\]\.params: top_1/kernel: dimension of size 1 does not split",
        ),
        ([{"axes": ["data"], "params": ["top_*"]}], {}, r"^sharding\.manual\[0\]\.name: required"),
    ],
)
def test_each_manual_invariant_is_an_error_naming_its_key(small_raw, manuals, extra, message):
    sharding = {"mesh": MESH_DM, **extra, "manual": manuals}
    msg = error_of(with_sharding(small_raw, 4, **sharding))
    assert re.search(message, msg), msg
    assert "\n" not in msg


def test_valid_nested_manual_computations_have_local_shapes(small_raw):
    raw = with_sharding(
        small_raw,
        4,
        mesh=MESH_DM,
        weights={"top_0/kernel": '[{}, {"model"}]', "top_1/kernel": '[{"data"}, {}]'},
        manual=[
            manual("outer", ["data"], ["top_*"]),
            manual(
                "inner",
                ["model"],
                ["top_0/*"],
                ['[{"data"}, {}], replicated={"model"}'],
                ['[{"data"}, {"model"}]'],
                parent="outer",
            ),
        ],
    )
    plan = plan_dense(config_from_dict(raw))
    outer, inner = plan.regions
    assert (outer.name, outer.axes, outer.scope_axes) == ("outer", ("data",), ("data",))
    assert (inner.parent, inner.axes, inner.scope_axes) == ("outer", ("model",), ("data", "model"))
    assert inner.params == ("top_0/kernel", "top_0/bias")
    # outer: input [256, 144] over data -> [128, 144]; output [256, 1] -> [128, 1]
    assert outer.in_local_shape == (128, INTERACTION) and outer.out_local_shape == (128, 1)
    # inner: output [256, 64] over data (ancestor) and model (its own) -> [128, 32]
    assert inner.in_local_shape == (128, INTERACTION) and inner.out_local_shape == (128, 32)
    p = {q.name: q for q in plan.params}
    assert p["top_0/kernel"].region == "inner" and p["top_0/kernel"].local_shape == (144, 32)
    assert p["top_0/kernel"].compute_shape == (144, 32)
    # FSDP rows over the manual data axis: the body computes with its local shard, no
    # automatic all-gather; without the region it would gather (compute shape [64, 1])
    assert p["top_1/kernel"].region == "outer" and p["top_1/kernel"].local_shape == (32, 1)
    assert p["top_1/kernel"].compute_shape == (32, 1) and p["top_1/kernel"].gather_axes == ()
    assert p["bottom_0/kernel"].region == "" and p["bottom_0/kernel"].local_shape == (13, 64)
    names = {c.name for c in plan.collectives}
    assert "all-gather.dense_weights" not in names
    # the gradient all-reduce over data covers every weight not sharded over data
    params = sum(math.prod(s) for _, s in DENSE)
    ar = {c.name: c for c in plan.of("update")}["all-reduce.dense_gradients"]
    assert ar.axes == ("data",) and ar.buffer_bytes == (params - 64 * 1 - 144 * 64 + 144 * 32) * 4


def test_default_has_no_manual_regions(small_raw):
    plan = plan_dense(config_from_dict(small_raw))
    assert plan.regions == ()
    assert all(p.region == "" and p.local_shape == p.shape for p in plan.params)

"""Workload configs: validation errors name the key, overrides, extends, presets, limits."""

from __future__ import annotations

import copy
import os

import pytest

from sim_backend.config import config_from_dict
from sim_backend.config_load import apply_override, load_config, parse_value
from sim_backend.emulator import setup
from sim_backend.errors import ConfigError
from sim_backend.hardware import PRESETS
from sim_backend.limits import read_limits_file
from tests.sim_backend.conftest import BUNDLED, CONFIG_DIR


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_configs_load(name):
    cfg = load_config(os.path.join(CONFIG_DIR, name))
    # DLRM-shaped: the 26 baseline tables, or more (deep_prefetch.toml: 100 tables in 20 stacks)
    assert cfg.steps == 20 and len(cfg.tables) >= 26 and len(cfg.features) == len(cfg.tables)
    assert cfg.hardware.generation == "v5p"


def test_baseline_is_mlperf_dlrm_dcnv2_shaped():
    cfg = load_config(os.path.join(CONFIG_DIR, "baseline.toml"))
    assert [t.vocab for t in cfg.tables][:6] == [40000000, 39060, 17295, 7424, 20265, 3]
    assert sum(f.multi_hot for f in cfg.features) == 214
    assert {t.width for t in cfg.tables} == {128}


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda r: r["sparsecore"].update(allow_id_droping=True), "sparsecore.allow_id_droping"),
        (lambda r: r["sparsecore"].update(max_ids_per_partition=0), "sparsecore.max_ids_per_partition"),
        (lambda r: r["sparsecore"].update(allow_id_dropping="yes"), "sparsecore.allow_id_dropping"),
        (lambda r: r["flags"].update(maximum_parallel_iterations=1.5), "flags.maximum_parallel_iterations"),
        (lambda r: r["hardware"].update(generation="v9"), "hardware.generation"),
        (lambda r: r["features"][0].update(table="nope"), "features[0].table"),
        (lambda r: r["features"][1].update(distribution="pareto"), "features[1].distribution"),
        (lambda r: r["features"][1].update(multi_hot_min=9), "features[1].multi_hot_min"),
        (lambda r: r["tables"][0].update(dtype="f16"), "tables[0].dtype"),
        (lambda r: r["tables"].append({"name": "big", "vocab": 3}), "tables[3].name"),
        (lambda r: r.update(global_batch=100), "global_batch"),
        (lambda r: r.update(cost={"warp_speed": 2}), "cost.warp_speed"),
        (lambda r: r["sparsecore"].update(max_ids_per_table={"ghost": 3}), "sparsecore.max_ids_per_table.ghost"),
        (lambda r: r["features"][0].pop("name"), "features[0].name"),
        (lambda r: r.update(steps=0), "steps"),
    ],
)
def test_errors_name_the_key(small_raw, mutate, key):
    mutate(small_raw)
    with pytest.raises(ConfigError) as exc:
        config_from_dict(small_raw)
    assert str(exc.value).startswith(key), str(exc.value)
    assert "\n" not in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_overrides_reach_sections_lists_and_types(small_raw):
    raw = copy.deepcopy(small_raw)
    for item in [
        "sparsecore.allow_id_dropping=true",
        "tables.mid.width=64",
        "features.1.multi_hot=5",
        "flags.maximum_parallel_iterations=3",
        "hardware.generation=v4",
        "dense.top_mlp=[8, 1]",
        "name=other",
        "cost.tc_efficiency=0.25",
    ]:
        apply_override(raw, item)
    cfg = config_from_dict(raw)
    assert cfg.sparsecore.allow_id_dropping is True
    assert next(t for t in cfg.tables if t.name == "mid").width == 64
    assert cfg.features[1].multi_hot == 5
    assert cfg.flags.maximum_parallel_iterations == 3
    assert cfg.hardware.generation == "v4"
    assert cfg.dense.top_mlp == [8, 1]
    assert cfg.name == "other"
    assert cfg.cost == {"tc_efficiency": 0.25}


@pytest.mark.parametrize(
    "item, msg",
    [
        ("novalue", "expected KEY=VALUE"),
        ("tables.ghost.width=3", "no entry named 'ghost'"),
        ("tables.mid=3", "name a field"),
    ],
)
def test_bad_overrides(small_raw, item, msg):
    with pytest.raises(ConfigError, match=msg):
        apply_override(small_raw, item)


def test_override_of_unknown_key_is_caught_by_validation(small_raw):
    apply_override(small_raw, "flags.max_parallel_iterations=2")
    with pytest.raises(ConfigError, match="^flags.max_parallel_iterations: unknown key"):
        config_from_dict(small_raw)


def test_parse_value():
    assert parse_value("3") == 3 and parse_value("2.5") == 2.5 and parse_value("true") is True
    assert parse_value("v5p") == "v5p" and parse_value('"x y"') == "x y"
    assert parse_value("[1, 2]") == [1, 2]


def test_extends_merges_sections_and_named_entries(tmp_path):
    write(
        tmp_path,
        "base.toml",
        """
global_batch = 64
[hardware]
num_chips = 1
[flags]
maximum_parallel_iterations = 3
xla_sparse_core_max_ids_file = "lim.toml"
[[tables]]
name = "t"
vocab = 100
[[features]]
name = "f"
table = "t"
multi_hot = 2
""",
    )
    variant = write(
        tmp_path,
        "v.toml",
        """
extends = "base.toml"
name = "v"
[flags]
tf_xla_disable_full_embedding_pipelining = true
[[features]]
name = "f"
multi_hot = 5
[[features]]
name = "g"
table = "t"
""",
    )
    cfg = load_config(variant)
    assert cfg.flags.maximum_parallel_iterations == 3
    assert cfg.flags.tf_xla_disable_full_embedding_pipelining is True
    assert [(f.name, f.multi_hot) for f in cfg.features] == [("f", 5), ("g", 1)]
    # a path is relative to the file that names it
    assert cfg.flags.xla_sparse_core_max_ids_file == str(tmp_path / "lim.toml")


def test_extends_cycle_and_missing_file(tmp_path):
    a = write(tmp_path, "a.toml", 'extends = "b.toml"\n')
    write(tmp_path, "b.toml", 'extends = "a.toml"\n')
    with pytest.raises(ConfigError, match="extends itself"):
        load_config(a)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(str(tmp_path / "missing.toml"))
    bad = write(tmp_path, "bad.toml", "steps = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize("gen", sorted(PRESETS))
def test_presets_match_the_domain_table(small_raw, gen):
    expected = {"v4": (4, 16, 8, 32), "v5p": (4, 16, 8, 96), "v6e": (2, 16, 8, 32)}[gen]
    small_raw["hardware"] = {"generation": gen, "num_chips": 2}
    hw = setup(config_from_dict(small_raw))[0]
    assert (hw.sparsecores_per_chip, hw.tiles_per_sparsecore, hw.simd_width, hw.hbm_bytes >> 30) == expected


def test_custom_hardware_needs_every_figure(small_raw):
    small_raw["hardware"] = {"generation": "custom", "num_chips": 1, "sparsecores_per_chip": 4}
    with pytest.raises(ConfigError, match="^hardware.tiles_per_sparsecore: required"):
        setup(config_from_dict(small_raw))
    small_raw["hardware"] = {"generation": "v5p", "num_chips": 2, "tc_peak_flops": 1e12}
    assert setup(config_from_dict(small_raw))[0].tc_peak_flops == 1e12


def _limits(raw: dict) -> dict:
    """The compiled limits of each stack of a config (by stack name)."""
    return setup(config_from_dict(raw))[1]


def test_limits_precedence(small_raw, tmp_path):
    # small: big + mid stack (both width 32) as "big_mid"; tiny (width 16) is a stack of its own
    small_raw["sparsecore"]["disable_table_stacking"] = True
    limits = write(tmp_path, "limits.toml", "[tables.big]\nmax_ids_per_partition = 11\n")
    small_raw["sparsecore"].update(
        max_ids_per_partition=100, max_unique_ids_per_partition=50, max_ids_per_table={"mid": 161, "tiny": 1600}
    )
    small_raw["tables"][0]["max_ids_per_partition"] = 77
    small_raw["tables"][2]["max_ids_per_partition"] = 33
    small_raw["flags"]["xla_sparse_core_max_ids_file"] = limits
    lim = _limits(small_raw)
    assert (lim["big"].max_ids_per_partition, lim["big"].source) == (11, "limits_file")
    assert lim["big"].max_unique_ids_per_partition == 50  # not in the file: default
    assert lim["mid"].max_ids_per_partition == 21  # ceil(161 / 8 SparseCores)
    assert lim["tiny"].max_ids_per_partition == 33  # table key beats max_ids_per_table
    small_raw["sparsecore"]["stack_max_ids_per_partition"] = {"tiny": 5, "big": 6}
    lim = _limits(small_raw)
    assert (lim["tiny"].max_ids_per_partition, lim["tiny"].source) == (5, "stack_config")  # beats the table's
    assert lim["big"].max_ids_per_partition == 11  # the limits file beats the stack config


def test_a_stack_of_several_tables_takes_stack_limits_not_its_tables(small_raw, tmp_path):
    """As jax-tpu-embedding: a stack's limit is the stack's (default 256 there, the sparsecore
    defaults here), never the sum of its tables' limits; the tables' own limits are named."""
    small_raw["sparsecore"].update(max_ids_per_partition=100, max_unique_ids_per_partition=50)
    small_raw["tables"][0]["max_ids_per_partition"] = 77
    small_raw["sparsecore"]["max_ids_per_table"] = {"mid": 161}
    lim = _limits(small_raw)
    stack = lim["big_mid"]
    assert (stack.max_ids_per_partition, stack.max_unique_ids_per_partition, stack.source) == (100, 50, "default")
    assert stack.ignored_tables == ("big", "mid")
    small_raw["flags"]["xla_sparse_core_max_ids_file"] = write(
        tmp_path, "l.toml", "[stacks.big_mid]\nmax_ids_per_partition = 300\n"
    )
    lim = _limits(small_raw)
    assert (lim["big_mid"].max_ids_per_partition, lim["big_mid"].source) == (300, "limits_file")
    assert lim["tiny"].source == "default"


@pytest.mark.parametrize(
    "text, msg",
    [
        ("[tables.big]\nmax_ids_per_partition = 0\n", "positive 32-bit integer"),
        ("[stacks.big_mid]\nmax_ids_per_partition = 2147483648\n", "positive 32-bit integer"),
        ("[tables.big]\nmax_idz = 3\n", "unknown key"),
        ("[other]\n", "only \\[stacks.NAME\\] and \\[tables.NAME\\]"),
        ("[tables.ghost]\nmax_ids_per_partition = 3\n", "no such table"),
    ],
)
def test_limits_file_errors(small_raw, tmp_path, text, msg):
    small_raw["flags"]["xla_sparse_core_max_ids_file"] = write(tmp_path, "l.toml", text)
    with pytest.raises(ConfigError, match=msg):
        _limits(small_raw)


def test_limits_of_stacks_the_config_lacks_are_ignored_and_named(small_raw, tmp_path):
    from sim_backend.limits import unused_limit_sections

    small_raw["flags"]["xla_sparse_core_max_ids_file"] = write(
        tmp_path, "l.toml", "[stacks.ghost]\nmax_ids_per_partition = 3\n[stacks.tiny]\nmax_ids_per_partition = 9\n"
    )
    cfg = config_from_dict(small_raw)
    hw, lim, groups, _ = setup(cfg)
    assert lim["tiny"].max_ids_per_partition == 9
    (line,) = unused_limit_sections(cfg, [g.name for g in groups])
    assert "[stacks.ghost]" in line and "ignored" in line


def test_limits_file_missing(tmp_path):
    with pytest.raises(ConfigError, match="no such limits file"):
        read_limits_file(str(tmp_path / "nope.toml"))


def test_unknown_key_suggests_the_closest(small_raw):
    small_raw["sparsecore"]["allow_id_droping"] = True
    with pytest.raises(ConfigError, match="did you mean allow_id_dropping"):
        config_from_dict(small_raw)

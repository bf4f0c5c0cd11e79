"""Config values are refused before anything is allocated: every numeric key has bounds, floats
are finite, sizes this machine cannot hold name the key, and config files that are directories,
FIFOs, not UTF-8 or cyclic give one line."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import types
import typing

import numpy as np
import pytest

from profiler.errors import ScprofError
from sim_backend import config, config_checks, config_load
from sim_backend.errors import ConfigError

# -- every numeric key, found by walking the schema (new keys are covered without editing this file)


def _numeric_kind(tp: object) -> type | None:
    """int or float for a numeric field (also Optional, list[...] and dict[str, ...] of one)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _numeric_kind(next(a for a in args if a is not type(None)))
    if origin is list:
        return _numeric_kind(args[0])
    if origin is dict:
        return _numeric_kind(args[1])
    return tp if tp in (int, float) else None


def _numeric_fields():
    """(dotted key, setter(raw, value), kind, metadata) for every numeric config key."""
    out = []

    def setter_for(path: tuple, tp: object):
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # Optional[X] -> X
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)

        def put(raw, v):
            node = raw
            for part in path[:-1]:
                node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
            if origin is list:
                v = [v]
            elif origin is dict:
                v = {"big": v}
            node[path[-1]] = v

        return put

    def walk(cls, path: tuple, key: str):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if f.name in config.SECTIONS and cls is config.RunConfig:
                walk(config.SECTIONS[f.name], (*path, f.name), f"{key}{f.name}.")
            elif f.name in config.LISTS and cls is config.RunConfig:
                walk(config.LISTS[f.name], (*path, f.name, 0), f"{key}{f.name}[0].")
            elif _numeric_kind(tp) is not None and f.name != "cost":  # cost: per constant, below
                out.append((f"{key}{f.name}", setter_for((*path, f.name), tp), _numeric_kind(tp), dict(f.metadata)))

    walk(config.RunConfig, (), "")
    for name in config.COST_CONSTANT_NAMES:
        kind = type(getattr(config.CostConstants(), name))
        out.append((f"cost.{name}", setter_for(("cost", name), kind), kind, config_checks.COST_BOUNDS[name]))
    return out


FIELDS = _numeric_fields()
IDS = [f[0] for f in FIELDS]


def test_schema_walk_finds_the_keys_users_know():
    for key in (
        "steps",
        "global_batch",
        "host.num_threads",
        "features[0].multi_hot",
        "features[0].zipf_exponent",
        "hardware.hbm_bandwidth_bytes_per_s",
        "tables[0].vocab",
        "cost.tc_efficiency",
    ):
        assert key in IDS
    assert len(FIELDS) > 60


@pytest.mark.parametrize("key, put, kind, meta", FIELDS, ids=IDS)
def test_every_numeric_key_declares_both_bounds(key, put, kind, meta):
    assert "min" in meta and "max" in meta, f"{key}: declare min= and max= in its _f(...) metadata"
    assert meta["min"] <= meta["max"]


def _expect(raw, *needles):
    with pytest.raises(ConfigError) as exc:
        config.config_from_dict(raw)
    text = str(exc.value)
    assert "\n" not in text
    for needle in needles:
        assert needle in text, text
    return text


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    "key, put, kind, meta", [f for f in FIELDS if f[2] is float], ids=[f[0] for f in FIELDS if f[2] is float]
)
def test_floats_must_be_finite(small_raw, key, put, kind, meta, bad):
    put(small_raw, bad)
    assert _expect(small_raw, key, "not a finite number").startswith(key)


@pytest.mark.parametrize("side", ["below", "above"])
@pytest.mark.parametrize("key, put, kind, meta", FIELDS, ids=IDS)
def test_values_outside_the_bounds_name_the_key(small_raw, key, put, kind, meta, side):
    if side == "below":
        value = meta["min"] - 1 if kind is int else meta["min"] - max(abs(meta["min"]), 1.0)
    else:
        value = meta["max"] + 1 if kind is int else meta["max"] + max(abs(meta["max"]), 1.0)
    put(small_raw, value)
    assert _expect(small_raw, key, "is not one of" if "choices" in meta else f"{side} the m").startswith(key)


@pytest.fixture
def small_machine(monkeypatch):
    """This machine, as far as the size checks know, has 2 GiB."""
    monkeypatch.setattr("sim_backend.config_checks.machine_memory_bytes", lambda: 2 << 30)


# steps = 100,000 is allowed and takes minutes (about 5 ms per step of the small workload)
ENDS = [(f, end) for f in FIELDS for end in ("min", "max") if (f[0], end) != ("steps", "max")]


@pytest.mark.parametrize(
    "key, put, kind, meta, end", [(*f, end) for f, end in ENDS], ids=[f"{f[0]}-{end}" for f, end in ENDS]
)
def test_every_key_at_its_bounds_runs_or_is_refused_in_one_line(small_raw, small_machine, key, put, kind, meta, end):
    """At each end of its range, a key gives a simulation with sane times or a user error, never a crash."""
    from sim_backend.emulator import simulate

    small_raw["steps"] = 1
    put(small_raw, meta[end])
    try:
        sim = simulate(config.config_from_dict(small_raw))
    except ScprofError as e:
        assert "\n" not in str(e)
        return
    if sim.failure is None:
        ends = np.asarray(sim.schedule.end_ps)
        assert ends.size and ends.min() >= 0 and np.all(ends < 2**62), key


# -- sizes -----------------------------------------------------------------------------------


def test_memory_estimate_by_hand(small_raw):
    """SMALL: 256 samples x (8 + 4 + 2 + 3) IDs; 2 chips x 4 SCs; widths 32, 32, 16 -> 2 table groups."""
    small_raw["steps"] = 5
    est = config_checks.estimate_run_memory(config.config_from_dict(small_raw))
    assert est.ids_per_step == 256 * 17
    assert est.id_bytes == 256 * 17 * config_checks.BYTES_PER_ID
    assert (est.sparse_cores, est.table_groups, est.sc_pairs) == (8, 2, 8 * 8 * 2)
    assert (
        est.total_bytes == est.id_bytes + 128 * config_checks.PEAK_BYTES_PER_SC_PAIR
    )  # nothing kept per step: record streams


def test_memory_estimate_bounds_the_measured_peak(small_raw):
    """The estimate is above what one step of ~1 M IDs really allocates (tracemalloc)."""
    import tracemalloc

    from sim_backend.emulator import simulate

    small_raw.update(steps=2, global_batch=4096)
    small_raw["features"][0]["multi_hot"] = 240  # 4096 x (240 + 9) = 1.02 M IDs per step
    cfg = config.config_from_dict(small_raw)
    tracemalloc.start()
    try:
        simulate(cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= config_checks.estimate_run_memory(cfg).total_bytes


def test_absurd_multi_hot_names_key_value_file_and_memory(tmp_path, small_raw):
    """The issue's case: multi_hot = 1e9 once died allocating TiB; now one line before any allocation."""
    path = tmp_path / "x.toml"
    path.write_text('extends = "base.toml"\n[[features]]\nname = "f_big"\nmulti_hot = 1000000000\n')
    base = tmp_path / "base.toml"
    base.write_text(_toml(small_raw))
    with pytest.raises(ConfigError) as exc:
        config_load.load_config(str(path))
    text = str(exc.value)
    assert text.startswith(f"{path}: features[0].multi_hot = 1000000000: ")
    assert "TiB" in text and "global_batch 256" in text and "more than this machine's" in text


def test_chips_are_named_when_they_drive_the_size_and_steps_cost_nothing(small_raw, small_machine):
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["num_chips"] = 4096
    raw["global_batch"] = 4096 * 4
    _expect(raw, "hardware.num_chips = 4096", "SparseCore-pair", "2 GiB")
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["num_chips"] = 256
    raw["global_batch"] = 256 * 4
    raw["steps"] = 100_000  # record streams: more steps need no more memory
    est = config_checks.check_run_memory(config.config_from_dict(raw), limit_bytes=2 * 2**30)
    assert (
        est.total_bytes == config_checks.estimate_run_memory(config.config_from_dict({**raw, "steps": 1})).total_bytes
    )


def test_steps_bound_holds_for_replaced_configs(small_raw):
    cfg = config.config_from_dict(small_raw)
    with pytest.raises(ConfigError, match="steps: 100001 is above the maximum 100,000"):
        dataclasses.replace(cfg, steps=100_001)
    assert dataclasses.replace(cfg, steps=100_000).steps == 100_000


def test_cost_model_refuses_tasks_longer_than_an_hour():
    from sim_backend.costmodel import MAX_TASK_S, _ps

    assert _ps(np.array([1.0, MAX_TASK_S])).tolist() == [10**12, int(MAX_TASK_S * 10**12)]
    for bad in (MAX_TASK_S * 2, math.nan, math.inf):
        with pytest.raises(ConfigError, match="too low for the sizes"):
            _ps(np.array([0.5, bad]))


# -- files -----------------------------------------------------------------------------------


def _toml(raw: dict) -> str:
    """A dict workload as TOML (enough for SMALL: scalars, lists of numbers, sections, arrays of tables)."""
    import json

    def value(v):
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    lines = [f"{k} = {value(v)}" for k, v in raw.items() if not isinstance(v, dict | list)]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += [f"[{k}]"] + [f"{kk} = {value(vv)}" for kk, vv in v.items()]
    for k in ("tables", "features"):
        for entry in raw[k]:
            lines += [f"[[{k}]]"] + [f"{kk} = {value(vv)}" for kk, vv in entry.items()]
    return "\n".join(lines) + "\n"


def _dir(tmp_path):
    os.mkdir(tmp_path / "cfg.toml")
    return tmp_path / "cfg.toml", "is a directory"


def _not_utf8(tmp_path):
    (tmp_path / "cfg.toml").write_bytes(b'name = "caf\xe9"\n')
    return tmp_path / "cfg.toml", "not UTF-8 text (byte 0xe9 at offset 11)"


def _fifo(tmp_path):
    os.mkfifo(tmp_path / "cfg.toml")
    return tmp_path / "cfg.toml", "not a regular file"


def _extends_dir(tmp_path):
    os.mkdir(tmp_path / "base")
    (tmp_path / "cfg.toml").write_text('extends = "base"\n')
    return tmp_path / "cfg.toml", "extends 'base'"


def _extends_missing(tmp_path):
    (tmp_path / "cfg.toml").write_text('extends = "nope.toml"\n')
    return tmp_path / "cfg.toml", "no such config file"


def _extends_cycle(tmp_path):
    (tmp_path / "cfg.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "cfg.toml"\n')
    return tmp_path / "cfg.toml", "cycle: cfg.toml -> b.toml -> cfg.toml"


def _deep(tmp_path):
    (tmp_path / "cfg.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    return tmp_path / "cfg.toml", "nested too deeply"


@pytest.mark.parametrize("make", [_dir, _not_utf8, _fifo, _extends_dir, _extends_missing, _extends_cycle, _deep])
def test_bad_config_files_are_one_line_config_errors(tmp_path, make):
    path, needle = make(tmp_path)
    with pytest.raises(ConfigError) as exc:
        config_load.load_config(str(path))  # a FIFO is never opened: this would block forever
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    assert str(exc.value).startswith(str(path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_config(tmp_path):
    path = tmp_path / "cfg.toml"
    path.write_text("steps = 3\n")
    path.chmod(0)
    with pytest.raises(ConfigError, match="permission denied|Permission denied"):
        config_load.load_config(str(path))


@pytest.mark.parametrize(
    "key, grow",
    [
        ("dense.top_mlp", lambda r: r["dense"].update(top_mlp=[8] * 257)),
        ("tables", lambda r: r.update(tables=[{"name": f"t{i}", "vocab": 10} for i in range(config.MAX_TABLES + 1)])),
        (
            "sharding.manual",
            lambda r: r.setdefault("sharding", {}).update(manual=[{"name": "m"}] * (config.MAX_TABLES + 1)),
        ),
    ],
)
def test_lists_have_a_length_limit(small_raw, key, grow):
    grow(small_raw)
    assert _expect(small_raw, "entries; at most").startswith(key)

"""Configs of trials: a stored run's config rebuilt, overrides applied, changes found, TOML written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sim_backend.config import effective_config
from sim_backend.config_load import load_config
from whatif.configs import (
    NotEmulated,
    apply_overrides,
    origin_config,
    prune_none,
    unreplayable_changes,
    user_changes,
    write_toml,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("name", ["baseline.toml", "tuned.toml", "fsdp.toml", "quantized.toml", "skewed_ids.toml"])
def test_stored_config_written_as_toml_loads_to_the_same_config(name: str, tmp_path: Path) -> None:
    cfg = load_config(str(CONFIGS / name))
    run = {"run_id": 1, "name": "r", "config": json.dumps({**effective_config(cfg), "resolved": {}, "run_name": "r"})}
    path = tmp_path / "again.toml"
    write_toml(origin_config(run), str(path), "header line")
    assert path.read_text().startswith("# header line\n")
    assert load_config(str(path)) == cfg


def test_overrides_set_dotted_keys_and_named_list_entries() -> None:
    raw = {
        "flags": {"maximum_parallel_iterations": 1},
        "tables": [{"name": "t0", "width": 8}, {"name": "t1", "width": 8}],
    }
    out = apply_overrides(
        raw,
        {
            "flags.maximum_parallel_iterations": 4,
            "tables.t1.width": 16,
            "host.num_threads": 8,
            "sparsecore.max_ids_per_table": {"t0": 100},
        },
    )
    assert out["flags"]["maximum_parallel_iterations"] == 4
    assert [t["width"] for t in out["tables"]] == [8, 16]
    assert out["host"] == {"num_threads": 8}
    assert out["sparsecore"] == {"max_ids_per_table": {"t0": 100}}
    assert raw["flags"]["maximum_parallel_iterations"] == 1  # the input is left as it was


def test_user_changes_leave_out_labels_and_name_list_entries() -> None:
    base = {"name": "a", "description": "x", "flags": {"m": 1, "f": ""}, "tables": [{"name": "t0", "width": 8}]}
    cand = {"name": "b", "description": "y", "flags": {"m": 2, "f": "/l.toml"}, "tables": [{"name": "t0", "width": 16}]}
    assert user_changes(base, cand) == {"flags.f": "/l.toml", "flags.m": 2, "tables.t0.width": 16}
    cand2 = {**cand, "tables": [{"name": "t0", "width": 8}, {"name": "t9", "width": 8}]}
    assert unreplayable_changes(base, cand2) == ["tables.t9.width"]


def test_a_real_capture_has_no_config_to_simulate() -> None:
    with pytest.raises(NotEmulated, match="not an emulated run"):
        origin_config({"run_id": 3, "name": "jax", "config": "{}"})


def test_prune_none_drops_nulls_at_every_depth() -> None:
    assert prune_none({"a": None, "b": {"c": None, "d": 1}, "e": [None, {"f": None}]}) == {"b": {"d": 1}, "e": [{}]}


def test_effective_config_round_trip_keeps_every_field_of_a_variant(tmp_path: Path) -> None:
    cfg = load_config(str(CONFIGS / "baseline.toml"), ["flags.maximum_parallel_iterations=3", 'tables.t5.dtype="bf16"'])
    run = {"run_id": 1, "name": "r", "config": json.dumps(effective_config(cfg))}
    write_toml(origin_config(run), str(tmp_path / "c.toml"))
    again = load_config(str(tmp_path / "c.toml"))
    assert dataclasses.asdict(again) == dataclasses.asdict(cfg)

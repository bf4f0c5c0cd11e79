"""Configs of trials: a stored run's config rebuilt as a raw (TOML-shaped) dict, overrides
applied to it, the user-set differences of two configs, and the tuned config as TOML."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import tomli_w

from profiler.errors import ScprofError
from sim_backend.config import LISTS
from sim_backend.config_load import apply_override, dotted_key

# Keys of a stored config that the emulator derived or that name the run, not the workload.
DERIVED_KEYS = ("resolved", "run_name")
# Keys that describe a run and change nothing it does: never a "change" between two runs.
LABEL_KEYS = ("name", "description")


class NotEmulated(ScprofError):
    """The run has no emulator config to re-simulate (a real capture, or an old trace)."""


def origin_config(run: dict[str, Any]) -> dict[str, Any]:
    """The raw config that reproduces a stored emulated run (its `runs.config`, less what the
    emulator derived from it). Raises NotEmulated for a run without one."""
    config = json.loads(run.get("config") or "{}")
    if not config.get("tables") or "flags" not in config:
        raise NotEmulated(
            f"run {run['name']!r} (run_id {run['run_id']}) is not an emulated run: it has no config to simulate"
        )
    return prune_none({k: v for k, v in config.items() if k not in DERIVED_KEYS})


def standalone_config(run: dict[str, Any]) -> dict[str, Any]:
    """The raw config of a stored emulated run as one self-contained file: limits that came
    from a limits file or FDO stats are written on their stacks
    (`sparsecore.stack_max_ids_per_partition.<stack>`, which gives the same compiled limits),
    so the config names no other file."""
    raw = origin_config(run)
    flags = raw.get("flags", {})
    if not flags.get("xla_sparse_core_max_ids_file") and not flags.get("fdo_stats_dir"):
        return raw
    resolved = json.loads(run["config"]).get("resolved", {}).get("limits", {})
    sc = raw.setdefault("sparsecore", {})
    for stack, limits in resolved.items():
        if limits.get("source") in ("limits_file", "fdo_stats"):
            sc.setdefault("stack_max_ids_per_partition", {})[stack] = limits["max_ids_per_partition"]
            sc.setdefault("stack_max_unique_ids_per_partition", {})[stack] = limits["max_unique_ids_per_partition"]
    flags["xla_sparse_core_max_ids_file"] = ""
    flags["fdo_stats_dir"] = ""
    return raw


def toml_text(raw: dict[str, Any], header: str = "") -> str:
    """A raw config as TOML text, with `header` as comment lines."""
    return "".join(f"# {line}\n" for line in header.splitlines()) + tomli_w.dumps(prune_none(raw))


def prune_none(value: Any) -> Any:
    """The value without None entries (TOML has no null; a missing key means the default)."""
    if isinstance(value, dict):
        return {k: prune_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_none(v) for v in value if v is not None]
    return value


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `raw` with dotted-key overrides set (as `scprof record --set KEY=VALUE` sets
    them: list entries by name, e.g. tables.t0.width)."""
    out = copy.deepcopy(raw)
    for key, value in flatten_overrides(overrides).items():
        apply_override(out, f"{key}={toml_value(value)}")
    return out


def flatten_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides whose values are tables (e.g. sparsecore.max_ids_per_table) as one key per leaf."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, dict) and value:
            out.update(flatten_overrides({f"{key}.{dotted_key(k)}": v for k, v in value.items()}))
        else:
            out[key] = value
    return out


def toml_value(value: Any) -> str:
    """A value as the TOML literal `--set` parses back to the same value."""
    return tomli_w.dumps({"v": value}).partition("=")[2].strip()


def flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value; list entries of `tables`/`features` keyed by name."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{dotted_key(key)}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{dotted}."))
        elif not prefix and key in LISTS and isinstance(value, list) and all(isinstance(e, dict) for e in value):
            for entry in value:
                name = dotted_key(str(entry.get("name")))
                out.update(flatten({k: v for k, v in entry.items() if k != "name"}, f"{dotted}.{name}."))
        else:
            out[dotted] = value
    return out


def user_changes(base: dict[str, Any], cand: dict[str, Any]) -> dict[str, Any]:
    """The keys a user changed from `base` to `cand` (raw configs), each with cand's value.

    What the emulator derives (resolved limits, stacks) is not a key here: it follows the key
    the user set (a limits file, a stacking cap), so its effect is grouped under that key.
    Entries of tables/features present on one side only, and run labels, are not changes
    that a --set can replay; the caller is told through `unreplayable_changes`.
    """
    fb, fc = flatten(base), flatten(cand)
    return {k: fc[k] for k in sorted(fc) if k in fb and fb[k] != fc[k] and k.split(".")[0] not in LABEL_KEYS}


def unreplayable_changes(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Keys present on one side only (added or removed tables, features, keys)."""
    fb, fc = flatten(base), flatten(cand)
    return sorted(k for k in set(fb) ^ set(fc) if k.split(".")[0] not in LABEL_KEYS)


def write_toml(raw: dict[str, Any], path: str, header: str = "") -> None:
    """Write a raw config as a TOML file `scprof record` accepts (the limits file, if any,
    referenced by an absolute path or one relative to `path`)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(toml_text(raw, header))
    os.replace(tmp, path)

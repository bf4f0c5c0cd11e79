"""Paths a stored run's config names, and what re-simulating the run may do with them.

A stored config (`runs.config`, from a trace's header: perhaps a shared trace or store) names
paths: the limits file, the FDO stats directory, features' ID files, the perf-table directory,
`extends` (sim_backend.config_load.config_paths lists them). Re-simulating the run (`analyze
--verify`, `compare --attribute`, `tune RUN`) must not make scprof open what such a path points
at on this machine, copy it into a trial folder or send it to a Dask cluster:

- The limits file and the FDO stats a run was recorded with are in its header
  (`resolved.limits_file`: the file's sections; `resolved.fdo_stats`: the limits per stack),
  so trials get them as files the engine writes from those numbers (`<prefix>_limits.toml`,
  `<prefix>_fdo_stats/`). The stored paths are never opened, with or without --trust-paths:
  a trial reproduces what the run was recorded with, for any stacking.
- Any other stored path (an ID file, a perf-table directory, `extends`, or a limits file or FDO
  directory whose content the store does not hold: a run recorded by an older scprof, a
  hand-made trace) is refused before anything is written: one line naming the run, the key and
  the path and how to allow it, unless the user passes --trust-paths or (tune RUN) gives that key
  with --set.
- A path that may be read (trusted, or the user's own --set) is made absolute against the
  working directory and read through sim_backend.config_checks' guarded reader (a regular file,
  size-capped, opened without blocking), every one before any work: a FIFO, a device, a symlink
  to one, a directory where a file belongs, a file too large is one line. Of these only a
  trusted limits file travels with the trials (to this machine's cluster or the user's
  --scheduler); ID files and tables are read where the trial runs, as `scprof record` reads them.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from profiler.errors import ScprofError
from sim_backend.config_checks import read_text_file
from sim_backend.config_load import apply_override, config_paths, dotted_key
from sim_backend.errors import ConfigError
from sim_backend.fdo_stats import MAX_LIMIT, fdo_stats_text, limits_stats, read_fdo_limits
from sim_backend.ids_file import load_ids_file
from sim_backend.limits import LIMIT_KEYS, parse_limits
from sim_backend.perf_tables.tables import load_tables
from whatif.configs import flatten_overrides

LIMITS_KEY = "flags.xla_sparse_core_max_ids_file"
FDO_KEY = "flags.fdo_stats_dir"
TRUST_FLAG = "--trust-paths"
FDO_FILE = "fdo_stats_0_0.csv"  # the one stats file of a written FDO directory
_PROBE = "<scprof: the key --set names>"


class UntrustedPath(ScprofError):
    """A stored config names a path this command may not read (no --trust-paths)."""


def limits_name(prefix: str) -> str:
    """The limits file trials of `prefix` ("origin", "cand") get in their folder."""
    return f"{prefix}_limits.toml"


def fdo_name(prefix: str) -> str:
    """The FDO stats directory trials of `prefix` get in their folder."""
    return f"{prefix}_fdo_stats"


@dataclass
class Localized:
    """A stored config as trials may use it, and the files each trial's folder gets."""

    raw: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)  # name (relative to the trial folder) -> bytes


def localize(
    run: dict[str, Any],
    raw: dict[str, Any],
    prefix: str,
    trust: bool,
    keys: set[str] | None = None,
    given: set[str] = frozenset(),
    own: frozenset[tuple[str, str]] = frozenset(),
    tune: bool = False,
) -> Localized:
    """`raw` (run's stored config) with every path it names (only `keys`, when given; none of
    `given`, the keys the user's --set replaces) replaced by what the header holds, made
    absolute and checked (`trust`, or a (key, path) of `own`), or refused (UntrustedPath, one line)."""
    out = Localized(copy.deepcopy(raw))
    resolved = _resolved(run)
    refused: list[tuple[str, str]] = []
    for key, node, name in config_paths(out.raw):
        if key in given:  # every trial sets the user's path here: the stored one is never needed
            node[name] = ""
            continue
        if keys is not None and key not in keys:
            continue
        if key == LIMITS_KEY and "limits_file" in resolved:
            out.files[limits_name(prefix)] = _limits_text(resolved["limits_file"], run["name"]).encode()
            node[name] = limits_name(prefix)
        elif key == FDO_KEY and "fdo_stats" in resolved:
            out.files[f"{fdo_name(prefix)}/{FDO_FILE}"] = _fdo_text(resolved["fdo_stats"], run["name"]).encode()
            node[name] = fdo_name(prefix)
        elif not trust and (key, node[name]) not in own:
            refused.append((key, node[name]))
        else:
            node[name] = os.path.abspath(node[name])
            text = checked(key, node[name], f"run {run['name']!r}")
            if key == LIMITS_KEY:  # the limits file travels with the trials, as read now
                out.files[limits_name(prefix)] = text.encode()
                node[name] = limits_name(prefix)
    if refused:
        key, path = refused[0]
        more = f" (and {len(refused) - 1} more: {', '.join(k for k, _ in refused[1:4])})" if len(refused) > 1 else ""
        held = ", whose limits the store does not hold" if key in (LIMITS_KEY, FDO_KEY) else ""
        allow = f"add {TRUST_FLAG} to read it" + (f", or give {key} with --set" if tune else "")
        raise UntrustedPath(
            f"run {run['name']!r} names {key} = {path!r}{held}{more}: scprof opens no path a store "
            f"or trace names unless told; {allow}"
        )
    return out


def user_paths(raw: dict[str, Any], sets: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The user's --set over `raw` with the paths it gives made absolute against the working
    directory and checked (one line for a FIFO, a device, a missing file), and the path keys
    it gives (as config_paths names them)."""
    out: dict[str, Any] = {}
    given: set[str] = set()
    for key, value in sets.items():
        flat = flatten_overrides({key: value})
        found = {k: _path_keys_of(raw, k) for k in flat}
        if not any(found.values()):
            out[key] = value
            continue
        for k, v in flat.items():  # a table value naming a path: one key per leaf
            given |= found[k]
            if found[k] and isinstance(v, str) and v:
                v = os.path.abspath(v)
                for path_key in found[k]:
                    checked(path_key, v, "--set")
            out[k] = v
    return out, given


def checked(key: str, path: str, where: str) -> str:
    """Read `path` as the trial will (guarded: sim_backend.config_checks), before any work;
    ConfigError naming `where` otherwise. The text of a limits file or `extends`, else ""."""
    try:
        if key == LIMITS_KEY:
            text = read_text_file(path, "limits file")
            parse_limits(text, path)
            return text
        if key == FDO_KEY:
            read_fdo_limits(path)
        elif key == "perf_tables":
            load_tables(path)
        elif key.endswith(".ids_file"):
            load_ids_file(path, key)
        else:  # extends, and any path key added later: a config-sized file
            return read_text_file(path, "config file")
    except ConfigError as e:
        said = str(e)
        raise ConfigError(f"{where}: {said}" if said.startswith(key) else f"{where}: {key}: {said}") from None
    return ""


def _path_keys_of(raw: dict[str, Any], key: str) -> set[str]:
    """The path keys a --set KEY lands on in `raw` (a list entry by name or index, a table)."""
    probe = copy.deepcopy(raw)
    try:
        apply_override(probe, f"{key}={tomli_w.dumps({'v': _PROBE}).partition('=')[2].strip()}")
    except ConfigError:  # a key that names nothing: Session.check says so
        return set()
    return {k for k, node, name in config_paths(probe) if node[name] == _PROBE}


def _resolved(run: dict[str, Any]) -> dict[str, Any]:
    try:
        resolved = json.loads(run.get("config") or "{}").get("resolved")
    except (ValueError, AttributeError):
        return {}
    return resolved if isinstance(resolved, dict) else {}


def _limits_text(sections: Any, run_name: str) -> str:
    """A limits file with the sections the header kept (checked as a limits file is)."""
    where = f"run {run_name!r}: resolved.limits_file"
    try:
        text = tomli_w.dumps(sections if isinstance(sections, dict) else {"": sections})
    except (TypeError, ValueError, RecursionError):
        raise ConfigError(f"{where}: not the sections of a limits file") from None
    parse_limits(text, where)
    return text


def _fdo_text(stacks: Any, run_name: str) -> str:
    """An FDO stats file giving the limits per stack the header kept."""
    where = f"run {run_name!r}: resolved.fdo_stats"
    if not isinstance(stacks, dict):
        raise ConfigError(f"{where}: expected limits per stack")
    limits = {}
    for stack, entry in stacks.items():
        if not isinstance(entry, dict) or set(entry) - set(LIMIT_KEYS):
            raise ConfigError(f"{where}.{dotted_key(stack)}: expected {' and/or '.join(LIMIT_KEYS)}")
        pair = tuple(entry.get(k) for k in LIMIT_KEYS)
        if any(
            v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_LIMIT) for v in pair
        ):
            raise ConfigError(f"{where}.{dotted_key(stack)}: a limit that is not an integer in 1..{MAX_LIMIT:,}")
        limits[stack] = pair
    return fdo_stats_text(limits_stats(limits))

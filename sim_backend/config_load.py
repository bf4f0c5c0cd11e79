"""Workload config files: a TOML file and the files it `extends`, `--set key=value`
overrides, then validation (config.py) into a RunConfig.

Paths written in a config file are relative to that file; paths given with `--set` are
relative to the working directory (`config_paths` lists every path a raw config names: the
keys config.py marks `path`, and `extends`). Errors name the file first.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from typing import Any

from sim_backend.config import LISTS, RunConfig, config_from_dict, path_keys
from sim_backend.config_checks import parse_toml, read_text_file
from sim_backend.errors import ConfigError

MAX_EXTENDS_DEPTH = 32  # `extends` chains


def load_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a TOML workload (and what it `extends`), apply `--set` overrides, validate.

    Errors in the values (and sizes too big for this machine) name the file first:
    "configs/x.toml: features[0].multi_hot: ...".
    """
    raw = load_raw(path)
    for item in overrides:
        apply_override(raw, item)
    for _, node, name in config_paths(raw):  # the file's own are absolute already; --set's: the working directory's
        node[name] = os.path.abspath(node[name])
    try:
        return config_from_dict(raw)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def load_raw(path: str, _seen: tuple[str, ...] = (), check_base: Callable[[str], None] | None = None) -> dict:
    """The parsed TOML of `path` merged over the file it `extends` (paths made absolute).

    A variant sets `extends = "base.toml"` (relative to itself) and only the keys it
    changes; `[[tables]]`/`[[features]]` entries with a base entry's name update it,
    other entries are appended. `check_base(path)` is called on each file `extends` names
    before it is read (it raises to refuse one: a server's folder check).
    """
    apath = os.path.realpath(path)
    raw = parse_toml(read_text_file(path), path)
    base_dir = os.path.dirname(os.path.abspath(path))
    _resolve_paths(raw, base_dir)
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: extends: expected a file name, got {base!r}")
    base_path = os.path.join(base_dir, base)
    chain = (*_seen, apath)
    if os.path.realpath(base_path) in chain:
        names = " -> ".join(os.path.basename(p) for p in (*chain, os.path.realpath(base_path)))
        raise ConfigError(f"{path}: extends itself (a cycle: {names})")
    if len(chain) >= MAX_EXTENDS_DEPTH:
        raise ConfigError(f"{path}: extends: more than {MAX_EXTENDS_DEPTH} files deep")
    if check_base is not None:
        check_base(base_path)
    try:
        return _merge(load_raw(base_path, chain, check_base), raw)
    except ConfigError as e:
        if _seen:  # the innermost file says what is wrong; the outermost says where it was named
            raise
        raise ConfigError(f"{path}: extends {base!r}: {e}") from None


def _merge(base: dict, over: dict, top: bool = True) -> dict:
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        if top and key in LISTS and isinstance(value, list) and isinstance(old, list):
            merged = [dict(e) if isinstance(e, dict) else e for e in old]
            names = {e.get("name"): i for i, e in enumerate(merged) if isinstance(e, dict)}
            for entry in value:
                if isinstance(entry, dict) and entry.get("name") in names:
                    merged[names[entry["name"]]].update(entry)
                else:
                    merged.append(entry)
            out[key] = merged
        elif isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge(old, value, top=False)
        else:
            out[key] = value
    return out


def _resolve_paths(raw: dict, base: str) -> None:
    """Paths written in a config file are relative to that file (`extends`: load_raw's)."""
    for key, node, name in config_paths(raw):
        if key != "extends" and not os.path.isabs(node[name]):
            node[name] = os.path.normpath(os.path.join(base, node[name]))


def config_paths(raw: Any) -> list[tuple[str, dict, str]]:
    """Every path a raw (TOML-shaped) config names, non-empty strings only: (dotted key as
    `--set` takes it, the dict holding it, its name there). The keys are config.py's `path`
    fields (list entries named by their `name`, else their index) and `extends`."""
    out: list[tuple[str, dict, str]] = []
    if not isinstance(raw, dict):
        return out
    if isinstance(raw.get("extends"), str) and raw["extends"]:
        out.append(("extends", raw, "extends"))
    for pattern in path_keys():
        _find(raw, pattern.split("."), "", out)
    return out


def _find(node: Any, parts: list[str], prefix: str, out: list[tuple[str, dict, str]]) -> None:
    if not isinstance(node, dict):
        return
    head, rest = parts[0], parts[1:]
    if not rest:
        if isinstance(node.get(head), str) and node[head]:
            out.append((prefix + head, node, head))
        return
    if head.endswith("[]"):
        entries = node.get(head[:-2])
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            name = entry.get("name") if isinstance(entry, dict) else None
            part = dotted_key(name) if isinstance(name, str) and name else str(i)
            _find(entry, rest, f"{prefix}{head[:-2]}.{part}.", out)
    else:
        _find(node.get(head), rest, f"{prefix}{head}.", out)


def parse_value(text: str) -> Any:
    """A --set value: any TOML value (123, 1.5, true, [1, 2], "s"), else the bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text


def apply_override(raw: dict, item: str) -> None:
    """Apply one `key=value` (dotted key; list entries by name or index) to a raw config."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
    parts = key_parts(key)
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            node = _list_entry(node, part, where)
        elif isinstance(node, dict):
            if part not in node:
                if part in LISTS:
                    raise ConfigError(f"--set {key}: the config has no {part}")
                node[part] = {}
            node = node[part]
        else:
            raise ConfigError(f"--set {key}: {where} is not a section")
    last = parts[-1]
    value = parse_value(text.strip())
    if isinstance(node, list):
        raise ConfigError(f"--set {key}: name a field of one entry, e.g. {key}.<field>")
    if not isinstance(node, dict):
        raise ConfigError(f"--set {key}: {'.'.join(parts[:-1])} is not a section")
    node[last] = value


def key_parts(key: str) -> list[str]:
    """A dotted key's parts, TOML's way: a part may be quoted (a stack name holds dots:
    sparsecore.stack_max_ids_per_partition."t0_t1_..._t14_...c4eff8215590")."""
    if '"' not in key and "'" not in key:
        return key.split(".")
    try:
        node = tomllib.loads(f"{key} = 0")
    except (tomllib.TOMLDecodeError, RecursionError):
        raise ConfigError(f"--set {key}: not a dotted key (quote a part that holds dots or spaces)") from None
    parts = []
    while isinstance(node, dict):
        (part, node), *_ = node.items()
        parts.append(part)
    return parts


def dotted_key(*parts: str) -> str:
    """Parts joined into a dotted key, quoting a part that is not a bare TOML key."""
    return ".".join(p if p and all(c.isalnum() or c in "_-" for c in p) else _quote(p) for p in parts)


def _quote(part: str) -> str:
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list_entry(entries: list, part: str, where: str) -> dict:
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == part:
            return entry
    if part.isdigit() and int(part) < len(entries):
        return entries[int(part)]
    raise ConfigError(f"--set {where}: no entry named {part!r}")

"""Compiled per-partition limits of each stacked table: where they come from, and the limits file.

As in jax-tpu-embedding, limits belong to a *stack*. A stack of one table (its name is the
table's) takes, highest first: the limits file (`flags.xla_sparse_core_max_ids_file`,
`[stacks.NAME]` or `[tables.NAME]`), the FDO stats a JAX job published
(`flags.fdo_stats_dir`, fdo_stats.py), `sparsecore.stack_max_ids_per_partition`, the
table's own `max_ids_per_partition` keys, `sparsecore.max_ids_per_table` divided over the
slice's SparseCores (the TF flag of the SparseCore guide), then the `sparsecore` defaults.
A stack of several tables takes the limits file's `[stacks.NAME]`, the FDO stats,
`sparsecore.stack_max_ids_per_partition`, else the `sparsecore` defaults (256, the
library's `get_default_limits`): the per-table limits of its tables are ignored, as the
library ignores them (`StackLimits.ignored_tables` names them, so `record` can say so).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim_backend.config import RunConfig
from sim_backend.config_checks import parse_toml, read_text_file
from sim_backend.errors import ConfigError
from sim_backend.fdo_stats import read_fdo_limits

LIMIT_KEYS = ("max_ids_per_partition", "max_unique_ids_per_partition")


@dataclass(frozen=True)
class StackLimits:
    max_ids_per_partition: int
    max_unique_ids_per_partition: int
    # "limits_file", "fdo_stats", "stack_config", "table", "max_ids_per_table", "default"
    source: str
    ignored_tables: tuple[str, ...] = ()  # its tables whose own limits were set but do not apply


Filed = dict[str, dict[str, tuple[int | None, int | None]]]  # {"stacks": {name: (ids, unique)}, "tables": ...}


def read_limits_file(path: str) -> Filed:
    """Parse a limits file: `[stacks.NAME]` and `[tables.NAME]` sections, each with
    `max_ids_per_partition` and/or `max_unique_ids_per_partition`. Returns
    {"stacks": {name: (ids, unique)}, "tables": {...}}."""
    try:
        text = read_text_file(path, "limits file")
    except ConfigError as e:
        raise ConfigError(f"flags.xla_sparse_core_max_ids_file: {e}") from None
    return parse_limits(text, path)


def parse_limits(text: str, path: str) -> Filed:
    """A limits file's text (`path` names it in errors), checked as read_limits_file checks it."""
    try:
        raw = parse_toml(text, path)
    except ConfigError as e:
        raise ConfigError(f"flags.xla_sparse_core_max_ids_file: {e}") from None
    if set(raw) - {"tables", "stacks"}:
        raise ConfigError(f"{path}: expected only [stacks.NAME] and [tables.NAME] sections")
    out: dict[str, dict[str, tuple[int | None, int | None]]] = {}
    for section in ("stacks", "tables"):
        entries = raw.get(section, {})
        if not isinstance(entries, dict):
            raise ConfigError(f"{path}: {section}: expected [{section}.NAME] sections")
        out[section] = {}
        for name, entry in entries.items():
            if not isinstance(entry, dict):
                raise ConfigError(f"{path}: {section}.{name}: expected a table")
            unknown = set(entry) - set(LIMIT_KEYS)
            if unknown:
                raise ConfigError(f"{path}: {section}.{name}.{sorted(unknown)[0]}: unknown key")
            vals = []
            for key in LIMIT_KEYS:
                v = entry.get(key)
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1 or v > 2**31 - 1):
                    raise ConfigError(f"{path}: {section}.{name}.{key}: expected a positive 32-bit integer")
                vals.append(v)
            out[section][name] = (vals[0], vals[1])
    return out


def limits_sections(filed: Filed) -> dict[str, dict[str, dict[str, int]]]:
    """Parsed limits back in the file's shape ({"stacks": {name: {key: value}}, "tables": ...}, unset
    keys left out): what a run's header keeps (`resolved.limits_file`), so the file need not be read again."""
    return {
        section: {
            name: {k: v for k, v in zip(LIMIT_KEYS, pair, strict=True) if v is not None}
            for name, pair in filed.get(section, {}).items()
        }
        for section in ("stacks", "tables")
    }


def resolve_stack_limits(
    cfg: RunConfig, stacks: list[tuple[str, list[str]]], num_total_sparse_cores: int
) -> dict[str, StackLimits]:
    """The compiled limits of every stack, given as (stack name, its tables)."""
    sc = cfg.sparsecore
    filed: dict[str, dict[str, tuple[int | None, int | None]]] = {"stacks": {}, "tables": {}}
    path = cfg.flags.xla_sparse_core_max_ids_file
    if path:
        filed = read_limits_file(path)
        _check_tables(path, filed, cfg)
    fdo = read_fdo_limits(cfg.flags.fdo_stats_dir) if cfg.flags.fdo_stats_dir else {}
    own = {t.name for t in cfg.tables if t.max_ids_per_partition or t.max_unique_ids_per_partition}
    own |= set(sc.max_ids_per_table or {}) | set(sc.max_unique_ids_per_table or {}) | set(filed["tables"])
    out = {}
    for name, tables in stacks:
        lone = tables[0] if len(tables) == 1 else None
        vals, sources = [], []
        for i, (default, stack_cfg) in enumerate(
            (
                (sc.max_ids_per_partition, sc.stack_max_ids_per_partition),
                (sc.max_unique_ids_per_partition, sc.stack_max_unique_ids_per_partition),
            )
        ):
            candidates = [
                (filed["stacks"].get(name, (None, None))[i], "limits_file"),
                (filed["tables"].get(lone, (None, None))[i] if lone else None, "limits_file"),
                (fdo.get(name, (None, None))[i], "fdo_stats"),
                ((stack_cfg or {}).get(name), "stack_config"),
            ]
            if lone is not None:
                t = next(t for t in cfg.tables if t.name == lone)
                per_table = (sc.max_ids_per_table if i == 0 else sc.max_unique_ids_per_table) or {}
                candidates += [
                    (t.max_ids_per_partition if i == 0 else t.max_unique_ids_per_partition, "table"),
                    (
                        -(-per_table[lone] // num_total_sparse_cores) if lone in per_table else None,
                        "max_ids_per_table",
                    ),
                ]
            value, source = next(((v, s) for v, s in candidates if v is not None), (default, "default"))
            vals.append(value), sources.append(source)
        ignored = tuple(t for t in tables if t in own) if lone is None else ()
        out[name] = StackLimits(vals[0], vals[1], sources[0], ignored)
    return out


def _check_tables(path: str, filed: dict, cfg: RunConfig) -> None:
    """Every [tables.NAME] section of a limits file names a table of the config."""
    names = {t.name for t in cfg.tables}
    for name in filed["tables"]:
        if name not in names:
            raise ConfigError(f"{path}: tables.{name}: no such table in the config")


def unused_limit_sections(cfg: RunConfig, stack_names: list[str]) -> list[str]:
    """One line per stack a limits file or FDO stats directory gives limits for that this
    config does not have (ignored, as jax-tpu-embedding ignores stats of other stacks: a file
    derived from another config's stacking)."""
    known = set(stack_names)
    out = []
    path = cfg.flags.xla_sparse_core_max_ids_file
    if path:
        unknown = sorted(set(read_limits_file(path)["stacks"]) - known)
        if unknown:
            out.append(_unused(f"{path}: [stacks.{unknown[0]}]", unknown))
    directory = cfg.flags.fdo_stats_dir
    if directory:
        unknown = sorted(set(read_fdo_limits(directory)) - known)
        if unknown:
            out.append(_unused(f"flags.fdo_stats_dir {directory}: stack {unknown[0]!r}", unknown))
    return out


def _unused(first: str, unknown: list[str]) -> str:
    more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
    return f"{first}{more} is not a stack of this config (its tables stack differently): ignored"


def write_limits_file(path: str, observed: dict[str, tuple[int, int]], comment: str) -> None:
    """Write derived limits (observed maxima per stack) in the limits-file format."""
    lines = [f"# {line}" for line in comment.splitlines()]
    for name in sorted(observed):
        ids, uniq = observed[name]
        lines += [
            "",
            f"[stacks.{toml_key(name)}]",
            f"max_ids_per_partition = {max(1, ids)}",
            f"max_unique_ids_per_partition = {max(1, uniq)}",
        ]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def toml_key(name: str) -> str:
    if name and all(c.isalnum() or c in "_-" for c in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

"""Compiled per-partition limits: where they come from, and the limits file.

Precedence for a table (highest first): the limits file (`xla_sparse_core_max_ids_file`),
the table's own `max_ids_per_partition` keys, `sparsecore.max_ids_per_table` divided
over the slice's SparseCores, then the `sparsecore` defaults. A stacked table's limit
is the sum of its tables' limits (as jax-tpu-embedding does when it stacks tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim_backend.config import RunConfig
from sim_backend.config_checks import parse_toml, read_text_file
from sim_backend.errors import ConfigError


@dataclass(frozen=True)
class TableLimits:
    max_ids_per_partition: int
    max_unique_ids_per_partition: int
    source: str  # "limits_file", "table", "max_ids_per_table", "default"


def read_limits_file(path: str) -> dict[str, tuple[int | None, int | None]]:
    """Parse a limits file: `[tables.NAME] max_ids_per_partition = .., max_unique_ids_... = ..`."""
    try:
        raw = parse_toml(read_text_file(path, "limits file"), path)
    except ConfigError as e:
        raise ConfigError(f"flags.xla_sparse_core_max_ids_file: {e}") from None
    tables = raw.get("tables", {})
    if set(raw) - {"tables"} or not isinstance(tables, dict):
        raise ConfigError(f"{path}: expected only [tables.NAME] sections")
    out = {}
    for name, entry in tables.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: tables.{name}: expected a table")
        unknown = set(entry) - {"max_ids_per_partition", "max_unique_ids_per_partition"}
        if unknown:
            raise ConfigError(f"{path}: tables.{name}.{sorted(unknown)[0]}: unknown key")
        vals = []
        for key in ("max_ids_per_partition", "max_unique_ids_per_partition"):
            v = entry.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"{path}: tables.{name}.{key}: expected a positive integer")
            vals.append(v)
        out[name] = (vals[0], vals[1])
    return out


def resolve_limits(cfg: RunConfig, num_total_sparse_cores: int) -> dict[str, TableLimits]:
    """The compiled limits of every table."""
    sc = cfg.sparsecore
    from_file = {}
    path = cfg.flags.xla_sparse_core_max_ids_file
    if path:
        from_file = read_limits_file(path)
        names = {t.name for t in cfg.tables}
        for name in from_file:
            if name not in names:
                raise ConfigError(f"{path}: tables.{name}: no such table in the config")
    out = {}
    for t in cfg.tables:
        per_table = [(sc.max_ids_per_table or {}).get(t.name), (sc.max_unique_ids_per_table or {}).get(t.name)]
        vals, sources = [], []
        for i, (own, default) in enumerate(
            (
                (t.max_ids_per_partition, sc.max_ids_per_partition),
                (t.max_unique_ids_per_partition, sc.max_unique_ids_per_partition),
            )
        ):
            filed = from_file.get(t.name, (None, None))[i]
            if filed is not None:
                vals.append(filed), sources.append("limits_file")
            elif own is not None:
                vals.append(own), sources.append("table")
            elif per_table[i] is not None:
                vals.append(-(-per_table[i] // num_total_sparse_cores))
                sources.append("max_ids_per_table")
            else:
                vals.append(default), sources.append("default")
        out[t.name] = TableLimits(vals[0], vals[1], sources[0])
    return out


def write_limits_file(path: str, observed: dict[str, tuple[int, int]], comment: str) -> None:
    """Write derived limits (observed maxima per table) in the limits-file format."""
    lines = [f"# {line}" for line in comment.splitlines()]
    for name in sorted(observed):
        ids, uniq = observed[name]
        lines += [
            "",
            f"[tables.{_toml_key(name)}]",
            f"max_ids_per_partition = {max(1, ids)}",
            f"max_unique_ids_per_partition = {max(1, uniq)}",
        ]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _toml_key(name: str) -> str:
    if name and all(c.isalnum() or c in "_-" for c in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

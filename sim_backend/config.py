"""Workload config schema and validation: raw (parsed TOML) config -> RunConfig, effective config.

The schema is declared once, as the dataclasses below: each field's type, default and
`doc` metadata drive validation (errors name the dotted key) and docs/emulator.md.
Keys keep the names users know from the SparseCore doc (`max_ids_per_partition`,
`allow_id_dropping`, `xla_sc_num_serialized_tables_to_optimize_hbm`, ...). Reading
config files (`extends`, `--set` overrides) is config_load.py's job.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from sim_backend.config_checks import (
    COST_BOUNDS,
    MAX_STEPS,
    check_number,
    check_run_memory,
    check_steps,
)
from sim_backend.costmodel import COST_CONSTANT_NAMES, COST_MODELS, DEFAULT_COST_MODEL, CostConstants
from sim_backend.errors import ConfigError
from sim_backend.hardware import PRESETS

MAX_IDS = 2**31 - 1  # ID counts and limits: XLA's int32 ID buffers
MAX_TABLES = 10_000  # tables, features, table groups (the bundled configs have up to 100)
F32_MAX = 3.4028234663852886e38  # quantization ranges are f32 values


def _f(default: Any, doc: str, **meta: Any) -> Any:
    """A dataclass field with documentation and validation metadata."""
    if isinstance(default, type):
        return field(default_factory=default, metadata={"doc": doc, **meta})
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"doc": doc, **meta})
    return field(default=default, metadata={"doc": doc, **meta})


@dataclass(frozen=True)
class HardwareConfig:
    generation: str = _f(
        "v5p", "preset: v4, v5p, v6e, or custom (then every figure below)", choices=(*PRESETS, "custom")
    )
    num_chips: int = _f(4, "chips in the simulated slice (one host)", min=1, max=4096)
    num_slices: int = _f(
        1,
        "slices joined by DCN (data parallel): the dense all-reduce crosses them (hierarchical, DCN S-curve)",
        min=1,
        max=1024,
    )
    sparsecores_per_chip: int | None = _f(None, "override the preset", min=1, max=64)
    tiles_per_sparsecore: int | None = _f(None, "override the preset", min=1, max=1024)
    simd_width: int | None = _f(None, "SparseCore SIMD lanes for f32, override the preset", min=1, max=4096)
    simd_width_bf16: int | None = _f(
        None,
        "SparseCore SIMD lanes for bf16 tables, override the preset (v6e: 16; custom: simd_width)",
        min=1,
        max=4096,
    )
    hbm_bytes: int | None = _f(None, "HBM capacity per chip, override", min=1, max=2**50)
    hbm_bandwidth_bytes_per_s: float | None = _f(None, "HBM bandwidth per chip, override", min=1e9, max=1e15)
    tc_peak_flops: float | None = _f(None, "TensorCore peak FLOP/s per chip, override", min=1e9, max=1e18)
    ici_bandwidth_bytes_per_s: float | None = _f(None, "ICI bandwidth per chip, one direction", min=1e6, max=1e15)
    spmem_bytes_per_tile: int | None = _f(None, "SparseCore tile scratchpad, override", min=1, max=2**40)
    sc_clock_hz: float | None = _f(None, "SparseCore clock, override", min=1e6, max=1e12)
    host_to_device_bandwidth_bytes_per_s: float | None = _f(None, "host->HBM link per chip", min=1e6, max=1e15)


@dataclass(frozen=True)
class HostConfig:
    num_threads: int = _f(4, "host threads running input preprocessing", min=1, max=4096)


@dataclass(frozen=True)
class DenseConfig:
    num_dense_features: int = _f(13, "dense input features per sample", min=0, max=2**20)
    bottom_mlp: list[int] = _f([512, 256, 128], "bottom MLP layer sizes", min=1, max=2**20, max_len=256)
    top_mlp: list[int] = _f([1024, 1024, 512, 256, 1], "top MLP layer sizes", min=1, max=2**20, max_len=256)
    cross_layers: int = _f(3, "DCN-v2 cross layers over the interaction input", min=0, max=256)
    cross_low_rank: int = _f(512, "rank of each low-rank cross layer", min=1, max=2**20)


@dataclass(frozen=True)
class ManualConfig:
    """One manual computation (Shardy `sdy.manual_computation`) over the dense part."""

    name: str = _f("", "region name (unique; what a nested region's parent names)", required=True)
    axes: list[str] = _f([], "the manual axes, in mesh order; the body sees local shapes along them")
    params: list[str] = _f(
        [], "dense parameter name patterns (glob) the region covers; their shardings are its operand shardings"
    )
    in_shardings: list[str] = _f(
        [], "sharding of the region's input activation [batch, features] (one entry; every manual axis used explicitly)"
    )
    out_shardings: list[str] = _f(
        [],
        "sharding of the region's output activation [batch, features] (one entry; every manual axis used explicitly)",
    )
    parent: str = _f("", "name of the enclosing region (nested: disjoint manual axes)")


@dataclass(frozen=True)
class ShardingConfig:
    """Shardy-style sharding of the dense part (docs/emulator.md; checked by sharding.py)."""

    mesh: str = _f(
        "",
        'device mesh, Shardy syntax: <["data"=2, "model"=2]> ("": one axis '
        '"data" over all chips); axis sizes multiply to hardware.num_chips',
    )
    activations: str = _f(
        '[{"data"}, {?}]',
        "sharding of the dense activations [batch, features]; the batch dimension's axes are the data-parallel axes",
    )
    weights: dict[str, str] = _f(
        {},
        'dense parameter name pattern (glob, e.g. "top_*/kernel") '
        '-> sharding such as [{"data"}, {}]; first match wins; '
        "unmatched parameters are replicated",
    )
    groups: dict[str, list[str]] = _f(
        {}, "sharding groups: group id -> parameter name patterns whose tensors must share one sharding"
    )
    manual: list[ManualConfig] = _f([], "manual computations ([[sharding.manual]]); default: none")


@dataclass(frozen=True)
class SparseCoreConfig:
    """The SparseCore guide's SparsecoreConfig, plus default per-partition limits."""

    disable_table_stacking: bool = _f(
        False, "do not stack tables of equal padded width (multiple of 8), optimizer, combiner and dtype"
    )
    max_tables_per_stack: int = _f(
        0, "most tables in one stacked table (0: no limit); larger stacks are split", min=0, max=MAX_TABLES
    )
    stack_activation_mem_bytes_limit: int = _f(
        2 * 1024 * 1024,
        "a stack's activations per SparseCore (padded width x samples per SC x 4 B, summed over its "
        "tables) stay within this; tables past it start another stack (jax-tpu-embedding's 2 MiB)",
        min=1,
        max=2**50,
    )
    max_ids_per_chip_per_sample: int = _f(64, "chip-level cap on IDs of one sample, all tables", min=1, max=MAX_IDS)
    max_ids_per_table: dict[str, int] | None = _f(
        None, "per table: IDs over all partitions; sets max_ids_per_partition = ceil(v / SCs)", min=1, max=MAX_IDS
    )
    max_unique_ids_per_table: dict[str, int] | None = _f(
        None, "per table: unique IDs over all partitions; as above for unique IDs", min=1, max=MAX_IDS
    )
    allow_id_dropping: bool = _f(False, "drop IDs past the limits (sorted order) instead of failing")
    initialize_tables_on_host: bool = _f(True, "initialise tables on the host, then copy to HBM")
    enable_fast_table_initialization: bool = _f(False, "initialise tables on the device")
    max_ids_per_partition: int = _f(
        256, "default compiled limit of a stack: IDs per partition (after in-sample dedup)", min=1, max=MAX_IDS
    )
    max_unique_ids_per_partition: int = _f(
        256, "default compiled limit of a stack: unique IDs per partition", min=1, max=MAX_IDS
    )
    stack_max_ids_per_partition: dict[str, int] | None = _f(
        None,
        "per stack name: its compiled IDs-per-partition limit (jax-tpu-embedding's stack limits)",
        min=1,
        max=MAX_IDS,
    )
    stack_max_unique_ids_per_partition: dict[str, int] | None = _f(
        None, "per stack name: its compiled unique-IDs-per-partition limit", min=1, max=MAX_IDS
    )
    shuffle_ids: bool = _f(
        False,
        "ID shuffling against hot IDs: shift table i's IDs by floor(i * SCs / tables) partitions "
        "(stacked or not), so the tables' hot rows spread over the SparseCores",
    )
    enable_minibatching: bool = _f(
        True, "split a step into minibatches (64 hash buckets, one count for all stacks) when limits are exceeded"
    )
    preprocessing: str = _f(
        "native",
        "host preprocessing: native (scprof's, vectorised) or reference (jax-tpu-embedding itself, "
        "in a child process; needs the `reference` extra)",
        choices=("native", "reference"),
    )


@dataclass(frozen=True)
class FlagsConfig:
    """The XLA/TF flags the SparseCore guide names (docs/emulator.md "Configs")."""

    tf_xla_disable_full_embedding_pipelining: bool = _f(
        False, "true: SC/F_i -> TC/F_i -> TC/B_i -> SC/B_i strictly in order"
    )
    maximum_parallel_iterations: int = _f(2, "steps the host may prefetch ahead of the device", min=1, max=64)
    xla_sc_num_serialized_tables_to_optimize_hbm: int = _f(
        0, "table groups processed serially (barrier between them) to lower the HBM stack", min=0, max=MAX_TABLES
    )
    xla_sparse_core_max_ids_file: str = _f(
        "", "limits file (TOML) with [stacks.NAME] and [tables.NAME] limits", path="file"
    )
    xla_sparse_core_estimate_max_ids: bool = _f(
        False,
        "derive each stack's limits from the observed IDs and write limits.toml and the FDO stats "
        "(fdo_stats_0_<ns>.csv, jax-tpu-embedding's CSVFileFDOClient format)",
    )
    fdo_stats_dir: str = _f(
        "", "directory of FDO stats a JAX job published (CSVFileFDOClient): its stacks' limits apply", path="dir"
    )
    xla_sparse_core_enable_id_bound_check: bool = _f(
        False, "check every ID against its table's vocabulary; report out-of-vocabulary IDs"
    )
    xla_sc_detect_nan: bool = _f(False, "check SparseCore inputs/outputs for NaN; a NaN stops the run with an error")


@dataclass(frozen=True)
class TableConfig:
    name: str = _f("", "table name", required=True)
    vocab: int = _f(1, "rows (vocabulary size)", min=1, max=2**40)
    width: int = _f(128, "feature width (embedding dimension)", min=1, max=2**16)
    dtype: str = _f(
        "f32", "element type (int8: 8-bit codes over the quantization range)", choices=("f32", "bf16", "int8")
    )
    optimizer: str = _f("adagrad", "optimizer (sets slot count)", choices=("sgd", "adagrad", "adam"))
    combiner: str = _f(
        "sum", "how a sample's rows combine; tables stack only with the same", choices=("sum", "mean", "sqrtn")
    )
    max_ids_per_partition: int | None = _f(None, "compiled limit for this table", min=1, max=MAX_IDS)
    max_unique_ids_per_partition: int | None = _f(None, "compiled limit for this table", min=1, max=MAX_IDS)
    quantization_config_num_buckets: int = _f(256, "quantization levels over [low, high]", min=2, max=2**24)
    quantization_config_low: float | None = _f(
        None, "lowest quantized value (lower ones are clipped); int8: required", min=-F32_MAX, max=F32_MAX
    )
    quantization_config_high: float | None = _f(
        None, "highest quantized value (higher ones are clipped); int8: required", min=-F32_MAX, max=F32_MAX
    )


@dataclass(frozen=True)
class FeatureConfig:
    name: str = _f("", "feature name", required=True)
    table: str = _f("", "table the feature reads (several features may share one)", required=True)
    multi_hot: int = _f(1, "IDs per sample (the maximum when multi_hot_min is set)", min=1, max=MAX_IDS)
    multi_hot_min: int | None = _f(None, "if set, IDs per sample ~ uniform[min, multi_hot]", min=1, max=MAX_IDS)
    distribution: str = _f("uniform", "ID distribution", choices=("uniform", "zipf", "hot_set"))
    ids_file: str = _f(
        "",
        "your own IDs: an .npz with int arrays `lengths` (IDs per sample) and `ids` (flat), or a Parquet "
        "file with a list<int64> column `ids`; step s reads samples [s*B, (s+1)*B), wrapping (B = global_batch)",
        path="file",
    )
    zipf_exponent: float = _f(1.05, "Zipf exponent s: P(id = k) ~ (k + 1)^-s", min=0.0, max=100.0)
    hot_set_size: int = _f(16, "hot_set: size of the hot set (IDs 0 .. size-1)", min=1, max=2**40)
    hot_fraction: float = _f(0.5, "hot_set: share of lookups that hit the hot set", min=0.0, max=1.0)
    oov_fraction: float = _f(0.0, "fault injection: share of IDs made out-of-vocabulary", min=0.0, max=1.0)
    nan_fraction: float = _f(0.0, "fault injection: share of samples whose values are NaN", min=0.0, max=1.0)


@dataclass(frozen=True)
class RunConfig:
    name: str = _f("run", "run name (default for --name)")
    description: str = _f("", "free text")
    seed: int = _f(0, "seed of the ID generator; same seed, same trace", min=0, max=2**63 - 1)
    steps: int = _f(10, "training steps to simulate", min=1, max=MAX_STEPS)
    global_batch: int = _f(4096, "samples per step over the slice", min=1, max=2**31 - 1)
    include_initialization: bool = _f(False, "record table initialisation before step 0")
    cost_model: str = _f(DEFAULT_COST_MODEL, "cost model name", choices=tuple(COST_MODELS))
    perf_tables: str = _f(
        "",
        "performance-table directory for cost_model = 'tables' (empty: the bundled tables of hardware.generation)",
        path="dir",
    )
    hardware: HardwareConfig = _f(HardwareConfig, "simulated slice")
    host: HostConfig = _f(HostConfig, "host CPU")
    dense: DenseConfig = _f(DenseConfig, "dense part (DLRM-DCNv2-like)")
    sharding: ShardingConfig = _f(ShardingConfig, "mesh and shardings of the dense part")
    sparsecore: SparseCoreConfig = _f(SparseCoreConfig, "SparsecoreConfig flags and default limits")
    flags: FlagsConfig = _f(FlagsConfig, "XLA/TF flags")
    cost: dict[str, float] = _f({}, "overrides of cost-model constants")
    tables: list[TableConfig] = _f([], "embedding tables", min_len=1, max_len=MAX_TABLES)
    features: list[FeatureConfig] = _f([], "sparse features", min_len=1, max_len=MAX_TABLES)

    def __post_init__(self) -> None:
        # also when a caller replaces `steps` (dataclasses.replace, e.g. record's --steps)
        check_steps(self.steps)


SECTIONS = {
    "hardware": HardwareConfig,
    "host": HostConfig,
    "dense": DenseConfig,
    "sharding": ShardingConfig,
    "sparsecore": SparseCoreConfig,
    "flags": FlagsConfig,
}
LISTS = {"tables": TableConfig, "features": FeatureConfig}


# -- validation ------------------------------------------------------------------------------


def config_from_dict(raw: dict) -> RunConfig:
    """Validate a raw (parsed TOML) config and build the RunConfig."""
    if not isinstance(raw, dict):
        raise ConfigError("config: expected a table of keys")
    cfg = _build(RunConfig, raw, "")
    _check_cross_references(cfg)
    check_run_memory(cfg)  # before anything is allocated: sizes this machine cannot hold
    from sim_backend.sharding import plan_dense  # imports this module: import when needed

    plan_dense(cfg)  # mesh and sharding invariants; ConfigError names the sharding.* key
    return cfg


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a table, got {raw!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(known))}"
            raise ConfigError(f"{prefix}{key}: unknown key ({hint})")
    values: dict[str, Any] = {}
    for name, f in known.items():
        key = f"{prefix}{name}"
        tp = hints[name]
        if name in SECTIONS:
            values[name] = _build(SECTIONS[name], raw.get(name, {}), f"{key}.")
        elif name in LISTS:
            entries = raw.get(name, [])
            if not isinstance(entries, list):
                raise ConfigError(f"{key}: expected a list of tables ([[{name}]])")
            if len(entries) < f.metadata.get("min_len", 0):
                raise ConfigError(f"{key}: at least {f.metadata['min_len']} entry required")
            _check_length(entries, key, f.metadata)
            values[name] = [_build(LISTS[name], e, f"{key}[{i}].") for i, e in enumerate(entries)]
        elif dataclasses.is_dataclass(_item_type(tp)):  # a list of tables inside a section
            entries = raw.get(name, [])
            if not isinstance(entries, list):
                raise ConfigError(f"{key}: expected a list of tables ([[{key}]])")
            _check_length(entries, key, f.metadata)
            values[name] = [_build(_item_type(tp), e, f"{key}[{i}].") for i, e in enumerate(entries)]
        elif name == "cost":
            values[name] = _cost(raw.get(name, {}), key)
        elif name in raw:
            values[name] = _check(raw[name], tp, key, f.metadata)
        elif f.metadata.get("required"):
            raise ConfigError(f"{key}: required")
    return cls(**values)


def _check_length(entries: list, key: str, meta: Any) -> None:
    """Lists hold at most `max_len` entries (default MAX_TABLES)."""
    most = meta.get("max_len", MAX_TABLES)
    if len(entries) > most:
        raise ConfigError(f"{key}: {len(entries):,} entries; at most {most:,}")


def _item_type(tp: Any) -> Any:
    """`X` for `list[X]`, else None."""
    return typing.get_args(tp)[0] if typing.get_origin(tp) is list else None


def _check(value: Any, tp: Any, key: str, meta: dict) -> Any:
    """Type- and range-check one value against its declared type."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(value, inner[0], key, meta)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        _check_length(value, key, meta)
        return [_check(v, args[0], f"{key}[{i}]", meta) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table of name = value, got {value!r}")
        return {str(k): _check(v, args[1], f"{key}.{k}", meta) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        value = float(value)
    elif tp is str and not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"{key}: {value!r} is not one of {list(meta['choices'])}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        check_number(value, key, meta)  # finite; the field's min and max
    return value


def _cost(raw: Any, key: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{key}: expected a table of constant = value")
    defaults = CostConstants()
    out: dict[str, float] = {}
    for name, value in raw.items():
        if name not in COST_CONSTANT_NAMES:
            raise ConfigError(f"{key}.{name}: unknown cost constant (known: {', '.join(COST_CONSTANT_NAMES)})")
        kind = type(getattr(defaults, name))
        v = _check(value, kind, f"{key}.{name}", COST_BOUNDS[name])
        out[name] = v
    return out


def _check_cross_references(cfg: RunConfig) -> None:
    tables = {}
    for i, t in enumerate(cfg.tables):
        if t.name in tables:
            raise ConfigError(f"tables[{i}].name: duplicate table {t.name!r}")
        tables[t.name] = t
        _check_quantization(t, f"tables[{i}].")
    seen = set()
    for i, f in enumerate(cfg.features):
        if f.name in seen:
            raise ConfigError(f"features[{i}].name: duplicate feature {f.name!r}")
        seen.add(f.name)
        if f.table not in tables:
            raise ConfigError(f"features[{i}].table: no table named {f.table!r}")
        if f.multi_hot_min is not None and f.multi_hot_min > f.multi_hot:
            raise ConfigError(f"features[{i}].multi_hot_min: {f.multi_hot_min} > multi_hot {f.multi_hot}")
    for i, f in enumerate(cfg.features):
        if f.ids_file:
            from sim_backend.ids_file import load_ids_file  # imports config_checks: import when needed

            load_ids_file(f.ids_file, f"features[{i}].ids_file")  # one line naming the key for a bad file
    unused = [t for t in tables if t not in {f.table for f in cfg.features}]
    if unused:
        raise ConfigError(f"tables: table {unused[0]!r} is read by no feature")
    for key in ("max_ids_per_table", "max_unique_ids_per_table"):
        for name in getattr(cfg.sparsecore, key) or {}:
            if name not in tables:
                raise ConfigError(f"sparsecore.{key}.{name}: no table named {name!r}")
    hw = cfg.hardware
    if hw.num_slices > 1 and hw.num_chips < 2:
        raise ConfigError(
            f"hardware.num_slices: {hw.num_slices} slices need hardware.num_chips "
            f">= 2 (the cross-slice all-reduce is derived from the in-slice ring's "
            f"bytes)"
        )
    spc = hw.sparsecores_per_chip or PRESETS.get(hw.generation, {}).get("sparsecores_per_chip", 1)
    n_sc = hw.num_chips * spc
    if cfg.global_batch % n_sc:
        raise ConfigError(f"global_batch: {cfg.global_batch} is not a multiple of the {n_sc} SparseCores of the slice")


def _check_quantization(t: TableConfig, prefix: str) -> None:
    """Quantization keys: int8 needs a finite range low < high and at most 256 buckets.

    On f32/bf16 tables, setting low and high turns on simulated quantization
    (docs/emulator.md "Quantization and debug checks"); one without the other is an error.
    """
    low, high = t.quantization_config_low, t.quantization_config_high
    for key, v in (("quantization_config_low", low), ("quantization_config_high", high)):
        if v is not None and not math.isfinite(v):
            raise ConfigError(f"{prefix}{key}: {v!r} is not a finite number")
    if low is None and high is None:
        if t.dtype == "int8":
            raise ConfigError(
                f"{prefix}quantization_config_low: required for dtype int8 (the "
                f"range its 8-bit codes cover), with quantization_config_high"
            )
        return
    if low is None or high is None:
        missing = "quantization_config_low" if low is None else "quantization_config_high"
        raise ConfigError(f"{prefix}{missing}: required when the other end of the quantization range is set")
    if not low < high:
        raise ConfigError(f"{prefix}quantization_config_high: {high!r} is not above quantization_config_low {low!r}")
    if t.dtype == "int8" and t.quantization_config_num_buckets > 256:
        raise ConfigError(
            f"{prefix}quantization_config_num_buckets: "
            f"{t.quantization_config_num_buckets} buckets do not fit 8-bit codes "
            f"(at most 256)"
        )


def effective_config(cfg: RunConfig) -> dict:
    """The config as a JSON-ready dict (stored in the trace header)."""
    return dataclasses.asdict(cfg)


def iter_keys() -> list[tuple[str, Any, str]]:
    """Every config key as (dotted key, default, doc): for docs and their freshness test."""
    return [(key, default, f.metadata.get("doc", "")) for key, default, f in _iter_fields()]


@functools.cache
def path_keys() -> tuple[str, ...]:
    """The keys whose value names a file or directory (field metadata `path`), as iter_keys
    spells them (`features[].ids_file`): what config_load resolves and the what-if engine guards.
    Computed once: the fields are fixed, and every config load asks."""
    return tuple(key for key, _, f in _iter_fields() if f.metadata.get("path"))


def _iter_fields() -> list[tuple[str, Any, dataclasses.Field]]:
    out = []

    def walk(cls: type, prefix: str) -> None:
        for f in dataclasses.fields(cls):
            key = f"{prefix}{f.name}"
            if f.name in SECTIONS:
                walk(SECTIONS[f.name], f"{key}.")
            elif f.name in LISTS:
                walk(LISTS[f.name], f"{key}[].")
            elif dataclasses.is_dataclass(_item_type(typing.get_type_hints(cls)[f.name])):
                walk(_item_type(typing.get_type_hints(cls)[f.name]), f"{key}[].")
            else:
                default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                out.append((key, default, f))

    walk(RunConfig, "")
    return out

"""The causes a scenario can inject: for each, the config change that injects it, the change
that removes only it, the effect that verifies it (measured on the two runs), the analyzer
rules expected to report it and the config keys of the fix expected."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from whatif.scenarios.workloads import PREFETCH_DEPTH
from whatif.scenarios.workloads import static_memory as _static_memory

Raw = dict[str, Any]
Injector = Callable[[Raw, random.Random], None]  # changes a raw config in place

# how a label is verified (runner.py measures these on the cause run and the removal run)
EFFECTS = ("minibatches", "dropped_ids", "step_time", "hbm_peak", "failed", "construction")
DERIVE = "derive_limits"  # a fix key: the fix derives limits (the fix's derive_limits flag)
HEALTHY_LIMITS_SCALE = 1.25  # healthy limits: the observed maximum x 1.25 (oversized only from 2x)
LOW_LIMITS_SCALE = 0.4


@dataclass(frozen=True)
class Cause:
    """One injectable cause."""

    name: str
    group: str  # two causes of one group are never paired (they change the same keys)
    rules: frozenset[str]  # rules expected to report it (at warning or critical)
    fix_keys: frozenset[str]  # config keys (or DERIVE) of the fix expected
    effect: str  # one of EFFECTS
    inject: Injector
    remove: Injector | None = None  # applied after `inject` for the removal run; None: leave the cause out
    applies: Callable[[Raw], bool] = lambda raw: True
    limits_scale: float | None = HEALTHY_LIMITS_SCALE  # derived limits x this; None: the cause sets limits
    note: str = field(default="")


def _sc(raw: Raw) -> dict[str, Any]:
    return raw.setdefault("sparsecore", {})


def _flags(raw: Raw) -> dict[str, Any]:
    return raw.setdefault("flags", {})


def _heaviest(raw: Raw) -> dict[str, Any]:
    """The table read by the most IDs per sample (the first on a tie)."""
    load: dict[str, int] = {}
    for f in raw["features"]:
        load[f["table"]] = load.get(f["table"], 0) + int(f.get("multi_hot", 1))
    name = max(load, key=lambda t: (load[t], -int(t[1:])))
    return next(t for t in raw["tables"] if t["name"] == name)


def _drop_ids(raw: Raw, rng: random.Random) -> None:
    _sc(raw).update(allow_id_dropping=True, enable_minibatching=False)


def _hot_set(raw: Raw, rng: random.Random) -> None:
    """One hot row per table (ID 0), 60% of its lookups. The library's stacking rotation shifts
    the i-th table of a stack by i x sparsecores_per_chip, so every table's row 0 lands on
    SparseCore 0 of some chip and the chip's other SparseCores get none of the hot lookups;
    sparsecore.shuffle_ids spreads the tables' row 0 over all SparseCores. (A hot set of
    sparsecores_per_chip IDs or more is spread by the rotation already: nothing to remove.)"""
    for f in raw["features"]:
        f.update(distribution="hot_set", hot_set_size=1, hot_fraction=0.6)
        f.pop("zipf_exponent", None)
    _sc(raw)["shuffle_ids"] = False


def _threads(raw: Raw, rng: random.Random) -> None:
    raw["host"]["num_threads"] = 1


def _prefetch1(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["maximum_parallel_iterations"] = 1
    raw["host"]["num_threads"] = 4


def _prefetch_removed(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["maximum_parallel_iterations"] = PREFETCH_DEPTH


def _no_pipelining(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["tf_xla_disable_full_embedding_pipelining"] = True


OPTIMIZERS = ("adagrad", "adam", "sgd")


def _stack_per_chip(raw: Raw, mem: Any) -> int:
    """The HBM stack peak per chip the emulator's memory model gives (sim_backend/memory.py): every
    group's stack in one region; forward and backward live at once when the embedding pipeline
    overlaps a step's forward with the previous step's backward, else the larger pass."""
    fwd = sum(g.stack_forward_per_sc for g in mem.groups) * mem.sparsecores_per_chip
    bwd = sum(g.stack_backward_per_sc for g in mem.groups) * mem.sparsecores_per_chip
    return max(fwd, bwd) if _flags(raw).get("tf_xla_disable_full_embedding_pipelining") else fwd + bwd


STACK_PROBE_LIMIT = 32000


def _three_groups(raw: Raw, rng: random.Random) -> None:
    """Three optimizers (so at least three table groups, none serialized) and per-partition limits
    sized so that the static heap plus the groups' stack fill 88-94% of HBM: the stack is linear in
    max_unique_ids_per_partition (the doc's formulas), so one probe at STACK_PROBE_LIMIT gives it."""
    for i, t in enumerate(raw["tables"]):
        t["optimizer"] = OPTIMIZERS[i % 3]
    target = rng.uniform(0.88, 0.94)
    _sc(raw).update(max_ids_per_partition=STACK_PROBE_LIMIT, max_unique_ids_per_partition=STACK_PROBE_LIMIT)
    mem = _static_memory(raw)
    room = target * mem.hbm_capacity - mem.heap_static
    limit = max(256, int(STACK_PROBE_LIMIT * room / max(_stack_per_chip(raw, mem), 1)) // 8 * 8)
    _sc(raw).update(max_ids_per_partition=limit, max_unique_ids_per_partition=limit)


def _serialize_groups(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["xla_sc_num_serialized_tables_to_optimize_hbm"] = 2


def _dense_heap(raw: Raw, rng: random.Random) -> None:
    """A top MLP of 4 equal layers, as wide (a multiple of 128) as lets the static heap (the
    emulator's: the embedding tables and their slots, the dense weights with the interaction
    layer and their optimizer state, in its tiled layout) fill at most 87-91% of HBM; the rest is
    left to the stack and the prefetched inputs of the running steps."""
    target = rng.uniform(0.87, 0.91)

    def heap(k: int) -> tuple[int, int]:
        raw["dense"]["top_mlp"] = [128 * k] * 4 + [1]
        mem = _static_memory(raw)
        return mem.heap_static, mem.hbm_capacity

    lo, hi = 1, 2**13  # widths 128 .. 2^20 (the config's largest layer)
    while lo < hi:  # the widest whose static heap fits the target (the heap grows with the width)
        mid = (lo + hi + 1) // 2
        used, capacity = heap(mid)
        lo, hi = (mid, hi) if used <= target * capacity else (lo, mid - 1)
    heap(lo)


def _no_stacking(raw: Raw, rng: random.Random) -> None:
    _sc(raw)["disable_table_stacking"] = True


MAX_STACK = 100  # the SparseCore guide's recommended most tables per stack
SPLIT_TO = 50  # tables per stack the too_many_stacked_tables fix splits to (analyzers/rules/stacking.py)


def _one_stack(raw: Raw, rng: random.Random) -> None:
    """Every table in one stack of more than 100: one width, the 2 MiB activation bound lifted, and
    (a base of 60-100 tables) copies of tables and of a feature reading each until there are more
    than 100, so the stack is past the recommended range whatever the base."""
    tables, features = raw["tables"], raw["features"]
    n = len(tables)
    reader = {f["table"]: f for f in features}
    for k in range(max(0, MAX_STACK + 1 + rng.randrange(20) - n)):
        src = tables[k % n]
        copy = {**src, "name": f"t{n + k}"}
        tables.append(copy)
        features.append({**reader[src["name"]], "name": f"f{len(features)}", "table": copy["name"]})
    _sc(raw)["stack_activation_mem_bytes_limit"] = 1 << 30
    width = tables[0]["width"]
    for t in tables:
        t["width"] = width  # one width group, so every table lands in one stack


def _split_stack(raw: Raw, rng: random.Random) -> None:
    """The fix the label names and nothing else: the same tables split into stacks of at most 50
    (the activation bound stays lifted; each run derives its own limits)."""
    n = len(raw["tables"])
    _sc(raw)["max_tables_per_stack"] = -(-n // -(-n // SPLIT_TO))


def _tiny_width(raw: Raw, rng: random.Random) -> None:
    _heaviest(raw)["width"] = rng.choice((1, 2, 4))


def _int8(raw: Raw, rng: random.Random) -> None:
    t = _heaviest(raw)
    t.update(dtype="int8", quantization_config_low=-0.5, quantization_config_high=0.5)


def _clip(raw: Raw, rng: random.Random) -> None:
    _heaviest(raw)["quantization_config_high"] = 0.1


def _unclip(raw: Raw, rng: random.Random) -> None:
    _heaviest(raw)["quantization_config_high"] = 0.5


def _bound_check(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["xla_sparse_core_enable_id_bound_check"] = True
    raw["features"][0]["oov_fraction"] = 0.01


def _no_oov(raw: Raw, rng: random.Random) -> None:
    raw["features"][0]["oov_fraction"] = 0.0


def _nan(raw: Raw, rng: random.Random) -> None:
    _flags(raw)["xla_sc_detect_nan"] = True
    raw["features"][0]["nan_fraction"] = 0.01


def _no_nan(raw: Raw, rng: random.Random) -> None:
    raw["features"][0]["nan_fraction"] = 0.0


def _many_tables(raw: Raw) -> bool:
    return len(raw["tables"]) >= 60


def _some_tables(raw: Raw) -> bool:
    return len(raw["tables"]) >= 4


def _with_lower_limits(raw: Raw, rng: random.Random) -> None:
    return None  # the limits themselves: limits_scale


CAUSES: tuple[Cause, ...] = (
    Cause(
        "limits_too_low",
        "limits",
        frozenset({"minibatching"}),
        frozenset({DERIVE}),
        "minibatches",
        _with_lower_limits,
        limits_scale=LOW_LIMITS_SCALE,
    ),
    Cause(
        "id_dropping",
        "limits",
        frozenset({"id_dropping"}),
        frozenset({DERIVE}),
        "dropped_ids",
        _drop_ids,
        limits_scale=LOW_LIMITS_SCALE,
    ),
    Cause(
        "skew_without_shuffle",
        "ids",
        frozenset({"sc_load_skew"}),
        frozenset({"sparsecore.shuffle_ids"}),
        "step_time",
        _hot_set,
        remove=lambda raw, rng: _sc(raw).update(shuffle_ids=True),
    ),
    Cause(
        "host_threads_short", "host", frozenset({"host_bound"}), frozenset({"host.num_threads"}), "step_time", _threads
    ),
    Cause(
        "prefetch_too_short",
        "host",
        frozenset({"host_bound"}),
        frozenset({"flags.maximum_parallel_iterations"}),
        "step_time",
        _prefetch1,
        remove=_prefetch_removed,
    ),
    Cause(
        "pipelining_off",
        "pipelining",
        frozenset({"not_pipelined"}),
        frozenset({"flags.tf_xla_disable_full_embedding_pipelining"}),
        "step_time",
        _no_pipelining,
    ),
    Cause(
        "hbm_stack_pressure",
        "limits",
        frozenset({"hbm_stack_pressure", "oversized_limits"}),
        frozenset({"flags.xla_sc_num_serialized_tables_to_optimize_hbm"}),
        "hbm_peak",
        _three_groups,
        remove=_serialize_groups,
        limits_scale=None,
    ),
    Cause("heap_pressure_dense", "dense", frozenset({"hbm_heap_pressure"}), frozenset(), "hbm_peak", _dense_heap),
    Cause(
        "too_few_stacked",
        "stacking",
        frozenset({"too_few_stacked_tables"}),
        frozenset({"sparsecore.disable_table_stacking"}),
        "step_time",
        _no_stacking,
        applies=_some_tables,
    ),
    Cause(
        "too_many_stacked",
        "stacking",
        frozenset({"too_many_stacked_tables"}),
        frozenset({"sparsecore.max_tables_per_stack", DERIVE}),
        "step_time",
        _one_stack,
        remove=_split_stack,
        applies=_many_tables,
    ),
    Cause(
        "tiny_widths",
        "widths",
        frozenset({"padding_waste"}),
        frozenset({"tables.*.width"}),
        "construction",
        _tiny_width,
        note="width < 8 pads each row to 8 lanes (32-byte rows): the waste is by construction",
    ),
    Cause(
        "serialization",
        "serialize",
        frozenset(),
        frozenset(),
        "step_time",
        _serialize_groups,
        note="no rule reports needless serialization; scored as a cause no rule claims",
    ),
    Cause(
        "quantization_clipping",
        "widths",
        frozenset({"quantization_clipping"}),
        frozenset({"tables.*.quantization_config_high", "tables.*.quantization_config_low"}),
        "construction",
        lambda raw, rng: (_int8(raw, rng), _clip(raw, rng)),
        remove=_unclip,
        note="int8 range [-0.5, 0.1] against [-0.5, 0.5]: the clipped share differs by construction",
    ),
    Cause(
        "out_of_vocabulary_ids",
        "faults",
        frozenset({"out_of_vocabulary_ids"}),
        frozenset(),
        "construction",
        _bound_check,
        remove=_no_oov,
        note="1% of one feature's IDs replaced by IDs past the vocabulary, bound check on in both runs",
    ),
    Cause(
        "nans",
        "faults",
        frozenset({"nan_detected", "failure_nan_detected"}),
        frozenset(),
        "failed",
        _nan,
        remove=_no_nan,
    ),
)
BY_NAME = {c.name: c for c in CAUSES}
# listed in the issue, not injected here (docs/analyzers.md says why)
NOT_INJECTED = {
    "heap_pressure_prefetch": "prefetched input buffers are sized by the limits, and limits large enough to fill "
    "85% of HBM with 8 steps of prefetch overflow SPMEM first at these workload sizes (a compile failure)",
    "exposed_sc_all_to_all": "no single config key exposes the SparseCore all-to-all alone in this emulator; "
    "large multi-chip stacks raise it together with too_many_stacked_tables (left for a later round)",
}

"""Stacking and padding: tables per stack against the doc's 5-100, and padding waste.

Reads the table layout the producer recorded before step 0 (events of category
`compile` named `table_layout`, one per table, with its stack, vocabulary, width and
their padded sizes; the `stacking_layout` macro of analysis.base) and what each stack costs per step on
the SparseCores (analysis.stacking.stacking_stacks). The SparseCore guide: stacking tables of equal
width, dtype and optimizer cuts per-op overhead and hides ICI latency, and about 5 to
100 tables per stack are recommended; rows are padded to 32 bytes (width 1 f32 wastes
7/8) and vocabularies to a multiple of the SparseCore count.

Rules (thresholds below):
- `too_few_stacked_tables`: stacks of fewer than 5 tables that share their width,
  dtype and optimizer with other stacks, so they could be one stack; severity from the
  fixed per-op cost the extra SparseCore ops add per step, as a share of step time.
- `too_many_stacked_tables`: a stack of more than 100 tables. When it needed minibatches,
  the cause is told from the trace (analyzers/rules/spmem.py): its load needs more SPMEM per tile
  than there is (critical; split it, then derive limits), or its stack limits are below the
  load SPMEM could hold (warning; derive limits: no extra passes, unlike a split). Without
  minibatches: split for overlap.
- `exposed_sc_all_to_all`: the SparseCores' all-to-all runs with nothing else busy on the
  chip for at least 5% of the counted steps (the breakdown's `sc_collective`), the SparseCore
  ops themselves own at least 25% (the step is SparseCore-bound: its path alternates between
  the lookups and their collectives; under TensorCore work the all-to-all sits on the
  TensorCore's path, and a split does not shorten it), and the run's
  largest stack (10-100 tables) could be split in two stacks inside the recommended range,
  and the host's input threads are not saturated (then the host sets the step: measured
  on host_bound.toml, a split changed nothing):
  one stack is one SparseCore pass, so its collectives have no other stack's lookups to hide
  behind. The fix splits it and derives the limits for the new stacks (each one's load per
  partition differs, so the old limits no longer fit it: too low, minibatches; too high,
  empty slots swept).
- `padding_waste`, `vocab_padding_waste`: analyzers/rules/padding.py, from the same layout.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix
from analyzers.rules import idle_gaps, padding, spmem
from analyzers.rules.breakdown import counted_rows, shares, step_breakdown
from analyzers.rules.padding import ACTIVATION_BYTES
from profiler import sqltree
from profiler.units import format_value

NAME = "stacking"
QUESTION = "Are tables stacked in the doc's 5-100 range, and how much do padded rows and vocabularies waste?"

MIN_TABLES = 5  # the SparseCore guide: about 5 to 100 stacked tables are recommended
MAX_TABLES = 100
SPLIT_TO = 50  # tables per stack suggested when splitting a too large stack
FEW_WARN_SHARE = 0.05  # extra per-op cost of too-small stacks, share of step time
FEW_CRITICAL_SHARE = 0.20
FIT_R2 = 0.5  # the op-duration fit must explain this much to give the fixed cost
EXPOSED_A2A_INFO = 0.05  # SparseCore all-to-all with nothing else busy, share of the counted steps
EXPOSED_A2A_WARN = 0.10
ACTIVATION_LIMIT = 2 << 20  # the library's default sparsecore.stack_activation_mem_bytes_limit
SC_OPS_EXPOSED = 0.25  # SparseCore forward + backward ops with no TensorCore work over them, share of the steps
HOST_WAIT = 0.5  # share of the SparseCores' idle time spent waiting for host input: the host sets the step


def analyze(ctx: RunContext) -> Analysis:
    tables = ctx.sql("analysis.stacking.stacking_tables")
    result = Analysis(NAME, tables={"stacking_tables": tables})
    rows = tables.to_pylist()
    if not rows:
        result.notes.append(
            "the run records no table layout (events of category 'compile' named 'table_layout'): "
            "stacking and padding cannot be judged"
        )
        return result
    stacks_tbl = ctx.sql("analysis.stacking.stacking_stacks")
    result.tables["stacking_stacks"] = stacks_tbl
    stacks = {s["stack_name"]: s for s in stacks_tbl.to_pylist()}
    layout = _stacks_from_layout(rows)
    total_padded = sum(r["padded_bytes"] for r in rows) or 1
    total_ids = sum(s["ids"] or 0 for s in stacks.values()) or 0
    step_ps = ctx.step_median_ps()
    sizes = [s["tables"] for s in layout.values()]
    result.figures = {
        "tables": len(rows),
        "stacks": len(layout),
        "tables_per_stack_max": max(sizes),
        "tables_per_stack_mean": sum(sizes) / len(sizes),
        "stacks_below_5": sum(n < MIN_TABLES for n in sizes),
        "stacks_above_100": sum(n > MAX_TABLES for n in sizes),
        "padded_bytes": total_padded,
        "wasted_bytes": sum(r["padded_bytes"] - r["stored_bytes"] for r in rows),
        "waste_share": sum(r["padded_bytes"] - r["stored_bytes"] for r in rows) / total_padded,
    }
    result.findings += _too_few(ctx, layout, stacks, step_ps)
    result.findings += _too_many(ctx, layout, stacks)
    result.findings += _exposed_all_to_all(ctx, layout, stacks, step_ps)
    result.findings += padding.row_padding(ctx, rows, stacks, total_padded, total_ids)
    vocab = padding.vocab_padding(ctx, rows, total_padded)
    if vocab is not None:
        result.findings.append(vocab)
    return result


def _stacks_from_layout(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stack: its tables, key (width, dtype bytes, optimizer slots) and byte totals."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = out.setdefault(
            r["stack_name"],
            {
                "tables": 0,
                "names": [],
                "key": (r["width"], r["dtype_bytes"], r["optimizer_slots"]),
                "row_padding_share": r["row_padding_share"],
                "padded_width": r["padded_width"],
                "padded_bytes": 0,
                "row_padding_bytes": 0,
            },
        )
        s["tables"] += 1
        s["names"].append(r["table_name"])
        s["padded_bytes"] += r["padded_bytes"]
        s["row_padding_bytes"] += r["row_padding_bytes"]
    return out


def _too_few(ctx: RunContext, layout: dict, stacks: dict, step_ps: float | None) -> list[Finding]:
    """Small stacks that could be merged with stacks of the same width, dtype and optimizer."""
    by_key: dict[tuple, list[str]] = defaultdict(list)
    for name, s in layout.items():
        by_key[s["key"]].append(name)
    library = _library_stacks(ctx)
    out = []
    for key, names in sorted(by_key.items()):
        small = [n for n in names if layout[n]["tables"] < MIN_TABLES]
        n_tables = sum(layout[n]["tables"] for n in names)
        ideal = math.ceil(n_tables / MAX_TABLES)
        if library is not None:  # stacks the library's own rules keep apart cannot be merged
            ideal = max(ideal, len({library[t] for n in names for t in layout[n]["names"] if t in library}))
        if len(small) < 2 or len(names) <= ideal:
            continue
        passes = [stacks[n]["passes_per_step"] for n in names if n in stacks and stacks[n]["passes_per_step"]]
        per_stack = sum(passes) / len(passes) if passes else 2.0  # forward + backward
        fits = [stacks[n] for n in names if n in stacks]
        fit = fits[0] if fits else {}
        fixed = (
            fit.get("fixed_ps_per_op")
            if (fit.get("fit_r2") or 0) >= FIT_R2 and (fit.get("fixed_ps_per_op") or 0) > 0
            else None
        )
        extra_ops = (len(names) - ideal) * per_stack
        overhead = fixed * extra_ops if fixed is not None else None
        share = overhead / step_ps if overhead is not None and step_ps else None
        if share is not None and share < FEW_WARN_SHARE:
            continue
        width, dtype_bytes, slots = key
        out.append(
            Finding(
                rule="too_few_stacked_tables",
                severity="critical" if share is not None and share >= FEW_CRITICAL_SHARE else "warning",
                title=(
                    f"{len(small)} stacks of fewer than {MIN_TABLES} tables (width {width}, {dtype_bytes}-byte elements) "
                    f"could be {ideal} stack{'s' if ideal > 1 else ''}: {extra_ops:.0f} extra SparseCore ops per step"
                ),
                metric="overhead_share_of_step",
                value=share if share is not None else float("nan"),
                unit="share of step time",
                recommendation=(
                    "Stack these tables: --set sparsecore.disable_table_stacking=false (tables of equal width, dtype and "
                    f"optimizer form one stack; aim for {MIN_TABLES} to {MAX_TABLES} tables per stack, "
                    "sparsecore.max_tables_per_stack caps it). Fewer, larger SparseCore ops pay the fixed per-op cost "
                    "once and let each all-to-all hide behind the next stack's lookups."
                ),
                evidence={
                    "stacks": len(names),
                    "small_stacks": len(small),
                    "tables": n_tables,
                    "stacks_if_stacked": ideal,
                    "sc_ops_per_step_per_sparsecore": per_stack * len(names),
                    "extra_ops_per_step": extra_ops,
                    "fixed_ps_per_op": fixed,
                    "estimated_overhead_ps_per_step": overhead,
                    "step_ps": step_ps,
                },
                entities={"tables": sorted(small)},
                confidence="medium" if share is not None else "low",
                fix=_stack_fix(ctx, n_tables),
                evidence_sql=sqltree.show("evidence.stacking.layout_stack_keys", run=ctx.run_id),
            )
        )
    return out


def _library_stacks(ctx: RunContext) -> dict[str, int] | None:
    """The stack each table lands in when stacking is on and uncapped, by the library's rules
    (jax-tpu-embedding's `auto_stack_tables`, as sim_backend/stacking.py models them): tables of
    equal padded width (a multiple of 8), optimizer, combiner and dtype, split first fit so that a
    stack's activations per SparseCore (padded width x samples per SparseCore x 4 bytes, summed
    over the features that read its tables) stay within `sparsecore.stack_activation_mem_bytes_limit`.

    Stacks split by these rules cannot be merged by turning stacking on or lifting a cap: with few
    SparseCores (one chip) each SparseCore takes a large share of the batch, so a wide table's
    activations alone fill most of the 2 MiB and stacks hold one or two tables by design. None when
    the run's config does not give the tables, features, batch and SparseCore count.
    """
    cfg = ctx.config
    tables, features, batch = cfg.get("tables"), cfg.get("features"), cfg.get("global_batch")
    chips, per_chip = ctx.hardware("num_chips"), ctx.hardware("sparsecores_per_chip")
    if not tables or not features or not batch or not chips or not per_chip:
        return None
    sc = cfg.get("sparsecore") or {}
    limit = sc.get("stack_activation_mem_bytes_limit") or ACTIVATION_LIMIT
    by_name = {t["name"]: t for t in tables}
    order = list(dict.fromkeys(f["table"] for f in features if f.get("table") in by_name))
    samples = defaultdict(int)
    for f in features:
        samples[f.get("table")] += batch // (chips * per_chip)
    act = {n: -(-by_name[n]["width"] // 8) * 8 * samples[n] * ACTIVATION_BYTES for n in order}
    buckets: dict[tuple, list[str]] = defaultdict(list)
    for n in order:
        t = by_name[n]
        key = (-(-t["width"] // 8) * 8, t.get("optimizer"), t.get("combiner"), t.get("dtype"))
        buckets[key].append(n)
    out: dict[str, int] = {}
    for names in buckets.values():
        stacks: list[list[str]] = []
        for n in names:  # first fit
            for cand in stacks:
                if sum(act[c] for c in cand) + act[n] <= limit:
                    cand.append(n)
                    break
            else:
                stacks.append([n])
        for members in stacks:
            index = len(set(out.values()))
            out.update(dict.fromkeys(members, index))
    return out


def _stack_fix(ctx: RunContext, n_tables: int) -> dict | None:
    """Turn stacking on where the config has it off (or does not say), lift a cap below the
    recommended range, and let a tuner try stack sizes inside it."""
    sc = ctx.config.get("sparsecore") or {}
    cap = sc.get("max_tables_per_stack") or 0
    changes: dict[str, Any] = {}
    if sc.get("disable_table_stacking") is not False:
        changes["sparsecore.disable_table_stacking"] = False
    if 0 < cap < min(MIN_TABLES, n_tables):
        changes["sparsecore.max_tables_per_stack"] = min(MAX_TABLES, n_tables)
    sizes = sorted({min(MAX_TABLES, math.ceil(n_tables / k)) for k in (1, 2, 4)} - set(range(MIN_TABLES)))
    explore = {"sparsecore.max_tables_per_stack": sizes} if len(sizes) > 1 else {}
    return make_fix(set=changes, explore=explore) if changes else None


def _too_many(ctx: RunContext, layout: dict, stacks: dict) -> list[Finding]:
    """Stacks above the recommended 100 tables, with what their minibatches came from.

    A stack's limit is the stack's own (jax-tpu-embedding gives every stack of several tables
    one stack-level limit), so when the stack's load needs more SPMEM than a tile has
    (analyzers/rules/spmem.py), only a split removes the minibatches. Otherwise the limits are too
    low for the load: deriving them (a limits file) removes the minibatches without the
    per-op cost of more stacks, so it is the fix, and splitting is left to explore.
    """
    out = []
    room = spmem.headroom(ctx)
    for name, s in sorted(layout.items()):
        n = s["tables"]
        if n <= MAX_TABLES:
            continue
        mb = (stacks.get(name) or {}).get("max_minibatches")
        g = room.get(name) or {}
        split = math.ceil(n / math.ceil(n / SPLIT_TO))
        explore = sorted({math.ceil(n / k) for k in (2, 3, 4) if math.ceil(n / k) <= MAX_TABLES} | {split})
        evidence = {
            "tables": n,
            "max_minibatches": mb,
            "observed_max_ids": g.get("observed_ids"),
            "max_ids_per_partition": g.get("limit_ids"),
            "observed_max_unique_ids": g.get("observed_unique_ids"),
            "max_unique_ids_per_partition": g.get("limit_unique_ids"),
            "spmem_at_observed_bytes": g.get("spmem_at_observed_bytes"),
            "spmem_capacity_bytes": g.get("capacity_bytes"),
        }
        minibatched = (mb or 1) > 1
        low_gain = False  # without minibatches: a split pays only if it hides more than it adds
        if minibatched and g.get("binding"):
            cause = "spmem"
            pieces = spmem.pieces_to_fit(g)
            split = math.ceil(n / max(pieces, math.ceil(n / MAX_TABLES)))
            fix = make_fix(
                set={"sparsecore.max_tables_per_stack": split},
                derive_limits=True,
                explore={"sparsecore.max_tables_per_stack": sorted({split, math.ceil(split / 2)})},
            )
            advice = (
                f"Split it: --set sparsecore.max_tables_per_stack={split} ({math.ceil(n / split)} stacks), then derive "
                "the limits (flags.xla_sparse_core_estimate_max_ids=true, then the limits file it writes). Its load "
                f"per partition ({g['observed_ids']:,} IDs, {g['observed_unique_ids']:,} unique) needs about "
                f"{g['spmem_at_observed_bytes']:,} bytes of SPMEM per tile, more than a tile's "
                f"{g['capacity_bytes']:,}: no limits fit this stack, so it runs in minibatches until it is smaller."
            )
        elif minibatched:
            cause = "limits"
            fix = make_fix(derive_limits=True, explore={"sparsecore.max_tables_per_stack": explore})
            spmem_text = (
                f" (about {g['spmem_at_observed_bytes']:,} of a tile's {g['capacity_bytes']:,} bytes of SPMEM)"
                if g.get("spmem_at_observed_bytes") and g.get("capacity_bytes")
                else ""
            )
            advice = (
                "Its minibatches come from its limits, not from its size: the stack's limit "
                f"({g.get('limit_ids', '?'):,} IDs per partition) is below its load ({g.get('observed_ids', 0):,}), "
                f"which SPMEM can hold{spmem_text}. Raise the stack's limits: derive a limits file (--set "
                "flags.xla_sparse_core_estimate_max_ids=true, then flags.xla_sparse_core_max_ids_file). Splitting the "
                "stack under the same limit lowers each stack's load too, but adds a SparseCore pass and an all-to-all "
                "per stack; derived limits remove the minibatches without them."
            )
        else:
            cause = "size"
            gain = _split_gain(ctx, stacks.get(name) or {}, ctx.step_median_ps())
            if gain is not None:
                evidence.update(gain)
                net = gain["net_if_all_hidden_share"]
                low_gain = gain["blocked_by"] is not None or (net is not None and net < EXPOSED_A2A_INFO)
            fix = make_fix(
                set={"sparsecore.max_tables_per_stack": split}, explore={"sparsecore.max_tables_per_stack": explore}
            )
            advice = (
                f"Split it: --set sparsecore.max_tables_per_stack={split} ({math.ceil(n / split)} stacks). One huge "
                "stack runs as one SparseCore pass per step, so its all-to-all cannot hide behind other stacks' lookups."
            )
            if low_gain:
                advice += (
                    " Here a split gains little: "
                    + {
                        "pipelining": "pipelining is off, so no stack's all-to-all hides behind other work",
                        "host": "the host input sets the step, not the SparseCores",
                    }.get(
                        gain["blocked_by"],
                        "the all-to-all the step waits on is shorter than the fixed cost of the passes a split adds",
                    )
                    + "."
                )
        evidence["cause"] = cause
        if cause != "limits":
            evidence["suggested_tables_per_stack"] = split
        out.append(
            Finding(
                rule="too_many_stacked_tables",
                severity="critical" if minibatched and cause == "spmem" else "info" if low_gain else "warning",
                title=f"Stack {name} holds {n} tables (recommended {MIN_TABLES}-{MAX_TABLES})"
                + (f" and needed up to {mb} minibatches per step" if minibatched else "")
                + {"spmem": " (its load overflows SPMEM)", "limits": " (from its limits, not SPMEM)", "size": ""}[
                    cause
                ],
                metric="tables_per_stack",
                value=n,
                unit="tables",
                recommendation=advice,
                evidence=evidence,
                entities={"tables": [name]},
                evidence_sql=sqltree.show("evidence.stacking.layout_stack_tables", run=ctx.run_id, stack=name),
                fix=fix,
            )
        )
    return out


def _split_gain(ctx: RunContext, stack: dict, step_ps: float | None) -> dict[str, Any] | None:
    """What splitting one stack in two can gain on the step, from the run's own timeline: at most
    the SparseCore all-to-all exposed on the step (nothing else busy on the chip: the breakdown's
    `sc_collective`), when the step waits on it at all; at the cost of the new stack's passes
    (forward and backward, per SparseCore and step), each paying the fixed per-op cost
    (`stacking_stacks`' fit). When the lookups are mostly that fixed cost, a split costs what it
    can hide. `blocked_by` names what sets the step instead of the all-to-all: pipelining off
    (every SparseCore op runs in turn with the TensorCore's: not_pipelined's) or the host (the
    input threads saturated, or the SparseCores' idle time mostly waiting for input). None when
    the run has no step breakdown."""
    split = step_breakdown(ctx)
    if split.num_rows == 0:
        return None
    share = shares(counted_rows(split, ctx.step_times()))
    busy = idle_gaps.host_throughput(ctx)["input_thread_busy_share"]
    waiting = idle_gaps.causes(ctx, "sparsecore").get("host", {}).get("share", 0.0)
    blocked = (
        "pipelining"
        if (ctx.config.get("flags") or {}).get("tf_xla_disable_full_embedding_pipelining") is True
        else "host"
        if (busy is not None and busy >= idle_gaps.SATURATED) or waiting >= HOST_WAIT
        else None
    )
    exposed = share.get("sc_collective", 0.0)
    fixed = stack.get("fixed_ps_per_op") if (stack.get("fit_r2") or 0) >= FIT_R2 else None
    added = fixed * (stack.get("passes_per_step") or 2.0) if fixed and fixed > 0 else None
    return {
        "sc_collective_share": exposed,
        "sc_ops_share": share.get("sc_forward", 0.0) + share.get("sc_backward", 0.0),
        "fixed_ps_per_op": fixed,
        "added_fixed_ps_per_step": added,
        "net_if_all_hidden_share": exposed - added / step_ps if added is not None and step_ps else None,
        "sc_idle_waiting_for_input_share": waiting,
        "blocked_by": blocked,
    }


def _exposed_all_to_all(ctx: RunContext, layout: dict, stacks: dict, step_ps: float | None) -> list[Finding]:
    """The SparseCore all-to-all exposed on the step while the largest stack runs as one pass."""
    name, s = max(layout.items(), key=lambda kv: (kv[1]["tables"], kv[0]))
    n = s["tables"]
    if not 2 * MIN_TABLES <= n <= MAX_TABLES:
        return []  # a stack above 100 tables is too_many_stacked_tables'
    gain = _split_gain(ctx, stacks.get(name) or {}, step_ps)
    if gain is None or gain["blocked_by"]:
        return []
    exposed, sc_ops, net = gain["sc_collective_share"], gain["sc_ops_share"], gain["net_if_all_hidden_share"]
    if exposed < EXPOSED_A2A_INFO or sc_ops < SC_OPS_EXPOSED:
        return []
    warn = exposed >= EXPOSED_A2A_WARN and (net is None or net >= EXPOSED_A2A_INFO)
    halves = math.ceil(n / 2)
    sizes = sorted({halves} | ({math.ceil(n / 4)} if math.ceil(n / 4) >= MIN_TABLES else set()))
    return [
        Finding(
            rule="exposed_sc_all_to_all",
            severity="warning" if warn else "info",
            title=(
                f"The SparseCore all-to-all runs exposed {format_value(exposed, 'share')} of the step: stack {name}'s {n} tables "
                + (
                    "are the run's one SparseCore pass, so no other stack's lookups hide its collectives"
                    if len(layout) == 1
                    else "are one SparseCore pass, too long for other stacks' lookups to hide"
                )
            ),
            metric="sc_collective_share",
            value=exposed,
            unit="share of step time",
            recommendation=(
                f"Split the stack: --set sparsecore.max_tables_per_stack={halves} ({math.ceil(n / halves)} stacks, "
                f"inside the recommended {MIN_TABLES}-{MAX_TABLES}), so one stack's all-to-all runs under the next "
                "stack's lookups, and derive the limits for the new stacks (flags.xla_sparse_core_estimate_max_ids="
                "true, then the limits file it writes): a smaller stack's load per partition is not the old one's "
                "share, so limits summed for the old stack give it minibatches or empty slots."
            ),
            evidence={
                **{k: v for k, v in gain.items() if k != "blocked_by"},
                "tables": n,
                "stacks": len(layout),
                "suggested_tables_per_stack": halves,
            },
            entities={"tables": [name]},
            confidence="medium",
            evidence_sql=sqltree.show("evidence.stacking.sc_step_ops", run=ctx.run_id),
            fix=make_fix(
                set={"sparsecore.max_tables_per_stack": halves},
                derive_limits=True,
                explore={"sparsecore.max_tables_per_stack": sizes} if len(sizes) > 1 else None,
            ),
        )
    ]

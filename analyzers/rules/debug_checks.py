"""Debug checks and quantization: out-of-vocabulary IDs, NaNs, clipped embedding values.

Reads the check events of the trace (profiler/sql/analysis/checks.sql): the ID bound check
(`xla_sparse_core_enable_id_bound_check`) and the NaN checker (`xla_sc_detect_nan`)
report per step and table what they found; quantized tables report how many of the
values a step looked up fell outside `[quantization_config_low, quantization_config_high]`
and were clipped. A check that was off left no events, so it finds nothing here.
"""

from __future__ import annotations

from typing import Any

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix
from profiler import sqltree
from profiler.units import format_value

NAME = "debug_checks"
QUESTION = "Do the debug checks find out-of-vocabulary IDs or NaNs, and does quantization clip values?"

CLIP_WARN_SHARE = 0.001  # more than 0.1% of looked-up values clipped: the range is too narrow
CLIP_CRITICAL_SHARE = 0.05  # more than 5%: the quantized table has lost its tails
MAX_STEPS_LISTED = 20  # steps named in a finding's entities


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.sql("analysis.checks.checks_by_step")
    result = Analysis(NAME, tables={"checks_by_step": table})
    if table.num_rows == 0:  # the checks were off and no table is quantized: the usual case, nothing to say
        result.figures = {"checks": []}
        return result
    totals = ctx.sql("analysis.checks.check_totals", {"checks": table}).to_pylist()
    checks = sorted({r["check_name"] for r in totals})
    result.figures = {
        "checks": checks,
        "oov_ids": sum(r["oov_ids"] or 0 for r in totals),
        "nan_values": sum(r["nan_values"] or 0 for r in totals),
        "clipped_values": sum(r["clipped_values"] or 0 for r in totals),
    }
    for r in totals:
        finding = {"id_bound_check": _oov, "nan_check": _nan, "quantization": _clipping}.get(r["check_name"])
        f = finding(ctx, r) if finding else None
        if f is not None:
            result.findings.append(f)
    on = [c for c in ("id_bound_check", "nan_check") if c in checks]
    if on:
        result.findings.append(_enabled(ctx, on, totals))
    return result


def _steps(r: dict[str, Any]) -> list[int]:
    return list(r["flagged_steps"] or [])[:MAX_STEPS_LISTED]


# The evidence query of each check's finding (analysis.checks): its events of one table, with their arguments.
EVIDENCE = {
    "id_bound_check": "analysis.checks.oov_evidence",
    "nan_check": "analysis.checks.nan_evidence",
    "quantization": "analysis.checks.clipping_evidence",
}


def _evidence_sql(ctx: RunContext, check: str, table: str) -> str:
    # the heading names the table as it reads (a comment), the query quotes it
    heading = f"-- {check} events of table {table}, one per step, with their arguments\n"
    return heading + sqltree.show(EVIDENCE[check], run=ctx.run_id, table_name=table)


def _oov(ctx: RunContext, r: dict[str, Any]) -> Finding | None:
    if not r["oov_ids"]:
        return None
    share = r["oov_ids"] / r["ids"] if r["ids"] else None
    vocab = r["vocab"]
    return Finding(
        rule="out_of_vocabulary_ids",
        severity="critical",
        title=(
            f"Table {r['table_name']}: the ID bound check found {r['oov_ids']:,} out-of-vocabulary IDs in "
            f"{r['steps_flagged']} of {r['steps_checked']} steps"
            + (f" ({format_value(share, 'share')} of its IDs)" if share is not None else "")
        ),
        metric="oov_share" if share is not None else "oov_ids",
        value=share if share is not None else r["oov_ids"],
        unit="share of IDs" if share is not None else "IDs",
        recommendation=(
            f"The input pipeline sends IDs outside [0, {vocab:,}) for {r['table_name']}: fix its ID mapping "
            "(hash or bucket the raw IDs into the vocabulary) or enlarge the table's vocab. Without the check such "
            "IDs go unnoticed: out-of-bounds gather indices are clamped, so they silently read and train a wrong "
            "row. Keep xla_sparse_core_enable_id_bound_check on until the data is clean, then turn it off: it costs "
            "SparseCore time."
        ),
        evidence={
            "oov_ids": r["oov_ids"],
            "ids": r["ids"],
            "vocab": vocab,
            "steps_flagged": r["steps_flagged"],
            "steps_checked": r["steps_checked"],
        },
        entities={"tables": [r["table_name"]], "steps": _steps(r)},
        evidence_sql=_evidence_sql(ctx, "id_bound_check", r["table_name"]),
    )


def _nan(ctx: RunContext, r: dict[str, Any]) -> Finding | None:
    if not r["nan_values"]:
        return None
    share = r["nan_samples"] / r["samples"] if r["samples"] else None
    return Finding(
        rule="nan_detected",
        severity="critical",
        title=(
            f"Table {r['table_name']}: the NaN checker found {r['nan_values']:,} NaN input values in "
            f"{r['nan_samples']:,} samples over {r['steps_flagged']} of {r['steps_checked']} steps"
        ),
        metric="nan_sample_share" if share is not None else "nan_values",
        value=share if share is not None else r["nan_values"],
        unit="share of samples" if share is not None else "values",
        recommendation=(
            f"Some samples reach {r['table_name']}'s lookup with NaN weights (the COO values): find where the input "
            "pipeline produces them (division by zero, log of 0, missing-value handling) and clean or drop those "
            "samples. Without xla_sc_detect_nan the NaNs flow silently into activations, gradients and the table "
            "rows they update."
        ),
        evidence={
            "nan_values": r["nan_values"],
            "nan_samples": r["nan_samples"],
            "samples": r["samples"],
            "steps_flagged": r["steps_flagged"],
        },
        entities={"tables": [r["table_name"]], "steps": _steps(r)},
        evidence_sql=_evidence_sql(ctx, "nan_check", r["table_name"]),
    )


def _clipping(ctx: RunContext, r: dict[str, Any]) -> Finding | None:
    if not r["values"]:
        return None
    share = r["clipped_values"] / r["values"]
    if share <= CLIP_WARN_SHARE:
        return None
    low, high = r["quantization_config_low"], r["quantization_config_high"]
    return Finding(
        rule="quantization_clipping",
        severity="critical" if share > CLIP_CRITICAL_SHARE else "warning",
        title=(
            f"Table {r['table_name']}: quantization clips {format_value(share, 'share')} of the embedding values looked up "
            f"(range [{low:g}, {high:g}])"
        ),
        metric="clipped_share",
        value=share,
        unit="share of values",
        recommendation=(
            f"Values of {r['table_name']} outside [{low:g}, {high:g}] are clipped to the range, losing the table's "
            f"tails. Widen quantization_config_low / quantization_config_high (e.g. --set "
            f"tables.{r['table_name']}.quantization_config_high=...) until under {CLIP_WARN_SHARE:.1%} of the values "
            f"clip; a wider range coarsens the {r['quantization_config_num_buckets']} buckets, so widen only as far "
            "as the values reach."
        ),
        evidence={
            "clipped_values": r["clipped_values"],
            "values": r["values"],
            "rms_error": r["rms_error"],
            "quantization_config_low": low,
            "quantization_config_high": high,
            "quantization_config_num_buckets": r["quantization_config_num_buckets"],
        },
        entities={"tables": [r["table_name"]], "steps": _steps(r)},
        evidence_sql=_evidence_sql(ctx, "quantization", r["table_name"]),
        fix=_range_fix(r["table_name"], low, high),
    )


def _range_fix(table: str, low: float, high: float) -> dict | None:
    """Widen a clipping quantization range: symmetric over the larger bound, or twice as wide when it
    already is; quantization changes numerics, so never applied automatically."""
    if low is None or high is None:
        return None
    reach = max(abs(low), abs(high))
    if -low == high:
        reach *= 2
    keys = (f"tables.{table}.quantization_config_low", f"tables.{table}.quantization_config_high")
    return make_fix(set={keys[0]: -reach, keys[1]: reach}, changes_numerics=True, explore={keys[1]: [reach, 2 * reach]})


def _enabled(ctx: RunContext, on: list[str], totals: list[dict[str, Any]]) -> Finding:
    flags = {"id_bound_check": "xla_sparse_core_enable_id_bound_check", "nan_check": "xla_sc_detect_nan"}
    steps = max(r["steps_checked"] for r in totals if r["check_name"] in on)
    return Finding(
        rule="debug_checks_enabled",
        severity="info",
        title=f"Debug checks ran on {steps} steps: {', '.join(flags[c] for c in on)}",
        metric="checks_enabled",
        value=len(on),
        unit="checks",
        recommendation=(
            "Debug checks cost SparseCore time on every step; once they find nothing, turn "
            f"{' and '.join(flags[c] for c in on)} off for production runs and compare step times."
        ),
        evidence={"checks": on, "steps_checked": steps},
        fix=make_fix(set={f"flags.{flags[c]}": False for c in on}),
        evidence_sql=sqltree.show("analysis.checks.enabled_evidence", run=ctx.run_id),
    )

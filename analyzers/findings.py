"""Typed results of analyzers: findings with evidence, and the tables behind them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem (or fact) with the figures that show it and what to change.

    `value`/`unit` are the headline figure; `evidence` holds further figures by name;
    `entities` names what is affected (chips, scs, tables, steps); `confidence`
    says how sure the analyzer is (high: measured directly; medium: inferred;
    low: missing data); `evidence_sql` reproduces the evidence in `scprof sql`.
    """

    rule: str
    severity: str
    title: str
    metric: str
    value: float
    unit: str
    recommendation: str
    evidence: dict[str, Any] = field(default_factory=dict)
    entities: dict[str, list] = field(default_factory=dict)
    confidence: str = "high"
    evidence_sql: str = ""
    fix: dict[str, Any] | None = None  # the config change that addresses it (make_fix), None when no lever
    verified: dict[str, Any] | None = None  # filled by `analyze --verify` (whatif.verify): the fix simulated alone

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}")
        if self.fix is not None:
            check_fix(self.fix)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Analysis:
    """What one analyzer found for one run: findings, named tables and notes."""

    analyzer: str
    findings: list[Finding] = field(default_factory=list)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. data the run lacks


Scalar = bool | int | float | str
_SCALARS = (bool, int, float, str)


def make_fix(
    set: dict[str, Any] | None = None,  # noqa: A002 - the contract's name for the overrides
    derive_limits: bool = False,
    changes_numerics: bool = False,
    explore: dict[str, list] | None = None,
) -> dict[str, Any]:
    """A finding's structured fix, validated: the config overrides to apply (`set`, keys exactly as
    `scprof record --set KEY=VALUE` takes them), whether to derive per-table limits through a
    limits file first (`derive_limits`), whether the change alters what the model computes
    (`changes_numerics`: shown, never applied automatically) and candidate values a tuner may try
    one at a time (`explore`)."""
    fix = {
        "set": dict(set or {}),
        "derive_limits": bool(derive_limits),
        "changes_numerics": bool(changes_numerics),
        "explore": {k: list(v) for k, v in (explore or {}).items()},
    }
    check_fix(fix)
    return fix


def check_fix(fix: dict[str, Any]) -> None:
    """Raise ValueError unless `fix` has the contract's shape: dotted string keys, JSON scalars
    (or lists of them) in `set`, non-empty lists of scalars in `explore`."""
    if set(fix) != {"set", "derive_limits", "changes_numerics", "explore"}:
        raise ValueError(f"fix: expected keys set, derive_limits, changes_numerics, explore; got {sorted(fix)}")
    for flag in ("derive_limits", "changes_numerics"):
        if not isinstance(fix[flag], bool):
            raise ValueError(f"fix.{flag}: expected a bool")
    for part in ("set", "explore"):
        if not isinstance(fix[part], dict):
            raise ValueError(f"fix.{part}: expected a dict")
        for key, value in fix[part].items():
            if not isinstance(key, str) or "." not in key or any(not p for p in key.split(".")):
                raise ValueError(f"fix.{part}: {key!r} is not a dotted config key (section.name)")
            values = value if part == "explore" else (value if isinstance(value, list) else [value])
            if part == "explore" and (not isinstance(value, list) or not value):
                raise ValueError(f"fix.explore.{key}: expected a non-empty list of values")
            if not all(isinstance(v, _SCALARS) for v in values):
                raise ValueError(f"fix.{part}.{key}: expected JSON scalars (bool, int, float, str) or a list of them")
    if not fix["set"] and not fix["derive_limits"] and not fix["explore"]:
        raise ValueError("fix: nothing to change (empty set, no derive_limits, no explore)")


def fix_text(fix: dict[str, Any]) -> str:
    """A fix in one line: `set K=V, K=V; derive limits file; explore K in [a, b]; changes numerics: ...`."""
    parts = []
    if fix["set"]:
        parts.append("set " + " ".join(f"{k}={_value_text(v)}" for k, v in fix["set"].items()))
    if fix["derive_limits"]:
        parts.append("derive limits file")
    if fix["explore"]:
        parts.append(
            "explore " + " ".join(f"{k} in [{', '.join(map(_value_text, v))}]" for k, v in fix["explore"].items())
        )
    if fix["changes_numerics"]:
        parts.append("changes numerics: not applied automatically")
    return "; ".join(parts)


def _value_text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def step_distribution(values: Any, threshold: float) -> dict[str, float | int | None]:
    """How a per-step figure is spread over the steps: its exact median and 90th percentile
    (numpy's linear percentiles, as the step-time summary), how many steps exceed `threshold`
    (steps_affected) and how many steps there are (steps). Pass one value per counted step
    (step_times.counted), zero for a step the figure does not touch, so `steps` is the counted
    steps' count and a finding can say "in k of n steps" rather than only a mean, which a few
    slow steps can carry. median and p90 are None without steps."""
    v = np.asarray(values, np.float64).ravel()
    if not len(v):
        return {"median": None, "p90": None, "steps_affected": 0, "steps": 0}
    return {
        "median": float(np.median(v)),
        "p90": float(np.percentile(v, 90)),
        "steps_affected": int(np.count_nonzero(v > threshold)),
        "steps": int(len(v)),
    }


def per_counted_step(counted: Any, step: Any, value: Any, fill: float = 0.0) -> np.ndarray:
    """A per-step series over the counted steps: `value` summed per `step` (rows of any steps,
    several rows per step allowed) and laid out along `counted` (the counted steps, ascending);
    `fill` for a counted step without a row. Rows of other steps (and a null step, NaN) drop out."""
    c = np.asarray(counted, np.float64)
    st = np.asarray(step, np.float64)
    v = np.asarray(value, np.float64)
    out = np.full(len(c), fill, np.float64)
    if not len(c) or not len(st):
        return out
    pos = np.minimum(np.searchsorted(c, st), len(c) - 1)
    ok = c[pos] == st
    hit = np.unique(pos[ok])
    out[hit] = 0.0
    np.add.at(out, pos[ok], v[ok])
    return out


def spread_severity(severity: str, values: Any, critical_level: float) -> str:
    """`severity` lowered from critical to warning unless the median of the per-step `values`
    (one per counted step) exceeds `critical_level`, the level at which the rule calls the mean
    critical: a mean that a few slow steps carry is not, on its own, a critical problem of the
    run's typical step. Without per-step values the severity stands."""
    v = np.asarray(values, np.float64).ravel()
    if severity == "critical" and len(v) and not np.median(v) > critical_level:
        return "warning"
    return severity


def spread_text(dist: dict[str, Any], median_format: str | Callable[[Any], str], over: str) -> str:
    """ "median step M; in k of n steps over X" for a title: the median formatted by
    `median_format` (a format string, e.g. "{:.0%}", or a formatter such as profiler.units'
    format_ratio), `over` the threshold as the title shows it; "" without steps."""
    if not dist["steps"]:
        return ""
    fmt = median_format.format if isinstance(median_format, str) else median_format
    return f"median step {fmt(dist['median'])}; in {dist['steps_affected']} of {dist['steps']} steps over {over}"


def severity_rank(f: Finding) -> int:
    return SEVERITIES.index(f.severity)


def group_findings(findings: list[Finding]) -> list[list[Finding]]:
    """Findings by rule, in the order each rule first appears; within a rule the most severe first
    (severity, then the headline value, highest first). Every surface that lists findings shows a
    group as its first finding plus what the others differ in (the UI's group card, `analyze`)."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.rule, []).append(f)
    return [sorted(g, key=_severity_order) for g in groups.values()]


def _severity_order(f: Finding) -> tuple[int, float]:
    value = f.value if isinstance(f.value, int | float) and f.value == f.value else float("-inf")
    return SEVERITIES.index(f.severity), -value

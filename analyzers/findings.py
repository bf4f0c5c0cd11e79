"""Typed results of analyzers: findings with evidence, and the tables behind them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
    fix: dict[str, Any] | None = None
    verified: dict[str, Any] | None = None  # filled by `analyze --verify` (whatif.verify): the fix simulated alone

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}")

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


def severity_rank(f: Finding) -> int:
    return SEVERITIES.index(f.severity)


def sql_literal(value: str) -> str:
    """A string as a SQL literal, for evidence queries shown to users."""
    return "'" + str(value).replace("'", "''") + "'"

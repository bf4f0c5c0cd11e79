"""Findings' evidence on the UI's pages: the label / value table of a finding (Findings, Overview,
Compare). The labels and the formatting are profiler/units.py's (evidence_label, format_evidence),
the one definition the CLI's `analyze` output uses too, so every surface reads the same."""

from __future__ import annotations

from typing import Any

from dash import html

from profiler.units import evidence_items, evidence_label, format_evidence, unit_of

__all__ = ["evidence_items", "evidence_label", "evidence_table", "format_evidence", "unit_of"]


def evidence_table(evidence: dict[str, Any], start_ps: int | float = 0) -> html.Table:
    """A finding's evidence as label / value rows (the key itself on hover, for SQL and JSON)."""
    return html.Table(
        [
            html.Tr([html.Td(label, title=k), html.Td(text, className="num")])
            for k, label, text in evidence_items(evidence, start_ps)
        ],
        className="kv evidence",
    )

"""Findings' evidence for people: a readable label per key and its value formatted by the key's
unit suffix, the one formatter every page that shows evidence uses (Findings, Overview, Compare).

Keys name their unit in a suffix: `*_ts_ps` / `*_at_ps` are timestamps (shown as a time from the
run's start, labelled "at"), `*_ps` durations, `*_bytes` bytes, `*_share` and `share_of_*` shares,
`*_over_*` ratios (×); other numbers are counts with separators.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dash import html

from profiler.units import MISSING, format_bytes, format_ps, format_value, unit_of

# words shown in their usual spelling
_WORDS = {
    "hbm": "HBM",
    "ids": "IDs",
    "id": "ID",
    "sc": "SC",
    "scs": "SCs",
    "tc": "TC",
    "spmem": "SPMEM",
    "oov": "OOV",
    "nan": "NaN",
    "rms": "RMS",
    "cv": "CV",
    "sparsecore": "SparseCore",
    "sparsecores": "SparseCores",
    "tensorcore": "TensorCore",
    "ici": "ICI",
    "vocab": "vocabulary",
}
# keys whose words alone do not say what they are
_LABELS = {
    "cv": "coefficient of variation (CV)",
    "persistence": "same partition hottest",
    "worst_max_over_mean": "worst step's max / mean",
    "largest_limit_over_observed": "largest limit / observed",
    "fixed_ps_per_op": "fixed cost per op",
    "steps": "steps",
    "driver_bytes": "driver's size",
    "driver_growth_bytes": "driver's growth",
}
_UNITS = {"persistence": "share"}  # keys whose unit their name does not carry


def _words(stem: str) -> str:
    return " ".join(_WORDS.get(w, w) for w in stem.split("_") if w)


def evidence_unit(key: str) -> str:
    """How a key's value is formatted: 'ts' (a time from the run's start), 'ps', 'bytes', 'share',
    'ratio' or 'count' (from its unit suffix, units in names)."""
    k = key.lower()
    if k in _UNITS:
        return _UNITS[k]
    if k.endswith("_ts_ps") or k.endswith("_at_ps") or k == "ts_ps":
        return "ts"
    if k.startswith("share_of") or "_share_of_" in k:  # a share of bytes is a share
        return "share"
    if "_over_" in k or k.endswith("_ratio"):
        return "ratio"
    return unit_of(k)  # the units in names every figure follows (profiler/units.py)


def evidence_label(key: str) -> str:
    """A key as words: `peak_ts_ps` -> 'peak at', `hbm_peak_bytes` -> 'HBM peak',
    `estimated_overhead_ps_per_step` -> 'estimated overhead per step'."""
    k = key.lower()
    if k in _LABELS:
        return _LABELS[k]
    for suffix in ("_ts_ps", "_at_ps"):
        if k.endswith(suffix):
            return _words(k[: -len(suffix)]) + " at"
    m = re.fullmatch(r"(.*?)_(ps|bytes)_per_(.*)", k)
    if m:
        return f"{_words(m.group(1))} per {_words(m.group(3))}"
    if k.endswith("_ps"):
        return _words(k[:-3]) + " time"
    if k.endswith("_bytes"):
        return _words(k[:-6])
    return _words(k)


def format_evidence(key: str, value: Any, start_ps: int | float = 0) -> str:
    """One evidence value for people, by its key's unit; timestamps as the time from `start_ps`
    (the run's first timestamp)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        unit = evidence_unit(key)
        if unit == "ts":
            return f"{format_ps(value - (start_ps or 0))} from the run's start"
        if unit == "ps":
            return format_ps(value)
        if unit == "bytes":
            return format_bytes(value)
        if unit == "share":
            return f"{value:.1%}"
        if unit == "ratio":
            return f"{value:.3g}×"
        return format_value(value, "count") if float(value).is_integer() else f"{value:,.3g}"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(map(str, value))
    return json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)


def evidence_table(evidence: dict[str, Any], start_ps: int | float = 0) -> html.Table:
    """A finding's evidence as label / value rows (the key itself on hover, for SQL and JSON)."""
    return html.Table(
        [
            html.Tr([html.Td(evidence_label(k), title=k), html.Td(format_evidence(k, v, start_ps), className="num")])
            for k, v in evidence.items()
        ],
        className="kv evidence",
    )

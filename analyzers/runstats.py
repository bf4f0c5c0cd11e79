"""Each run's analysis read from the store's analysis tables (analyzers/materialize.py writes them).

`report` is what `scprof analyze`, `summary`, `ops`, `compare`, the UI and MCP read: the run's
stored figures, findings and notes when its stamp is current (analysis.stored.current), else the
analyzers run afresh (a run stored before this code, or by a what-if trial, or opened read-only).
Of the analyzers' tables, a stored report has the two read outside the analyzers: the
breakdown's wall-time split (run_step_split) and its step times (the step_times view).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import duckdb
import pyarrow as pa

from analyzers.context import step_times
from analyzers.findings import Analysis, Finding
from analyzers.materialize import analysis_sha1
from analyzers.registry import ANALYZERS, RunReport, analyze_run, ranked_findings
from analyzers.time_split import CATEGORIES
from profiler import sqltree
from profiler.errors import one_line
from profiler.store import Store

log = logging.getLogger(__name__)


def report(store: Store, run_id: int) -> RunReport:
    """The run's report: the stored one when current (stored_report), else analyze_run's."""
    kept = stored_report(store, run_id)
    return kept if kept is not None else analyze_run(store, run_id)


def is_current(store: Store, run_id: int) -> bool:
    """Whether the run's analysis rows are current (its stamp: this run, this code, no error)."""
    return bool(
        sqltree.query(store.con, "analysis.stored.current", run=run_id, analysis_sha1=analysis_sha1())
        .column("current")[0]
        .as_py()
    )


def stored_report(store: Store, run_id: int) -> RunReport | None:
    """The run's report from its analysis rows, or None when they are not current or do not
    rebuild (the report is then computed afresh, with one line saying why)."""
    try:
        if not is_current(store, run_id):
            return None
        return _read(store, run_id)
    except (TypeError, ValueError, KeyError, duckdb.Error) as e:
        log.warning(
            "run %s: stored analysis unreadable (%s: %s); analysing it afresh", run_id, type(e).__name__, one_line(e)
        )
        log.debug("run %s: stored analysis unreadable", run_id, exc_info=True)
        return None


def _read(store: Store, run_id: int) -> RunReport:
    figures = figures_of(store, run_id)
    findings: dict[str, list[Finding]] = {m.NAME: [] for m in ANALYZERS}
    for r in sqltree.query(store.con, "analysis.stored.findings", run=run_id).to_pylist():
        findings[r["analyzer"]].append(Finding(**json.loads(r["finding"])))
    notes: dict[str, list[str]] = {m.NAME: [] for m in ANALYZERS}
    for r in sqltree.query(store.con, "analysis.stored.notes", run=run_id).to_pylist():
        notes[r["analyzer"]].append(r["note"])
    if set(figures) - set(notes):
        raise KeyError(f"figures of unknown analyzers {sorted(set(figures) - set(notes))}")
    analyses = {
        m.NAME: Analysis(
            m.NAME,
            findings=findings[m.NAME],
            tables=_stored_tables(store, run_id, m.NAME),
            figures=figures.get(m.NAME, {}),
            notes=notes[m.NAME],
        )
        for m in ANALYZERS
    }
    run = sqltree.query(store.con, "analysis.stored.run", run=run_id).to_pylist()[0]
    return RunReport(run, analyses, ranked_findings(analyses))


def figures_of(store: Store, run_id: int) -> dict[str, dict[str, Any]]:
    """Every analyzer's figures of the run, rebuilt from its run_figures rows (current or not)."""
    return unflatten(sqltree.query(store.con, "analysis.stored.figures", run=run_id).to_pylist())


def unflatten(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """run_figures rows (by analyzer, then ord) back into {analyzer: figures}: the inverse of
    materialize.flatten."""
    out: dict[str, dict[str, Any]] = {}
    nodes: dict[tuple[str, int], Any] = {}
    for r in rows:
        kind = r["type"]
        if kind == "dict":
            value: Any = {}
        elif kind == "list":
            value = []
        elif kind == "bool":
            value = bool(r["int_value"])
        elif kind in ("int", "float", "str", "null"):
            value = {"int": r["int_value"], "float": r["double_value"], "str": r["text_value"], "null": None}[kind]
        else:
            raise ValueError(f"run_figures: unknown type {kind!r}")
        analyzer = r["analyzer"]
        nodes[(analyzer, r["ord"])] = value
        holder = out.setdefault(analyzer, {}) if r["parent"] is None else nodes[(analyzer, r["parent"])]
        if isinstance(holder, list):
            holder.append(value)
        else:
            holder[r["key"]] = value
    return out


def _stored_tables(store: Store, run_id: int, analyzer: str) -> dict[str, pa.Table]:
    """The analysis's tables read outside the analyzers: the breakdown's split and step times."""
    if analyzer != "breakdown":
        return {}
    return {"step_breakdown": step_split(store, run_id), "step_times": step_times(store, run_id)}


def step_split(store: Store, run_id: int) -> pa.Table:
    """The run's stored wall-time split: chip, step, category, dur_ps, as the breakdown made it."""
    return sqltree.query(store.con, "analysis.stored.step_split", run=run_id, categories=list(CATEGORIES))

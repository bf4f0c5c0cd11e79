"""Run reports kept in the store, so that a run is analysed once, when it is stored, rather than at
every `scprof analyze` and at the UI's first view of it (the target: first views within 1 s; the
analyzers take 0.3-0.5 s a demo run alone, 1-1.6 s beside a browser starting on 2 cores).

`scprof record` and `ingest` keep each stored run's report (keep_report) in the store's
analysis_reports and analysis_report_tables (profiler/schema.py). report_for, read by `scprof
analyze`, `compare` and the UI, returns the kept report when it was made from this run (its uuid)
by this code (code_sha1: the analyzers' and the store's source), else runs the analyzers. A report
is kept only if it reads back exactly as computed, so the two paths cannot give different figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from analyzers.findings import Analysis, Finding
from analyzers.registry import ANALYZERS, RunReport, analyze_run, ranked_findings
from profiler import sqltree
from profiler.errors import ScprofError, one_line
from profiler.store import Store

log = logging.getLogger(__name__)

# The source a report depends on: the analyzers (Python, SQL, C) and the store's (its views' SQL).
SOURCE_PACKAGES = ("analyzers", "profiler")
SOURCE_SUFFIXES = (".py", ".sql", ".c", ".h")


@cache
def code_sha1() -> str:
    """SHA-1 over the analyzers' and the profiler's source files (paths and contents)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts:
                h.update(f"{path.relative_to(root).as_posix()}\n".encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def report_for(store: Store, run_id: int) -> RunReport:
    """The run's report: the one kept in the store when current (kept_report), else analyze_run's."""
    report = kept_report(store, run_id)
    return report if report is not None else analyze_run(store, run_id)


def analyse_and_keep(store: Store, run_id: int) -> str | None:
    """Analyse a stored run and keep its report (a writer's store). Returns None, or when an
    analyzer fails on the run a warning for the user: the run stays stored either way, its report
    left for `scprof analyze` or the UI to compute (and to explain, or fail on). A run the
    analyzers refuse, or a report that cannot be kept, is left the same way, silently."""
    try:
        keep_report(store, analyze_run(store, run_id))
    except ScprofError:
        log.debug("run %s: not analysed", run_id, exc_info=True)
    except Exception as e:  # noqa: BLE001 - an analyzer's bug must not undo or block storing the run
        log.debug("run %s: analysis failed", run_id, exc_info=True)
        return f"run {run_id} stored without its report ({type(e).__name__}: {e}); `scprof analyze` retries it"
    return None


def keep_report(store: Store, report: RunReport) -> bool:
    """Write `report` into the store (a writer's, in a transaction of its own), replacing the run's
    earlier one. Returns False, keeping nothing, when the report would not read back exactly
    (a figure JSON cannot hold, such as a tuple or a number-keyed mapping)."""
    analyses = {
        name: {"findings": [f.to_dict() for f in a.findings], "figures": a.figures, "notes": a.notes}
        for name, a in report.analyses.items()
    }
    try:
        text = json.dumps(analyses)
    except (TypeError, ValueError):
        log.warning("run %s: report not kept: not JSON", report.run["run_id"])
        log.debug("run %s: report not kept", report.run["run_id"], exc_info=True)
        return False
    if not _same(json.loads(text), analyses):
        log.warning("run %s: report not kept: it would not read back as computed", report.run["run_id"])
        return False
    run_id = report.run["run_id"]
    tables = [(name, t, _ipc(table)) for name, a in report.analyses.items() for t, table in a.tables.items()]
    con = store.con
    con.begin()
    try:
        sqltree.execute(con, "analysis.reports.delete_report", run=run_id)
        sqltree.execute(con, "analysis.reports.delete_report_tables", run=run_id)
        sqltree.execute(
            con,
            "analysis.reports.insert_report",
            run=run_id,
            uuid=report.run["uuid"],
            code_sha1=code_sha1(),
            analyses=text,
        )
        for analyzer, name, arrow_ipc in tables:
            sqltree.execute(
                con,
                "analysis.reports.insert_report_table",
                run=run_id,
                analyzer=analyzer,
                name=name,
                arrow_ipc=arrow_ipc,
            )
        con.commit()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a COMMIT that failed has ended the transaction
            con.rollback()
        raise
    return True


def kept_report(store: Store, run_id: int) -> RunReport | None:
    """The report kept for the run, or None: none kept, one made by other code or from a run of
    the same id since replaced, or one that does not decode (it is then computed afresh)."""
    try:
        rows = sqltree.query(store.con, "analysis.reports.kept_analyses", run=run_id, code_sha1=code_sha1()).to_pylist()
        return _decode(store, run_id, rows[0]["analyses"]) if rows else None
    except (TypeError, ValueError, KeyError, pa.ArrowException, duckdb.Error) as e:
        # one line for the user; the traceback only when debugging
        log.warning(
            "run %s: kept report unreadable (%s: %s); analysing it afresh", run_id, type(e).__name__, one_line(e)
        )
        log.debug("run %s: kept report unreadable", run_id, exc_info=True)
        return None


def _decode(store: Store, run_id: int, text: str) -> RunReport:
    kept = json.loads(text)
    if list(kept) != [m.NAME for m in ANALYZERS]:
        raise ValueError(f"kept analyzers {list(kept)} are not this code's")
    tables: dict[str, dict[str, pa.Table]] = {name: {} for name in kept}
    for r in sqltree.query(store.con, "analysis.reports.report_tables", run=run_id).to_pylist():
        with pa.ipc.open_stream(r["arrow_ipc"]) as reader:
            table = reader.read_all()
        table.validate(full=True)
        tables[r["analyzer"]][r["name"]] = table
    analyses = {
        name: Analysis(
            name,
            findings=[Finding(**f) for f in a["findings"]],
            tables=tables[name],
            figures=a["figures"],
            notes=a["notes"],
        )
        for name, a in kept.items()
    }
    run = sqltree.query(store.con, "analysis.reports.run", run=run_id).to_pylist()[0]
    return RunReport(run, analyses, ranked_findings(analyses))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b

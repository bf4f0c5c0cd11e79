"""Each run's analysis as tables of the store: the one module that writes them.

A run is analysed once, when a writer stores it (`scprof record`, `ingest`, MCP's record and
ingest), rather than at every `scprof analyze` and every first view of it in the UI: the
analyzers take 0.3-0.5 s on a demo run and seconds on a large capture, reading the result back
takes milliseconds. `build` runs the analyzers (analyzers.registry.analyze_run) and writes, in one
transaction, the run's rows of

- run_figures: every analyzer's figures, one row per value, named by its path
  (`breakdown.share.idle`): the quantities every surface shows;
- run_findings and run_notes;
- run_step_split: the wall-time split (the breakdown analyzer's sweep), which the Overview's
  charts and Compare's breakdown read per step and chip;
- run_analysis: the stamp, naming the run (its uuid) and the code (analysis_sha1).

The one refresh rule: a run's rows are current while its stamp names the run's uuid, this code's
analysis_sha1 and no error (analysis.stored.current). Readers (analyzers/runstats.py) read current
rows and analyse a stale run afresh; writers rebuild stale runs (`refresh`). The analyzers' other
tables (gaps, partition loads, stacking layouts ...) are not stored: bound queries over the raw
tables, run again when an analysis needs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from analyzers.findings import Analysis
from analyzers.registry import RunReport, analyze_run
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store

log = logging.getLogger(__name__)

# The source the analysis depends on: the analyzers (Python, SQL, C) and the store's (its views' SQL).
SOURCE_PACKAGES = ("analyzers", "profiler")
SOURCE_SUFFIXES = (".py", ".sql", ".c", ".h")

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

FIGURE_COLUMNS = pa.schema(
    [
        ("analyzer", pa.string()),
        ("ord", pa.int32()),
        ("parent", pa.int32()),
        ("key", pa.string()),
        ("path", pa.string()),
        ("type", pa.string()),
        ("int_value", pa.int64()),
        ("double_value", pa.float64()),
        ("text_value", pa.string()),
    ]
)


class NotStorable(ValueError):
    """A figure or finding the analysis tables cannot hold exactly (a tuple, a number-keyed dict,
    an int beyond 64 bits, a set in a finding)."""


@cache
def analysis_sha1() -> str:
    """SHA-1 over the analyzers' and the profiler's source files (paths and contents): the code a
    run's analysis rows were made with (run_analysis.analysis_sha1)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts:
                h.update(f"{path.relative_to(root).as_posix()}\n".encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def build(store: Store, run_id: int) -> str | None:
    """Analyse a stored run and write its analysis rows (a writer's store, a transaction of its own).

    Returns None, or when an analyzer fails on the run a warning for the user. The run stays
    stored either way: its stamp then records the error and readers analyse it afresh (and explain
    or fail there). A run the analyzers refuse (ScprofError: e.g. no such run) or a report the
    tables cannot hold exactly is stamped the same way, silently."""
    started = time.perf_counter()
    try:
        report = analyze_run(store, run_id)
    except ScprofError as e:
        log.debug("run %s: not analysed", run_id, exc_info=True)
        _write(store, run_id, None, time.perf_counter() - started, f"not analysed: {e}")
        return None
    except Exception as e:  # noqa: BLE001 - an analyzer's bug must not undo or block storing the run
        log.debug("run %s: analysis failed", run_id, exc_info=True)
        _write(store, run_id, None, time.perf_counter() - started, f"{type(e).__name__}: {e}")
        return f"run {run_id} stored without its analysis ({type(e).__name__}: {e}); `scprof analyze` retries it"
    keep(store, report, time.perf_counter() - started)
    return None


def keep(store: Store, report: RunReport, build_s: float = 0.0) -> bool:
    """Write a computed report's rows (replacing the run's earlier ones). Returns False, keeping
    only a stamp with the reason, when the tables would not read back exactly as computed."""
    run_id = report.run["run_id"]
    try:
        rows = report_rows(report)
    except NotStorable as e:
        log.warning("run %s: analysis not stored: %s", run_id, e)
        _write(store, run_id, None, build_s, f"not storable: {e}")
        return False
    _write(store, run_id, rows, build_s, None)
    return True


def stale_runs(store: Store) -> list[int]:
    """The runs this code has not analysed (no stamp, another run's, other code's), oldest first;
    a run this code failed to analyse is left out (it would fail again: readers explain it)."""
    stale = sqltree.query(store.con, "analysis.stored.stale_runs", analysis_sha1=analysis_sha1())
    return stale.column("run_id").to_pylist()


def refresh(store: Store) -> list[str]:
    """Analyse and store every run of stale_runs in a writer's store, oldest first (after a code
    upgrade or a migration). Returns the warnings of runs whose analysis failed."""
    return [w for run_id in stale_runs(store) if (w := build(store, run_id))]


def report_rows(report: RunReport) -> dict[str, pa.Table]:
    """The analysis tables' rows of a report: figures, findings, notes and split, as Arrow inputs
    of analysis.stored's statements. Raises NotStorable when one would not read back exactly."""
    figures = [row for name, a in report.analyses.items() for row in flatten(name, a.figures)]
    rank = {id(f): i for i, f in enumerate(report.findings)}
    findings = []
    for name, a in report.analyses.items():
        for i, f in enumerate(a.findings):
            whole = f.to_dict()
            try:
                text = json.dumps(whole)  # NaN and infinities as JSON5 words: DuckDB's JSON keeps them
            except (TypeError, ValueError) as e:
                raise NotStorable(f"finding {f.rule}: {e}") from None
            if not same(json.loads(text), whole):
                raise NotStorable(f"finding {f.rule}: would not read back as computed")
            value = f.value if isinstance(f.value, int | float) and not isinstance(f.value, bool) else None
            findings.append(
                {
                    "analyzer": name,
                    "ord": i,
                    "rank": rank[id(f)],
                    "rule": f.rule,
                    "severity": f.severity,
                    "title": f.title,
                    "metric": f.metric,
                    "value": None if value is None else float(value),
                    "unit": f.unit,
                    "confidence": f.confidence,
                    "finding": text,
                }
            )
    notes = [
        {"analyzer": n, "ord": i, "note": note} for n, a in report.analyses.items() for i, note in enumerate(a.notes)
    ]
    split = _split(report.analyses.get("breakdown"))
    return {
        "figures": pa.Table.from_pylist(figures, schema=FIGURE_COLUMNS),
        "findings": pa.Table.from_pylist(
            findings,
            schema=pa.schema(
                [
                    ("analyzer", pa.string()),
                    ("ord", pa.int32()),
                    ("rank", pa.int32()),
                    *((c, pa.string()) for c in ("rule", "severity", "title", "metric")),
                    ("value", pa.float64()),
                    *((c, pa.string()) for c in ("unit", "confidence", "finding")),
                ]
            ),
        ),
        "notes": pa.Table.from_pylist(
            notes, schema=pa.schema([("analyzer", pa.string()), ("ord", pa.int32()), ("note", pa.string())])
        ),
        "split": split,
    }


def flatten(analyzer: str, figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One analyzer's figures as run_figures rows, depth first: a dict or a list is a row whose
    members name its ord as their parent. Raises NotStorable for what the rows cannot hold."""
    rows: list[dict[str, Any]] = []

    def emit(parent: int | None, key: str | None, path: str, value: Any) -> None:
        row = {"analyzer": analyzer, "ord": len(rows), "parent": parent, "key": key, "path": path}
        row.update(_typed(path, value))
        rows.append(row)
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise NotStorable(f"{path}: key {k!r} is not a str")
                emit(row["ord"], k, f"{path}.{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                emit(row["ord"], None, f"{path}[{i}]", v)

    if not isinstance(figures, dict):
        raise NotStorable(f"{analyzer}: figures are a {type(figures).__name__}, not a dict")
    for k, v in figures.items():
        if not isinstance(k, str):
            raise NotStorable(f"{analyzer}: key {k!r} is not a str")
        emit(None, k, f"{analyzer}.{k}", v)
    return rows


def _typed(path: str, value: Any) -> dict[str, Any]:
    """The type and value columns of one figure value."""
    empty = {"int_value": None, "double_value": None, "text_value": None}
    if value is None:
        return {**empty, "type": "null"}
    if isinstance(value, bool):
        return {**empty, "type": "bool", "int_value": int(value)}
    if type(value) is int:
        if not INT64_MIN <= value <= INT64_MAX:
            raise NotStorable(f"{path}: {value} does not fit 64 bits")
        return {**empty, "type": "int", "int_value": value}
    if type(value) is float:
        return {**empty, "type": "float", "double_value": value}
    if type(value) is str:
        return {**empty, "type": "str", "text_value": value}
    if type(value) is dict:
        return {**empty, "type": "dict"}
    if type(value) is list:
        return {**empty, "type": "list"}
    raise NotStorable(f"{path}: a {type(value).__name__} ({value!r:.40})")


def _split(breakdown: Analysis | None) -> pa.Table:
    """The breakdown analyzer's step_breakdown (chip, step, category, dur_ps), or no rows."""
    columns = pa.schema([("chip", pa.int32()), ("step", pa.int32()), ("category", pa.string()), ("dur_ps", pa.int64())])
    if breakdown is None or "step_breakdown" not in breakdown.tables:
        return columns.empty_table()
    return breakdown.tables["step_breakdown"].select(columns.names).cast(columns)


def _write(store: Store, run_id: int, rows: dict[str, pa.Table] | None, build_s: float, error: str | None) -> None:
    """Replace the run's analysis rows (rows None: only a stamp saying why) in one transaction."""
    con = store.con
    con.begin()
    try:
        for what in ("stamp", "figures", "findings", "notes", "step_split"):
            sqltree.execute(con, f"analysis.stored.delete_{what}", run=run_id)
        for what, table in (rows or {}).items():
            statement = "insert_step_split" if what == "split" else f"insert_{what}"
            sqltree.execute(con, f"analysis.stored.{statement}", {what: table}, run=run_id)
        sqltree.execute(
            con,
            "analysis.stored.insert_stamp",
            run=run_id,
            analysis_sha1=analysis_sha1(),
            build_s=build_s,
            error=error,
        )
        con.commit()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a COMMIT that failed has ended the transaction
            con.rollback()
        raise


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b

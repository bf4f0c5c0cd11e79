"""Answers to the questions the CLI's `--json` and the MCP server (scprof/mcp_server.py) share, as
JSON documents: each is what the CLI prints for the same question, read back (`json.loads`).

A document is built by the same package functions as the CLI's command (the runs listing view,
the kept report, compare_runs, the SQL guard) and serialised as the CLI serialises it
(`json.dumps(..., default=str)`), so a tool's structured result cannot drift from the CLI's
output. The exception: JSON has no NaN or infinity, so they become null here (the CLI prints
Python's `NaN`, which strict JSON readers refuse).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from profiler.errors import ScprofError
from profiler.stdlib import RUN_LIST_SQL
from profiler.store import Store

TOP_FINDINGS = 5  # findings run_summary carries (analyze carries all)


def jsonable(value: Any) -> Any:
    """`value` as the CLI's `json.dumps(value, default=str)` writes it, read back; NaN and
    infinities as None."""
    return _finite(json.loads(json.dumps(value, default=str)))


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def runs_doc(store: Store) -> list[dict[str, Any]]:
    """`scprof runs --json`: the store's runs listing (the run_list view), one row per run."""
    return jsonable(store.query(RUN_LIST_SQL).to_pylist())


def analysis_doc(store: Store, run: str | int) -> dict[str, Any]:
    """`scprof analyze RUN --json`: the run's report (kept in the store, else computed)."""
    from analyzers.kept_reports import report_for

    return jsonable(report_for(store, store.resolve_run(run)).to_dict())


def verified_analysis_doc(store: Store, run: str | int, progress: Any = None) -> dict[str, Any]:
    """`scprof analyze RUN --verify --json`: each finding's fix simulated alone (a writer's store:
    the trials are stored as runs). A real capture's report comes back with `not_verified`."""
    from analyzers.registry import analyze_run
    from whatif.configs import NotEmulated
    from whatif.engine import Session
    from whatif.executor import Executor
    from whatif.verify import verify_report

    simulations, not_verified = 0, None
    with Executor() as ex:
        run_id = store.resolve_run(run)
        report = analyze_run(store, run_id)
        try:
            session = Session(store, run_id, "verify", ex, progress=progress)
        except NotEmulated as e:
            not_verified = f"fixes not verified: {e}"
        else:
            report = verify_report(session, report)
            simulations = session.simulations
    return jsonable({**report.to_dict(), "simulations": simulations, "not_verified": not_verified})


def comparison_doc(store: Store, base: str | int, cand: str | int) -> dict[str, Any]:
    """`scprof compare BASE CAND --json`: the verdict with its interval, per-op and per-category deltas."""
    from analyzers.compare import compare_runs

    return jsonable(compare_runs(store, store.resolve_run(base), store.resolve_run(cand)).to_dict())


def summary_doc(analysis: dict[str, Any], top: int = TOP_FINDINGS) -> dict[str, Any]:
    """A run's summary, cut from its analysis document (analysis_doc): the step time over the
    counted steps, the time split, the top findings (rule, severity, title, headline figure) and
    what the analyzers could not look at. Every figure in it is the analysis document's."""
    bd = analysis["figures"].get("breakdown") or {}
    step_keys = ("steps", "steps_recorded", "covers", "step_ps_mean", "step_ps_p50", "step_ps_p90")
    brief = ("rule", "severity", "title", "metric", "value", "unit", "confidence")
    return {
        "run": analysis["run"],
        "step_time": {k: bd[k] for k in step_keys if k in bd} or None,
        "share": bd.get("share"),
        "findings": len(analysis["findings"]),
        "top_findings": [{k: f[k] for k in brief} for f in analysis["findings"][:top]],
        "fixable": sum(1 for f in analysis["findings"] if f.get("fix")),
        "notes": analysis["notes"],
    }


def top_ops_doc(
    store: Store, run: str | int, steps: tuple[int, int] | None = None, chip: int | None = None, limit: int = 20
) -> dict[str, Any]:
    """The run's op profile (analyzers/op_profile.py: self time, count, share of the kind's self time),
    over every event, or over the events of steps A..B-1 (`steps`, half-open) and/or one chip.

    Self times are each event's own in the whole run (its duration less its children's), then
    summed over the chosen events; the whole run's rows are those of `analyze`'s `ops` figures."""
    from analyzers.context import RunContext
    from analyzers.op_arrays import op_arrays
    from analyzers.op_profile import profile, self_times

    run_id = store.resolve_run(run)
    ctx = RunContext(store, run_id)
    if steps is None and chip is None:
        table = profile(ctx)
    else:
        a = op_arrays(ctx)
        track = np.repeat(np.arange(len(a.track_id)), np.diff(a.bounds))
        keep = np.ones(len(a.start), bool)
        if steps is not None:
            keep &= (a.step >= steps[0]) & (a.step < steps[1])
        if chip is not None:
            keep &= a.track_chip[track] == chip
        rows = pa.table({
            "track_id": a.track_id[track][keep], "name_id": a.name_scan[a.source][keep],
            "category_id": a.category_scan[a.source][keep], "dur_ps": (a.end - a.start)[keep],
            "self_ps": self_times(a)[keep],
        })  # fmt: skip
        table = ctx.query("op_profile", {"rows": rows})
    rows_out = table.to_pylist()
    return jsonable({
        "run": {"run_id": run_id, "name": ctx.run["name"]},
        "steps": list(steps) if steps else None, "chip": chip,
        "ops": len(rows_out), "rows": rows_out[:limit], "truncated": len(rows_out) > limit,
    })  # fmt: skip


def find_events_doc(
    store: Store, run: str | int, name: str, window: tuple[int, int] | None = None, limit: int = 50
) -> dict[str, Any]:
    """Events whose name contains `name` (case-insensitive; text, never a pattern), in the window
    [t0, t1) or the whole run, in time order: the Timeline's find (ui/trace_queries.py's rule and
    SQL), with each event's track (plane, line, kind, chip), step and time."""
    from ui import trace_queries as TQ
    from ui.store_access import sql
    from ui.trace_api import run_facts

    if not name.strip():
        raise ScprofError("name: give some text of the events' names")
    facts = run_facts(store, store.resolve_run(run))
    t0, t1 = window or (facts.first_ps, facts.last_ps + 1)
    p = dict(run=facts.run_id, q=name, t0=t0, t1=t1, maxdur=facts.max_event_dur_ps, all_tracks=True, tracks=[])
    total = int(sql(store, TQ.FIND_COUNT, **p).column("n")[0].as_py())
    ids = sql(store, TQ.FIND_EVENTS, limit=limit, **p).column("id").to_pylist()
    rows = store.rows(
        """SELECT event_id, track_id, plane, line, track_kind, chip, name, step, start_ps, dur_ps
           FROM slices WHERE run_id = ? AND list_contains(?, event_id) ORDER BY start_ps, event_id""",
        [facts.run_id, ids],
    )
    return jsonable({
        "run": {"run_id": facts.run_id, "name": facts.name}, "name": name, "window_ps": [t0, t1],
        "count": total, "rows": rows, "truncated": total > len(rows),
    })  # fmt: skip


def sql_doc(store: Store, query: str, max_rows: int, timeout_s: float, max_bytes: int) -> dict[str, Any]:
    """`scprof sql QUERY --format json`'s rows, with the cap that cut them: the same guard (one
    read-only statement), worker process, time limit and memory cap."""
    from profiler.sql_guard import check_limits, check_read_only, run_query

    check_limits(max_rows, timeout_s, max_bytes)
    check_read_only(query)
    result = run_query(store, query, max_rows=max_rows, timeout_s=timeout_s, max_bytes=max_bytes)
    return {
        "columns": result.table.column_names,
        "rows": jsonable(result.table.to_pylist()),
        "truncated": result.truncated,
        "capped_by": result.capped_by,
    }


def steps_range(text: str | None) -> tuple[int, int] | None:
    """A steps argument `A:B` (half-open, as `--steps` takes it), or None."""
    if text in (None, ""):
        return None
    try:
        a, b = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise ScprofError(f"steps: expected A:B with whole numbers (steps A..B-1), got {text!r}") from None
    if a < 0 or b <= a:
        raise ScprofError(f"steps: need 0 <= A < B, got {text!r}")
    return a, b

"""Answers to the questions the CLI's `--json` and the MCP server (scprof/mcp_server.py) share, as
JSON documents: each is what the CLI prints for the same question, read back (`json.loads`).

A document is built by the same package functions as the CLI's command (the runs listing view,
the stored analysis, compare_runs, the SQL guard) and serialised as the CLI serialises it
(`json.dumps(..., default=str)`), so a tool's structured result cannot drift from the CLI's
output. The exception: JSON has no NaN or infinity, so they become null here (the CLI prints
Python's `NaN`, which strict JSON readers refuse).
"""

from __future__ import annotations

import collections
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from profiler import sqltree
from profiler.errors import ScprofError
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


def runs_doc(store: Store, trials: bool = False) -> list[dict[str, Any]]:
    """`scprof runs --json`: the store's runs listing (the run_list view), one row per run; what-if
    trials only with `trials`."""
    return jsonable(sqltree.query(store.con, "stdlib.runs.runs_listed", trials=trials).to_pylist())


def analysis_doc(store: Store, run: str | int) -> dict[str, Any]:
    """`scprof analyze RUN --json`: the run's report (kept in the store, else computed)."""
    from analyzers import runstats

    return jsonable(runstats.report(store, store.resolve_run(run)).to_dict())


def recorded_doc(store: Store, run_id: int, events: int) -> dict[str, Any]:
    """What `record` (CLI and MCP) says of the run it stored: the stored analysis's figures, the
    same values `analyze`, `runs` and the UI show (never the emulator's own tallies)."""
    from analyzers import runstats

    report = runstats.report(store, run_id)
    fig = {name: a.figures for name, a in report.analyses.items()}
    breakdown, mb = fig.get("breakdown", {}), fig.get("minibatching", {})
    return {
        "events": events,
        "steps": breakdown.get("steps_recorded"),
        "steps_counted": breakdown.get("steps"),
        "covers": breakdown.get("covers"),
        "step_ps_mean": breakdown.get("step_ps_mean"),
        "step_ps_p50": breakdown.get("step_ps_p50"),
        "step_ps_p90": breakdown.get("step_ps_p90"),
        "share": breakdown.get("share"),  # the wall-time split of the counted steps, all chips
        "minibatches_per_step_mean": mb.get("minibatches_per_step_mean"),
        "dropped_ids": fig.get("id_dropping", {}).get("dropped_ids"),
        "findings": len(report.findings),
    }


def comparison_doc(store: Store, base: str | int, cand: str | int) -> dict[str, Any]:
    """`scprof compare BASE CAND --json`: the verdict with its interval, per-op and per-category deltas."""
    from analyzers.compare import compare_runs

    return jsonable(compare_runs(store, store.resolve_run(base), store.resolve_run(cand)).to_dict())


def verified_report(
    store: Store, run_id: int, executor: Any, progress: Any = None, root: str | None = None, trust_paths: bool = False
) -> tuple[Any, int, str | None]:
    """`analyze RUN --verify`'s work, for the CLI and the MCP server alike: the run's report (analysed
    afresh and kept) with each finding's fix simulated alone (a writer's store: trials are stored as
    runs, their folders under `root`, default runs/whatif/); the number of simulations; and, for a
    run that is not emulated, why its fixes are not verified. The session comes first, so a stored
    path it refuses is refused before the analysis writes its report."""
    from analyzers.registry import analyze_run
    from whatif.configs import NotEmulated
    from whatif.engine import Session
    from whatif.verify import verify_report

    session, not_verified = None, None
    try:
        session = Session(store, run_id, "verify", executor, root=root, progress=progress, trust_paths=trust_paths)
    except NotEmulated as e:  # a real capture: the analysis stands, its fixes cannot be simulated
        not_verified = f"fixes not verified: {e}"
    report = analyze_run(store, run_id)
    if session is None:
        return report, 0, not_verified
    return verify_report(session, report), session.simulations, None


def verified_doc(report: Any, simulations: int, not_verified: str | None) -> dict[str, Any]:
    """`scprof analyze RUN --verify --json`: the verified report, its simulations and why not verified."""
    return jsonable({**report.to_dict(), "simulations": simulations, "not_verified": not_verified})


def verified_analysis_doc(
    store: Store, run: str | int, progress: Any = None, root: str | None = None, workers: int = 1
) -> dict[str, Any]:
    """verified_report's document, on an executor of its own (`workers` Dask workers; 1: in process)."""
    from whatif.executor import Executor

    with Executor(workers) as ex:
        return verified_doc(*verified_report(store, store.resolve_run(run), ex, progress, root))


def attribution(
    store: Store,
    base_id: int,
    cand_id: int,
    executor: Any,
    progress: Any = None,
    root: str | None = None,
    trust_paths: bool = False,
) -> tuple[Any, dict[str, Any] | None, str | None]:
    """`compare BASE CAND --attribute`'s work, for the CLI and the MCP server alike: the comparison,
    and each changed key simulated alone on the base and left out of the candidate
    (whatif/attribute.py; a writer's store, the trials' folders under `root`); for real captures,
    why the gain is not attributed. The session comes first, so a stored path it refuses is refused
    before the comparison writes anything."""
    from analyzers.compare import compare_runs
    from whatif.attribute import attribute
    from whatif.configs import NotEmulated, origin_config
    from whatif.engine import Session

    session, not_attributed = None, None
    try:
        origin_config(sqltree.query(store.con, "cli.runs.run", run=cand_id).to_pylist()[0])  # both must be emulated
        session = Session(store, base_id, "attribute", executor, root=root, progress=progress, trust_paths=trust_paths)
    except NotEmulated as e:  # real captures: the comparison stands, its changes cannot be replayed
        not_attributed = f"gain not attributed: {e}"
    comparison = compare_runs(store, base_id, cand_id)
    result = attribute(session, cand_id) if session is not None else None
    return comparison, result, not_attributed


def attributed_doc(comparison: Any, result: dict[str, Any] | None, not_attributed: str | None) -> dict[str, Any]:
    """`scprof compare BASE CAND --attribute --json`: the comparison, its attribution and why not attributed."""
    return jsonable({**comparison.to_dict(), "attribution": result, "not_attributed": not_attributed})


def attribution_doc(
    store: Store, base: str | int, cand: str | int, progress: Any = None, root: str | None = None, workers: int = 1
) -> dict[str, Any]:
    """attribution's document, on an executor of its own (`workers` Dask workers; 1: in process)."""
    from whatif.executor import Executor

    with Executor(workers) as ex:
        ids = store.resolve_run(base), store.resolve_run(cand)
        return attributed_doc(*attribution(store, *ids, ex, progress, root))


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
    store: Store,
    run: str | int,
    steps: tuple[int, int] | None = None,
    chip: int | None = None,
    limit: int = 20,
    analysis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's op profile (analyzers/rules/op_profile.py: self time, count, share of the kind's self time),
    over every event, or over the events of steps A..B-1 (`steps`, half-open) and/or one chip.

    Self times are each event's own in the whole run (its duration less its children's), then
    summed over the chosen events. The whole run's rows are `analyze`'s `ops` figures (read from
    `analysis`, the run's analysis_doc, when given) while they hold `limit` rows."""
    from analyzers.context import RunContext
    from analyzers.op_arrays import op_arrays
    from analyzers.rules.op_profile import profile, self_times

    run_id = store.resolve_run(run)
    if steps is None and chip is None:
        doc = analysis if analysis is not None else analysis_doc(store, run_id)
        ops = doc["figures"].get("ops") or {}
        if ops.get("top") is not None and min(limit, ops["ops"]) <= len(ops["top"]):
            return jsonable(
                {
                    "run": {"run_id": run_id, "name": doc["run"]["name"]},
                    "steps": None,
                    "chip": None,
                    "ops": ops["ops"],
                    "rows": ops["top"][:limit],
                    "truncated": ops["ops"] > limit,
                }
            )
    ctx = RunContext(store, run_id)
    if steps is None and chip is None:
        table = profile(ctx)
    else:
        a = op_arrays(ctx, _steps_span(store, run_id, steps) if steps is not None else None)
        track = np.repeat(np.arange(len(a.track_id)), np.diff(a.bounds))
        keep = np.ones(len(a.start), bool)
        if steps is not None:
            keep &= (a.step >= steps[0]) & (a.step < steps[1])
        if chip is not None:
            keep &= a.track_chip[track] == chip
        rows = pa.table(
            {
                "track_id": a.track_id[track][keep],
                "name_id": a.name_scan[a.source][keep],
                "category_id": a.category_scan[a.source][keep],
                "dur_ps": (a.end - a.start)[keep],
                "self_ps": self_times(a)[keep],
            }
        )
        table = ctx.sql(  # the FLOPs and bytes of the chosen steps' events, as their times
            "analysis.ops.op_profile",
            {"rows": rows},
            step_lo=steps[0] if steps is not None else None,
            step_hi=steps[1] if steps is not None else None,
        )
    rows_out = table.to_pylist()
    return jsonable(
        {
            "run": {"run_id": run_id, "name": ctx.run["name"]},
            "steps": list(steps) if steps else None,
            "chip": chip,
            "ops": len(rows_out),
            "rows": rows_out[:limit],
            "truncated": len(rows_out) > limit,
        }
    )


def _steps_span(store: Store, run_id: int, steps: tuple[int, int]) -> tuple[int, int]:
    """A time span [lo, hi) holding every event of steps A..B-1 (and each one's direct children, which
    lie inside it): the op arrays of the events overlapping it give those events the self times of
    the whole run's (a child's parents overlap it too). Zero-length events at its ends included."""
    row = sqltree.query(store.con, "cli.events.steps_span", run=run_id, step_a=steps[0], step_b=steps[1]).to_pylist()[0]
    if row["lo"] is None:
        return (0, 1)
    return int(row["lo"]) - 1, int(row["hi"]) + 1


def find_events_doc(
    store: Store, run: str | int, name: str, window: tuple[int, int] | None = None, limit: int = 50
) -> dict[str, Any]:
    """Events whose name contains `name` (case-insensitive; text, never a pattern), in the window
    [t0, t1) or the whole run, in time order: the Timeline's find (its rule and SQL: ui.timeline's
    find_count and find_events), with each event's track (plane, line, kind, chip), step and time."""
    from ui.trace_api import run_facts

    if not name.strip():
        raise ScprofError("name: give some text of the events' names")
    facts = run_facts(store, store.resolve_run(run))
    t0, t1 = window or (facts.first_ps, facts.last_ps + 1)
    p = dict(run=facts.run_id, q=name, t0=t0, t1=t1, maxdur=facts.max_event_dur_ps, all_tracks=True, tracks=[])
    total = int(sqltree.query(store.con, "ui.timeline.find_count", **p).column("n")[0].as_py())
    ids = sqltree.query(store.con, "ui.timeline.find_events", limit=limit, **p).column("id").to_pylist()
    rows = sqltree.query(store.con, "cli.events.events_by_id", run=facts.run_id, ids=ids).to_pylist()
    return jsonable(
        {
            "run": {"run_id": facts.run_id, "name": facts.name},
            "name": name,
            "window_ps": [t0, t1],
            "count": total,
            "rows": rows,
            "truncated": total > len(rows),
        }
    )


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


def steps_range(text: str | None, arg: str = "steps") -> tuple[int, int] | None:
    """A steps argument `A:B` (half-open, as `--steps` takes it), or None; errors name `arg`."""
    if text in (None, ""):
        return None
    try:
        a, b = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise ScprofError(f"{arg}: expected A:B with whole numbers (steps A..B-1), got {text!r}") from None
    if a < 0 or b <= a:
        raise ScprofError(f"{arg}: need 0 <= A < B, got {text!r}")
    return a, b


def events_doc(
    store: Store,
    run: str | int,
    window: tuple[int, int] | None = None,
    steps: tuple[int, int] | None = None,
    tracks: dict[str, Any] | None = None,
    limit: int = 200,
) -> dict[str, Any]:
    """The trace viewer's data as a list: the events and step markers (event_id -1, named "step N")
    of the Timeline's tracks (ui/trace_api.py run_tracks: every track but counters) that match
    `tracks` (plane / line: text they contain, case-insensitive; kind, chip: equal), overlapping the
    window [t0, t1), the steps A..B-1 (the Timeline's span of those steps, ui/data.py steps_window)
    or the whole run; in time order, at most `limit`, with how many there are per track. The
    filters and overlap rule are the viewer tiles' (ui.timeline's window_slices and tile_counts)."""
    from ui.data import steps_window
    from ui.trace_api import names_of, run_facts, run_tracks
    from ui.trace_derived import window_rows

    if window is not None and steps is not None:
        raise ScprofError("steps, t0_ps/t1_ps: give a step range or a time window, not both")
    facts = run_facts(store, store.resolve_run(run))
    if steps is not None:
        span = steps_window(store, facts.run_id, (steps[0], steps[1] - 1))
        if span is None:
            raise ScprofError(f"steps: run {facts.name!r} has no steps {steps[0]}..{steps[1] - 1}")
        window = span
    t0, t1 = window or (facts.first_ps, facts.last_ps + 1)
    chosen = [t for t in run_tracks(store, facts.run_id) if _track_matches(t, tracks or {})]
    ids = [t.track_id for t in chosen]
    p = dict(
        run=facts.run_id, t0=t0, t1=t1, maxdur=facts.max_event_dur_ps, maxmarker=facts.max_marker_dur_ps, tracks=ids
    )
    derived = facts.derived  # the viewer's own step rows, not in the store's tracks
    own = [t for t in ids if t in derived.track_ids]
    p["tracks"] = [t for t in ids if t not in derived.track_ids]
    tiles = sqltree.query(store.con, "ui.timeline.tile_counts", **p) if p["tracks"] else None
    counts = dict(zip(*tiles.to_pydict().values(), strict=True)) if tiles is not None else {}
    stored = (
        sqltree.query(store.con, "ui.timeline.window_slices", name_base=facts.name_base, limit=limit, **p)
        if p["tracks"]
        else None
    )
    table = None
    if own:
        spans = window_rows(derived, own, t0, t1, facts.name_base)
        counts.update(collections.Counter(spans.column("track_id").to_pylist()))
        both = spans if stored is None else pa.concat_tables([stored, spans.cast(stored.schema)])
        order = both.sort_by([("start", "ascending"), ("track_id", "ascending"), ("id", "ascending")])
        table = order.slice(0, limit)
    elif stored is not None:
        table = stored
    by_id = {t.track_id: t for t in chosen}
    rows: list[dict[str, Any]] = []
    if table is not None and table.num_rows:
        names = names_of(store, facts, table.column("name").to_numpy())
        for r in table.to_pylist():
            t = by_id[r["track_id"]]
            rows.append(
                {
                    "event_id": r["id"],
                    "track_id": t.track_id,
                    "plane": t.plane,
                    "line": t.line,
                    "track_kind": t.kind,
                    "chip": t.chip,
                    "name": names[str(r["name"])],
                    "step": r["step"],
                    "start_ps": r["start"],
                    "dur_ps": r["dur"],
                }
            )
    total = int(sum(counts.values()))
    track_rows = [
        {
            "track_id": t.track_id,
            "plane": t.plane,
            "line": t.line,
            "track_kind": t.kind,
            "chip": t.chip,
            "count": int(counts.get(t.track_id, 0)),
        }
        for t in chosen
        if counts.get(t.track_id)
    ]
    return jsonable(
        {
            "run": {"run_id": facts.run_id, "name": facts.name},
            "window_ps": [t0, t1],
            "steps": list(steps) if steps else None,
            "tracks": track_rows,
            "count": total,
            "rows": rows,
            "truncated": total > len(rows),
        }
    )


TRACK_FILTERS = ("plane", "line", "kind", "chip")


def _track_matches(track: Any, f: dict[str, Any]) -> bool:
    """A viewer track against a filter: plane / line contain the text (case-insensitive), kind and chip equal."""
    for key in ("plane", "line"):
        if f.get(key) and str(f[key]).lower() not in getattr(track, key).lower():
            return False
    if f.get("kind") and f["kind"] != track.kind:
        return False
    return f.get("chip") is None or f["chip"] == track.chip


def step_breakdown_doc(
    store: Store, run: str | int, steps: tuple[int, int] | None = None, chip: int | None = None, limit: int = 500
) -> dict[str, Any]:
    """The Overview page's time split (ui/data.py breakdown_per_step over the run's report): per step,
    each category's time (ps; the mean over chips, or one chip's), and per chip each category's mean
    time per counted step; over steps A..B-1 (half-open) or all. Rows: the first `limit` steps."""
    from ui.data import breakdown_per_step, clamp_steps, step_bounds

    run_id = store.resolve_run(run)
    name = sqltree.query(store.con, "cli.runs.run_name", run=run_id).to_pylist()[0]["name"]
    bounds = step_bounds(store, run_id)
    if bounds is None:
        raise ScprofError(f"run {name!r} has no steps: it has no step breakdown (top_ops and events still work)")
    span = clamp_steps(bounds, None) if steps is None else (steps[0], steps[1] - 1)
    from ui.data import analysis  # the Overview's report: stored with the run, cached by its content

    bd = breakdown_per_step(analysis(store, run_id), span, chip)
    if not bd or not bd["steps"]:
        what = f"steps {steps[0]}..{steps[1] - 1}" if steps else "steps"
        raise ScprofError(f"run {name!r}: no breakdown for {what}" + (f" on chip {chip}" if chip is not None else ""))
    cats = list(bd["per_step"])
    per_step = [
        {"step": s, "total_ps": sum(bd["per_step"][c][i] for c in cats), **{c: bd["per_step"][c][i] for c in cats}}
        for i, s in enumerate(bd["steps"][:limit])
    ]
    per_chip = [{"chip": ch, **{c: bd["per_chip"][c][i] for c in cats}} for i, ch in enumerate(bd["chips"])]
    return jsonable(
        {
            "run": {"run_id": run_id, "name": name},
            "steps": list(steps) if steps else None,
            "chip": chip,
            "categories": cats,
            "counted_steps": len(bd["counted_steps"]),
            "per_chip": per_chip,
            "steps_in_range": len(bd["steps"]),
            "rows": per_step,
            "truncated": len(bd["steps"]) > limit,
        }
    )

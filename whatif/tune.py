"""`scprof tune`: greedy search for a faster config, each step proven by simulation.

For the current best config it runs the stages of STAGES in order until one yields a
significant improvement: the current run's findings' fixes and each value their `explore`
names (one knob at a time, over the current changes); the faster-but-not-significant trials
combined; the other values of every knob findings named so far; those small wins combined
again (faster-but-not-significant: the verdict inconclusive or no change, the change below 0).
It takes the fastest trial the judge accepts (whatif/verify.py: verdict improved,
compiles, fits, drops no IDs unless the starting config allows dropping), analyses that run
and starts again; it stops when no stage improves or the simulation budget is spent. Fixes
that change numerics are never applied.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from analyzers import runstats
from analyzers.compare import step_time_change
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from whatif.configs import apply_overrides, standalone_config, toml_text
from whatif.engine import Change, Measured, Session, counted_step_ps, dropped_ids
from whatif.verify import change_of, judge

TUNED_FILE = "tuned.toml"
DEFAULT_BUDGET = 40


@dataclass
class TuneResult:
    baseline: dict[str, Any]
    best: dict[str, Any]
    trials: list[dict[str, Any]] = field(default_factory=list)
    simulations: int = 0
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "best": self.best,
            "trials": self.trials,
            "simulations": self.simulations,
            "stopped": self.stopped,
        }


def candidates(session: Session, current: Change, run_id: int, knobs: dict[str, list[Any]]) -> list[Change]:
    """Changes the findings of the current run propose: each fix over the current change, and
    each exploration value of a fix alone. Records the knobs the findings name in `knobs`."""
    report = runstats.report(session.store, run_id)
    out = []
    for f in report.findings:
        if not f.fix or f.fix.get("changes_numerics"):
            continue
        out.append(current.merged(change_of(f.fix)))
        for key, values in (f.fix.get("explore") or {}).items():
            seen = knobs.setdefault(key, [])
            for v in values:
                if v not in seen:
                    seen.append(v)
                out.append(current.merged(Change({key: v})))
        for key, v in (f.fix.get("set") or {}).items():
            if v not in knobs.setdefault(key, []):
                knobs[key].append(v)
        if f.fix.get("derive_limits"):
            knobs.setdefault("derive_limits", [True])
    return out


def combined(current: Change, wins: list[Measured]) -> list[Change]:
    """Trials that were faster but not significantly so, taken together: each pair of the four
    best whose changes touch different knobs, then all of them at once (effects too small to
    prove alone can add up, and some changes only help together)."""
    best = sorted(wins, key=lambda m: m.rel_change)[:4]

    def own(m: Measured) -> Change:  # what the trial changed over the current config
        return Change(
            {k: v for k, v in m.change.overrides.items() if current.overrides.get(k) != v},
            m.change.derive_limits and not current.derive_limits,
        )

    def knobs_of(c: Change) -> set[str]:
        return set(c.overrides) | ({"derive_limits"} if c.derive_limits else set())

    out = []
    for i, a in enumerate(best):
        for b in best[i + 1 :]:
            if not knobs_of(own(a)) & knobs_of(own(b)):
                out.append(a.change.merged(b.change))
    if len(best) > 2:
        merged, used = current, set()
        for m in best:
            if not knobs_of(own(m)) & used:
                merged, used = merged.merged(own(m)), used | knobs_of(own(m))
        out.append(merged)
    return out


def neighbours(current: Change, knobs: dict[str, list[Any]]) -> list[Change]:
    """The current change with one named knob set to another of its named values."""
    out = []
    for key, values in knobs.items():
        if key == "derive_limits":
            if not current.derive_limits:
                out.append(current.merged(Change({}, True)))
            continue
        out += [current.merged(Change({key: v})) for v in values if current.overrides.get(key) != v]
    return out


def _stage_findings(session: Session, current: Change, run_id: int, knobs: dict, wins: list) -> list[Change]:
    return candidates(session, current, run_id, knobs)


def _stage_combined(session: Session, current: Change, run_id: int, knobs: dict, wins: list) -> list[Change]:
    return combined(current, wins)


def _stage_neighbours(session: Session, current: Change, run_id: int, knobs: dict, wins: list) -> list[Change]:
    return neighbours(current, knobs)


# Per current config, in order: the findings' fixes and their exploration values; the small wins
# together; the other values of every knob findings named so far; the small wins together again.
STAGES = (_stage_findings, _stage_combined, _stage_neighbours, _stage_combined)


def tune(session: Session, start: Change, budget: int = DEFAULT_BUDGET, out_dir: str | None = None) -> TuneResult:
    """Search from the session's origin run with `start` applied (the user's --set)."""
    origin = session.origin_run_id
    current, current_run = start, origin
    if start.overrides or start.derive_limits:  # the user's --set: the baseline is that trial
        first = session.measure([start], origin)[0]
        if first.run_id is not None:  # a row for a start that ran (a config refused is no trial)
            session.record(first, "start", origin, first.verdict != "failed", "the starting point (--set)")
        if first.verdict == "failed" or first.run_id is None:
            raise TuneError(f"--set: the starting config does not run: {first.failure}")
        current_run = first.run_id
    base_run, base_ps = current_run, counted_step_ps(session.store, current_run)
    if not len(base_ps):  # a failed run, or one without steps: nothing to improve on
        run = sqltree.query(session.store.con, "cli.runs.run_status", run=base_run).to_pylist()[0]
        failure = json.loads(run["tags"] or "{}").get("error") if run["status"] == "failed" else None
        raise TuneError(
            f"run {run['name']!r} has no counted steps to measure"
            + (f" (the run failed: {failure})" if failure else "")
            + "; tune starts from a run that ran: fix what failed first (scprof analyze shows it)"
        )
    allow = bool(apply_overrides(session.origin_raw, start.overrides).get("sparsecore", {}).get("allow_id_dropping"))
    base_dropped = dropped_ids(session.store, current_run)
    tried: set[str] = {start.key()}
    knobs: dict[str, list[Any]] = {}
    trials: list[dict[str, Any]] = []
    stopped = "no candidate improves the step time significantly"
    stage, wins = 0, []  # per current config: the stages' order, the faster-but-not-significant trials
    while stage < len(STAGES):
        proposed = _fresh(STAGES[stage](session, current, current_run, knobs, wins), tried)
        fresh = _within_budget(proposed, budget - session.simulations)
        if not fresh:
            if proposed:
                stopped = f"the budget of {budget} simulations is spent"
                break
            stage += 1
            continue
        tried.update(c.key() for c in fresh)
        measured = session.decide(session.measure(fresh, current_run), current, current_run, budget)
        verdicts = [(m, *judge(m, base_dropped, allow)) for m in measured]
        # the largest gain against the current run (a decided trial's is against a longer run of it)
        best = min((v for v in verdicts if v[1]), key=lambda v: v[0].rel_change, default=None)
        for m, ok, reason in verdicts:
            taken = best is not None and m is best[0]
            why = reason if taken or not ok else f"{reason}; another candidate was faster"
            session.record(m, "tune", current_run, taken, why)
            trials.append({**_trial(m), "accepted": taken, "reason": why, "ref_run": _name(session, current_run)})
            if (  # faster but not significantly so (not refused for dropped IDs or numerics)
                not ok
                and m.verdict in ("inconclusive", "no change")
                and reason.startswith(m.verdict)
                and m.rel_change < 0
            ):
                wins.append(m)
        if best is None:
            stage += 1
            continue
        current, current_run, stage, wins = best[0].change, best[0].run_id, 0, []
    best_ps = counted_step_ps(session.store, current_run)
    c = step_time_change(session.store, base_run, current_run)
    config_path = write_tuned(session, current_run, out_dir, current.describe()) if out_dir else None
    return TuneResult(
        baseline={"run": _name(session, base_run), "step_time_ps": float(base_ps.mean())},
        best={
            "run": _name(session, current_run),
            "step_time_ps": float(best_ps.mean()),
            "overrides": current.overrides,
            "derive_limits": current.derive_limits,
            "config": config_path,
            "change": c.change,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
        },
        trials=trials,
        simulations=session.simulations,
        stopped=stopped,
    )


class TuneError(ScprofError):
    """A tuning run that cannot start (the starting config fails)."""


def _fresh(changes: list[Change], tried: set[str]) -> list[Change]:
    out, seen = [], set(tried)
    for c in changes:
        if c.key() not in seen:
            seen.add(c.key())
            out.append(c)
    return out


def _within_budget(changes: list[Change], left: int) -> list[Change]:
    """As many changes (in order) as the budget's simulations allow (a derived-limits trial costs 2)."""
    out = []
    for c in changes:
        cost = 2 if c.derive_limits else 1
        if cost > left:
            break
        out.append(c)
        left -= cost
    return out


def _trial(m: Measured) -> dict[str, Any]:
    return {
        "run": m.run_name,
        "overrides": m.change.overrides,
        "derive_limits": m.change.derive_limits,
        "step_time_ps": m.step_time_ps,
        "change": m.rel_change,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "verdict": m.verdict,
    }


def _name(session: Session, run_id: int) -> str:
    return sqltree.query(session.store.con, "cli.runs.run_name", run=run_id).to_pylist()[0]["name"]


def write_tuned(session: Session, best_run: int, out_dir: str, changes: str) -> str:
    """The tuned config as one TOML file in `out_dir`, which `scprof record` accepts: the best
    run's config with derived limits written on its tables (whatif.configs.standalone_config)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, TUNED_FILE)
    with open(path + ".tmp", "w") as fh:
        fh.write(tuned_toml(session.store, best_run, session.origin["name"], changes))
    os.replace(path + ".tmp", path)
    return path


def tuned_toml(store: Store, best_run: int, origin_name: str, changes: str) -> str:
    """The TOML text of a tuned config (also what the UI offers to download)."""
    run = sqltree.query(store.con, "cli.runs.run", run=best_run).to_pylist()[0]
    raw = standalone_config(run)
    raw["name"] = f"{origin_name}-tuned"
    raw["description"] = f"tuned by scprof tune from run {origin_name!r}: {changes}"
    return toml_text(raw, f"Tuned by scprof tune from run {origin_name!r}.\nChanges: {changes}")

"""`scprof analyze RUN --verify`: simulate each finding's fix alone and say whether it helps.

A fix is recommended only when its simulation's verdict is "improved" (the 95% interval of
`scprof compare` below zero, analyzers.change_stats.label), compiles, fits in memory and drops no
more IDs than the run did (unless the run allows dropping). Fixes that change numerics are
simulated and shown but never recommended: that trade is the user's."""

from __future__ import annotations

import dataclasses
from typing import Any

from analyzers.compare import interval_text
from analyzers.registry import RunReport
from profiler.units import format_ps
from whatif.engine import Change, Measured, Session, dropped_ids


def change_of(fix: dict[str, Any]) -> Change:
    return Change(dict(fix.get("set") or {}), bool(fix.get("derive_limits")))


def judge(m: Measured, origin_dropped: int, allow_dropping: bool, changes_numerics: bool = False) -> tuple[bool, str]:
    """Whether a measured change may be taken, and why (one line)."""
    if m.verdict == "failed":
        return False, f"the simulation failed: {m.failure}"
    shown = f"{interval_text(m.rel_change, m.ci_low, m.ci_high)}, {format_ps(m.ref_step_time_ps)} -> {format_ps(m.step_time_ps)}"
    if m.decided_steps is not None:  # the first steps could not tell: decided on longer runs
        ref, trial = m.decided_runs or ("", "")
        shown += f" (decided on {m.decided_steps} steps: {trial} against {ref})"
    if m.dropped_ids > origin_dropped and not allow_dropping:
        return False, f"{shown}, but it drops {m.dropped_ids:,} IDs (the run does not allow dropping)"
    if changes_numerics:
        return False, f"{shown}; it changes what the model computes, so it is never applied automatically"
    if m.verdict == "improved":
        return True, f"faster: {shown}"
    if m.verdict == "regressed":
        return False, f"slower: {shown}"
    return False, f"{m.verdict}: {shown}"  # no change | inconclusive | not enough steps


def verify_report(session: Session, report: RunReport) -> RunReport:
    """The report with `verified` filled in on every finding that carries a fix."""
    fixed = [f for f in report.findings if f.fix]
    if not fixed:
        return report
    origin = session.origin_run_id
    measured = session.decide(session.measure([change_of(f.fix) for f in fixed], origin), Change(), origin)
    origin_dropped = dropped_ids(session.store, origin)
    allow = bool(session.origin_raw.get("sparsecore", {}).get("allow_id_dropping"))
    verified: dict[int, dict[str, Any]] = {}
    for f, m in zip(fixed, measured, strict=True):
        ok, reason = judge(m, origin_dropped, allow, bool(f.fix.get("changes_numerics")))
        session.record(m, f.rule, origin, ok, reason)
        verified[id(f)] = {
            "change": m.rel_change,
            "ci_low": m.ci_low,
            "ci_high": m.ci_high,
            "recommended": ok,
            "step_time_ps": m.step_time_ps,
            "run": m.run_name,
            "decided_steps": m.decided_steps,  # set when the run's own steps could not decide
            "reason": reason,
        }
    findings = [dataclasses.replace(f, verified=verified[id(f)]) if id(f) in verified else f for f in report.findings]
    return dataclasses.replace(report, findings=findings)

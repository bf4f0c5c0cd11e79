"""The what-if engine's stored trials (whatif_trials) for the pages: each finding's verified fix,
a run's latest tuning session, a pair's attribution, and the tuned config's text.

The UI only reads: rows come from profiler/sql/ui/whatif.sql; shares and the tuned TOML are the engine's
own definitions (whatif.attribute.shares_from_rows, whatif.tune.tuned_toml), imported when needed
so the UI runs in builds without the emulator until a store holds what-if rows."""

from __future__ import annotations

import json
import shlex
from typing import Any

from analyzers.change_stats import read_verdict
from analyzers.findings import Finding
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from profiler.units import ci_text, format_ps, signed_pct


class NoTunedConfig(ScprofError):
    """The run has no tuning session, or its tuning accepted no trial: nothing to download."""


def _change(overrides: dict[str, Any] | None, derive_limits: bool | None) -> Any:
    """The engine's Change (its key and its words are the one definition of a change)."""
    from whatif.engine import Change

    return Change(dict(overrides or {}), bool(derive_limits))


def _overrides(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


# ---- verified fixes (scprof analyze RUN --verify) ----------------------------------------------------


def verified_fixes(store: Store, run_id: int) -> dict[tuple[str, str], dict[str, Any]]:
    """(rule, the fix's Change.key()) -> the latest verify row for that fix of the run (one query)."""
    rows = sqltree.query(store.con, "ui.whatif.verified_fixes", run=run_id).to_pylist()
    for r in rows:
        r["verdict"] = read_verdict(r["verdict"])
    return {(r["label"], _change(_overrides(r["overrides"]), r["derive_limits"]).key()): r for r in rows}


def verification_of(f: Finding, verified: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """The stored verification of a finding's fix (same rule, same changes), or None."""
    if not f.fix or not verified:
        return None
    return verified.get((f.rule, _change(f.fix.get("set"), f.fix.get("derive_limits")).key()))


def verified_text(row: dict[str, Any]) -> str:
    """'Verified by simulation: -20.1% (95% CI -20.2% .. -20.1%), 980 µs -> 783 µs: recommended', or
    'Verified by simulation: not recommended: <reason>' (the reason says what was measured)."""
    if row["accepted"] and row["change"] is not None:
        ci = f" (95% CI {ci_text(row['ci_low'], row['ci_high'])})" if row["ci_low"] is not None else ""
        return (
            f"Verified by simulation: {signed_pct(row['change'])}{ci}, "
            f"{format_ps(row['ref_step_time_ps'])} -> {format_ps(row['step_time_ps'])}: recommended"
        )
    return f"Verified by simulation: not recommended: {row['reason'] or row['verdict']}"


def fix_text(fix: dict[str, Any]) -> str:
    """A finding's fix in words, as `scprof analyze` prints it (analyzers.findings.fix_text)."""
    from analyzers.findings import fix_text as words

    return f"Fix: {words(fix)}"


def verify_command(run_name: str) -> str:
    return f"scprof analyze {shlex.quote(str(run_name))} --verify"


# ---- tuning (scprof tune RUN) ----------------------------------------------------------------------


def tuning(store: Store, run_id: int, session: str = "") -> dict[str, Any] | None:
    """The run's latest tune session (or `session`): its trials in order, each with its change in
    words; the starting step time; the path (start, then each accepted trial); the best trial
    (the last accepted). None when the run has no tuning."""
    rows = sqltree.query(store.con, "ui.whatif.tune_trials", run=run_id, session=session or "").to_pylist()
    if not rows:
        return None
    for r in rows:
        r["overrides"] = _overrides(r["overrides"])
        r["change_text"] = _change(r["overrides"], r["derive_limits"]).describe()
        r["verdict"] = read_verdict(r["verdict"])  # rows stored with the older words read in today's
        r["failed"] = r["verdict"] == "failed"
    accepted = [r for r in rows if r["accepted"]]
    start_ps = rows[0]["ref_step_time_ps"]
    path = [(0, start_ps)] + [(r["seq"], r["step_time_ps"]) for r in accepted]
    return {
        "session": rows[0]["session"],
        "sessions": int(rows[0]["sessions"]),
        "trials": rows,
        "start_step_time_ps": start_ps,
        "path": path,
        "best": accepted[-1] if accepted else None,
    }


def tuned_config(store: Store, run_id: int, session: str = "") -> tuple[str, str]:
    """(file stem, TOML text) of the tuned config of the run's latest tune session (or `session`):
    the last accepted trial's run as one self-contained config (whatif.tune.tuned_toml)."""
    t = tuning(store, run_id, session)
    origin = sqltree.query(store.con, "ui.runs.run_name", run=run_id).to_pylist()
    if not origin:
        raise ScprofError(f"run {run_id} not found")
    name = origin[0]["name"]
    if t is None:
        raise NoTunedConfig(f"run {name!r} has no tuning session: scprof tune {shlex.quote(name)} makes one")
    best = t["best"]
    if best is None or best["trial_run_id"] is None:
        raise NoTunedConfig(f"run {name!r}: its tuning accepted no trial, so there is no tuned config")
    if not sqltree.query(store.con, "ui.runs.run_exists", run=best["trial_run_id"]).num_rows:
        raise ScprofError(f"run {name!r}: the tuned trial's run (run_id {best['trial_run_id']}) is no longer stored")
    try:
        from whatif.tune import tuned_toml
    except ImportError as e:
        raise ScprofError(f"the what-if engine is not available in this build: {e}") from e
    return f"{name}-tuned", tuned_toml(store, best["trial_run_id"], name, best["change_text"])


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stored run's config as dotted key -> value (whatif.configs.flatten); {} without the engine."""
    try:
        from whatif.configs import flatten
    except ImportError:
        return {}
    return flatten(config or {})


# ---- attribution (scprof compare BASE CAND --attribute) --------------------------------------------


def attribution(store: Store, base: int, cand: int) -> dict[str, Any] | None:
    """Each changed key's share of the gain from the latest attribute session of the pair
    (whatif.attribute.shares_from_rows), or None when the store has none."""
    try:
        from whatif.attribute import CANDIDATE_LABEL, shares_from_rows
    except ImportError:
        return None
    rows = sqltree.query(
        store.con, "ui.whatif.attribution", base=base, cand=cand, candidate_label=CANDIDATE_LABEL
    ).to_pylist()
    if not rows:
        return None
    return {**shares_from_rows(rows), "session": rows[0]["session"], "created_at": rows[0]["created_at"]}

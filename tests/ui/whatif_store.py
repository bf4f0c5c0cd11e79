"""A copy of the UI store with what-if rows (whatif_trials) of each purpose, for the UI's tests:
a tuning session of real trials (two accepted steps, one refused, one failed), an attribution of
tuned over baseline (`whatif.attribute.attribute`), and verify rows for the baseline's findings."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from typing import Any

from analyzers.findings import make_fix
from profiler.store import Store

PREFETCH = "flags.maximum_parallel_iterations"
THREADS = "host.num_threads"
# The fixes the tests give the baseline's findings (analyzers may not carry fixes yet): host_bound's
# is verified (two sessions: the later one counts), minibatching's is not.
FIXES = {
    "host_bound": make_fix(set={PREFETCH: 2}),
    "minibatching": make_fix(derive_limits=True),
}
VERIFY_ROW = {"step_time_ps": 783e6, "ref_step_time_ps": 980e6, "change": -0.201, "ci_low": -0.202, "ci_high": -0.2009}


def with_fixes(report: Any) -> Any:
    """The report with FIXES on its findings of those rules."""
    findings = [dataclasses.replace(f, fix=FIXES[f.rule]) if f.rule in FIXES else f for f in report.findings]
    return dataclasses.replace(report, findings=findings)


def build_whatif_store(ui_db: str, directory) -> str:
    from whatif.attribute import attribute
    from whatif.engine import Change, Measured, Session
    from whatif.executor import Executor

    db = str(directory / "whatif.duckdb")
    shutil.copyfile(ui_db, db)
    with Store.open(db) as store, Executor() as ex:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        base, tuned = ids["baseline"], ids["tuned"]
        s = Session(store, base, "tune", ex, root=str(directory / "trials"))
        a, b = s.measure([Change({PREFETCH: 2}), Change({THREADS: 8})], base)
        s.record(a, "tune", base, True, "faster")
        s.record(b, "tune", base, False, "slower")
        c, d = s.measure([Change({PREFETCH: 4}), Change({PREFETCH: 2, THREADS: 8})], a.run_id)
        s.record(c, "tune", a.run_id, True, "faster")
        s.record(d, "tune", a.run_id, False, "no significant change")
        failed = Measured(
            Change({PREFETCH: 4, "sparsecore.max_tables_per_stack": 1}),
            None,
            "x",
            None,
            c.step_time_ps,
            None,
            None,
            None,
            "failed",
            "out of HBM",
            0,
            True,
        )
        s.record(failed, "tune", c.run_id, False, "the simulation failed: out of HBM")
        attribute(Session(store, base, "attribute", ex, root=str(directory / "trials")), tuned)
        _verify_rows(store, base, a.run_id)
    return db


def _verify_rows(store: Store, base: int, trial: int) -> None:
    """Two verify sessions of host_bound's fix (the later one is what counts) and one row of a
    different fix under the same rule (not the finding's: never shown)."""
    t0 = datetime.datetime(2026, 1, 1, 12, 0, 0)
    rows = [
        ("old", {PREFETCH: 2}, False, -0.10, False, "slower: old", t0),
        ("new", {PREFETCH: 2}, False, VERIFY_ROW["change"], True, "faster", t0 + datetime.timedelta(hours=1)),
        ("new", {PREFETCH: 8}, False, -0.5, True, "faster: another fix", t0 + datetime.timedelta(hours=1)),
        ("new", {PREFETCH: 2}, True, -0.6, True, "faster: with limits", t0 + datetime.timedelta(hours=1)),
    ]
    for seq, (session, overrides, derive, change, ok, reason, at) in enumerate(rows, 1):
        store.con.execute(
            "INSERT INTO whatif_trials VALUES (?, ?, 'verify', ?, 'host_bound', ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "'improved', ?, ?, ?)",
            [
                base,
                session,
                seq,
                json.dumps(overrides),
                derive,
                trial,
                base,
                VERIFY_ROW["step_time_ps"],
                VERIFY_ROW["ref_step_time_ps"],
                change,
                VERIFY_ROW["ci_low"],
                VERIFY_ROW["ci_high"],
                ok,
                reason,
                at,
            ],
        )

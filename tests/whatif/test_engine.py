"""The what-if engine: trials measured with compare's interval, the same on Dask as in process,
fixes recommended only when their simulation shows them faster, gains split between changes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from analyzers.compare import bootstrap_change
from analyzers.findings import Finding, make_fix
from analyzers.registry import analyze_run
from profiler.store import Store
from whatif.attribute import attribute
from whatif.engine import Change, Session, counted_step_ps
from whatif.executor import Executor
from whatif.verify import verify_report

PREFETCH = Change({"flags.maximum_parallel_iterations": 2})
TRIALS = [PREFETCH, Change({"host.num_threads": 1}, derive_limits=True)]


def _trial_steps(store: Store, session: Session, changes: list[Change]) -> list[list[float]]:
    out = []
    for m in session.measure(changes, session.origin_run_id):
        out.append(counted_step_ps(store, m.run_id).tolist())
    return out


def test_dask_and_in_process_trials_give_identical_results(pair, tmp_path: Path) -> None:
    db, base, _ = pair
    results = {}
    for workers in (1, 2):
        copy = tmp_path / f"w{workers}.duckdb"
        copy.write_bytes(Path(db).read_bytes())
        with Store.open(str(copy)) as store, Executor(workers) as ex:
            assert ex.distributed == (workers > 1)
            session = Session(store, base, "verify", ex, root=str(tmp_path / f"trials{workers}"))
            results[workers] = (_trial_steps(store, session, TRIALS), session.simulations)
    assert results[1] == results[2]
    assert results[1][1] == 3  # the derived-limits trial is two simulations
    assert all(len(steps) == 6 for steps in results[1][0])


def test_an_existing_dask_cluster_by_address_gives_the_same_trials(pair, tmp_path: Path) -> None:
    from distributed import LocalCluster

    db, base, _ = pair
    results = {}
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        for how, ex in (("scheduler", Executor(scheduler=cluster.scheduler_address)), ("local", Executor())):
            copy = tmp_path / f"{how}.duckdb"
            copy.write_bytes(Path(db).read_bytes())
            with Store.open(str(copy)) as store, ex:
                session = Session(store, base, "verify", ex, root=str(tmp_path / how))
                results[how] = _trial_steps(store, session, TRIALS[:1])
    assert results["scheduler"] == results["local"]


def test_an_unreachable_scheduler_is_one_line() -> None:
    from profiler.errors import ScprofError

    with pytest.raises(ScprofError, match=r"^--scheduler bad address: cannot reach a Dask scheduler there"):
        Executor(scheduler="bad address").connect()


def test_a_trial_the_store_holds_is_not_simulated_again(pair, tmp_path: Path) -> None:
    db, base, _ = pair
    with Store.open(str(db)) as store, Executor() as ex:
        first = Session(store, base, "verify", ex, root=str(tmp_path / "a"))
        m1 = first.measure([PREFETCH], base)[0]
        again = Session(store, base, "verify", ex, root=str(tmp_path / "b"))
        m2 = again.measure([PREFETCH], base)[0]
    assert again.simulations == 0 and not m2.simulated
    assert (m1.run_id, m1.step_time_ps) == (m2.run_id, m2.step_time_ps)


def _finding(rule: str, fix: dict) -> Finding:
    return Finding(
        rule=rule, severity="warning", title=rule, metric="m", value=1.0, unit="", recommendation="r", fix=fix
    )


def test_verify_recommends_only_fixes_its_simulation_shows_faster(pair, tmp_path: Path) -> None:
    db, base, _ = pair
    with Store.open(str(db)) as store, Executor() as ex:
        report = analyze_run(store, base)
        fixes = {
            "faster": make_fix(set={"flags.maximum_parallel_iterations": 2}),
            "slower": make_fix(set={"host.num_threads": 1}),
            "fails": make_fix(set={"sparsecore.max_ids_per_partition": 1, "sparsecore.enable_minibatching": False}),
            "numerics": make_fix(set={"flags.maximum_parallel_iterations": 2}, changes_numerics=True),
        }
        report = dataclasses.replace(report, findings=[_finding(k, v) for k, v in fixes.items()])
        session = Session(store, base, "verify", ex, root=str(tmp_path))
        verified = {f.rule: f.verified for f in verify_report(session, report).findings}
        rows = store.rows(
            "SELECT label, accepted, verdict, change FROM whatif_trials WHERE session = ? ORDER BY seq",
            [session.session],
        )
        base_ps = counted_step_ps(store, base)
        faster_ps = counted_step_ps(store, store.resolve_run(verified["faster"]["run"]))
    assert verified["faster"]["recommended"] and verified["faster"]["change"] < -0.01
    # the interval is compare's, on the same steps, paired by step (same seed, batch, features)
    ref = bootstrap_change(base_ps, faster_ps, paired=True)
    assert (verified["faster"]["ci_low"], verified["faster"]["ci_high"]) == (ref.ci_low, ref.ci_high)
    assert verified["faster"]["change"] == pytest.approx(faster_ps.mean() / base_ps.mean() - 1)
    assert not verified["slower"]["recommended"] and verified["slower"]["change"] > 0.01
    assert verified["slower"]["reason"].startswith("slower")
    assert not verified["fails"]["recommended"] and "failed" in verified["fails"]["reason"]
    assert not verified["numerics"]["recommended"] and "never applied automatically" in verified["numerics"]["reason"]
    assert [(r["label"], r["accepted"]) for r in rows] == [
        ("faster", True),
        ("slower", False),
        ("fails", False),
        ("numerics", False),
    ]
    assert rows[2]["verdict"] == "failed"


def test_attribution_of_two_changes_splits_the_whole_gain(pair, tmp_path: Path) -> None:
    db, base, tuned = pair
    with Store.open(str(db)) as store, Executor() as ex:
        session = Session(store, base, "attribute", ex, root=str(tmp_path))
        a = attribute(session, tuned)
        trials = store.rows("SELECT label, trial_run_id FROM whatif_trials WHERE session = ?", [session.session])
        means = {
            r["name"]: counted_step_ps(store, r["run_id"]).mean() for r in store.rows("SELECT name, run_id FROM runs")
        }
    keys = {r["key"] for r in a["changes"]}
    assert keys == {"flags.maximum_parallel_iterations", "flags.xla_sparse_core_max_ids_file"}
    # two changes: the mean of alone and left-out effects is each one's Shapley value; they add up to the gain
    assert sum(r["contribution_ps"] for r in a["changes"]) == pytest.approx(a["gain_ps"], rel=1e-9)
    assert sum(r["share"] for r in a["changes"]) == pytest.approx(1.0)
    base_ps = means["baseline"]
    tuned_ps = np.mean(counted_step_ps(Store.open(str(db), read_only=True), tuned))
    assert a["gain_ps"] == pytest.approx(base_ps - tuned_ps)
    limits = next(r for r in a["changes"] if r["key"].endswith("max_ids_file"))
    assert limits["derived"] and all(k.startswith("resolved.") for k in limits["derived"])
    # each change alone and each left out: with two changes, one alone is the other left out (2 trials)
    # (and one row for the candidate itself, which the UI reads the pair from)
    simulated = [t for t in trials if t["label"] != "candidate"]
    assert len(simulated) == 4 and len({t["trial_run_id"] for t in simulated}) == 2

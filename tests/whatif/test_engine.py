"""The what-if engine: trials measured with compare's interval, the same on Dask as in process,
fixes recommended only when their simulation shows them faster, gains split between changes."""

from __future__ import annotations

import dataclasses
import json
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


def _trial_runs(store: Store) -> list[dict]:
    return store.rows(
        "SELECT name, json_extract_string(tags, '$.whatif_input_sha1') AS input_sha1 FROM runs "
        "WHERE json_extract_string(tags, '$.whatif_origin') IS NOT NULL"
    )


def test_one_stored_trial_per_distinct_simulation(pair, tmp_path: Path) -> None:
    """Requests that give the same simulation share one trial run: limits derived by the engine
    and the same limits shipped as a file, a key set to the value it has, the same request twice."""
    db, base, _ = pair
    copy = tmp_path / "store.duckdb"
    copy.write_bytes(Path(db).read_bytes())
    with Store.open(str(copy)) as store, Executor() as ex:
        first = Session(store, base, "verify", ex, root=str(tmp_path / "a"))
        derived = first.measure([Change({}, derive_limits=True)], base)[0]
        assert first.simulations == 2 and derived.simulated  # the derive run, then the trial
        limits = json.loads(store.rows("SELECT config FROM runs WHERE run_id = ?", [derived.run_id])[0]["config"])
        assert limits["flags"]["xla_sparse_core_max_ids_file"].endswith("limits.toml")
        limits_bytes = (tmp_path / "a" / derived.run_name.rpartition("~")[2] / "limits.toml").read_bytes()

        second = Session(store, base, "attribute", ex, root=str(tmp_path / "b"))
        second.add_files({"mine_limits.toml": b"# the same limits, another file\n" + limits_bytes})
        threads = json.loads(store.rows("SELECT config FROM runs WHERE run_id = ?", [base])[0]["config"])["host"][
            "num_threads"
        ]
        deeper = {"flags.maximum_parallel_iterations": 3}  # a change no other test of this module stores
        shipped, again, same_value, prefetch, prefetch_same = second.measure(
            [
                Change({"flags.xla_sparse_core_max_ids_file": "mine_limits.toml"}),
                Change({}, derive_limits=True),  # found by what its limits were derived from: not derived again
                Change({"host.num_threads": threads}),  # the origin's own value: the origin's simulation
                Change(deeper),
                Change({**deeper, "host.num_threads": threads}),
            ],
            base,
        )
        runs = _trial_runs(store)
    assert (shipped.run_id, again.run_id) == (derived.run_id, derived.run_id)
    assert not shipped.simulated and not again.simulated
    assert prefetch.run_id == prefetch_same.run_id and prefetch.simulated
    assert same_value.run_id not in (None, derived.run_id, prefetch.run_id)
    assert second.simulations == 2  # the origin's config once, the deeper prefetch once
    # every trial run is a distinct simulation, named by it
    assert len({r["input_sha1"] for r in runs}) == len(runs)
    ours = {derived.run_name, same_value.run_name, prefetch.run_name}
    assert len(ours) == 3 and ours <= {r["name"] for r in runs}
    assert all(r["name"].endswith("~" + r["input_sha1"][:10]) for r in runs)


def test_the_identity_is_what_is_simulated_not_how_it_is_named(tmp_path: Path) -> None:
    """trial.simulation_input: names, descriptions and file names leave it unchanged; a value the
    emulator reads, or a limit inside a file, changes it."""
    from sim_backend.config_load import load_raw
    from whatif.trial import TrialSpec, input_sha1

    configs = Path(__file__).resolve().parents[2] / "configs"
    raw = load_raw(str(configs / "baseline.toml"))
    raw["flags"]["xla_sparse_core_max_ids_file"] = "a_limits.toml"
    limits = (configs / "limits" / "baseline_limits.toml").read_bytes()

    def sha(raw: dict, files: dict) -> str:
        return input_sha1(TrialSpec("x", raw, "", files=files))

    one = sha(raw, {"a_limits.toml": limits})
    renamed = {**raw, "name": "other", "description": "words", "flags": {**raw["flags"]}}
    renamed["flags"]["xla_sparse_core_max_ids_file"] = "b_limits.toml"
    assert sha(renamed, {"b_limits.toml": b"# a comment\n" + limits}) == one
    assert sha(raw, {"a_limits.toml": limits.replace(b"= 2572", b"= 2573")}) != one
    assert sha({**raw, "steps": int(raw.get("steps", 20)) + 1}, {"a_limits.toml": limits}) != one


def test_a_trial_too_short_to_decide_is_decided_on_longer_runs(tmp_path: Path) -> None:
    """A 4-step origin has 2 counted steps, too few for an interval ("not enough steps"): the
    trial and its reference are simulated again at 8 steps (6 counted, paired) and the verdict is
    theirs; the trial keeps its change and its run. A budget that does not allow it leaves it
    undecided."""
    from analyzers.compare import step_time_change
    from profiler.trace_to_store import ingest_trace
    from sim_backend.recording.record import record_run

    config = Path(__file__).resolve().parents[2] / "configs" / "baseline.toml"
    db = str(tmp_path / "short.duckdb")
    with Store.open(db) as store, Executor() as ex:
        origin = ingest_trace(store, record_run(str(config), [], None, 4, str(tmp_path / "rec")).trace_path).run_id
        session = Session(store, origin, "verify", ex, root=str(tmp_path / "trials"))
        (short,) = session.measure([PREFETCH], origin)
        assert short.verdict == "not enough steps" and short.ci_low is None
        assert session.decide([short], Change(), origin, budget=session.simulations + 1) == [short]  # no room
        derived = dataclasses.replace(short, change=Change({}, derive_limits=True))  # costs 2: derive, then simulate
        assert session.decide([derived], Change(), origin, budget=session.simulations + 2) == [derived]
        slower = dataclasses.replace(short, rel_change=0.05)  # no fix whatever more steps say: not extended
        before = session.simulations
        assert session.decide([slower], Change(), origin) == [slower] and session.simulations == before
        (decided,) = session.decide([short], Change(), origin)
        ref_name, trial_name = decided.decided_runs
        ref8, trial8 = store.resolve_run(ref_name), store.resolve_run(trial_name)
        independent = step_time_change(store, ref8, trial8)
        steps8 = [len(counted_step_ps(store, r)) for r in (ref8, trial8)]
    assert session.simulations == 3  # the 4-step trial, then the origin and the trial at 8 steps
    assert decided.decided_steps == 8 and steps8 == [6, 6]
    assert decided.change == PREFETCH and (decided.run_id, decided.run_name) == (short.run_id, short.run_name)
    assert decided.verdict == "improved" and independent.paired
    assert (decided.rel_change, decided.ci_low, decided.ci_high) == (
        independent.change,
        independent.ci_low,
        independent.ci_high,
    )

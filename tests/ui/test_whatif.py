"""The UI's what-if views on a store with whatif_trials rows (tests/ui/whatif_store.py): each
finding's verified fix, the Tuning page and its tuned-config download, and Compare's attribution."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from analyzers.findings import Finding, make_fix
from tests.ui.test_data import find, text_of
from tests.ui.whatif_store import PREFETCH, THREADS, with_fixes
from ui import data, whatif_data
from ui.app import create_app
from ui.pages.compare import attribution_section
from ui.pages.findings import render_findings
from ui.pages.tuning import render_tuning, trial_figure
from whatif.attribute import shares_from_rows


@pytest.fixture
def ids(whatif_store):
    return {r["name"]: r["run_id"] for r in whatif_store.rows("SELECT run_id, name FROM runs")}


def finding(rule: str, fix: dict | None) -> Finding:
    return Finding(rule, "warning", "t", "m", 1.0, "share", "do it", fix=fix)


def test_a_fix_shows_the_latest_verification_of_exactly_that_fix(whatif_store, ids):
    verified = whatif_data.verified_fixes(whatif_store, ids["baseline"])
    row = whatif_data.verification_of(finding("host_bound", make_fix(set={PREFETCH: 2})), verified)
    # the later of two sessions that tried it; the row with the same set but derived limits is another fix
    assert (row["change"], row["reason"]) == (-0.201, "faster")
    assert whatif_data.verified_text(row) == (
        "Verified by simulation: −20.1% (95% CI −20.2% .. −20.1%), 980 µs -> 783 µs: recommended"
    )
    with_limits = whatif_data.verification_of(
        finding("host_bound", make_fix(set={PREFETCH: 2}, derive_limits=True)), verified
    )
    assert with_limits["change"] == -0.6
    assert whatif_data.verification_of(finding("host_bound", make_fix(set={PREFETCH: 3})), verified) is None
    assert whatif_data.verification_of(finding("minibatching", make_fix(set={PREFETCH: 2})), verified) is None
    assert whatif_data.verification_of(finding("host_bound", None), verified) is None
    refused = {**row, "accepted": False, "reason": "slower: +3.0% (95% CI +2.0% .. +4.0%), 980 µs -> 1.01 ms"}
    assert whatif_data.verified_text(refused) == (
        "Verified by simulation: not recommended: slower: +3.0% (95% CI +2.0% .. +4.0%), 980 µs -> 1.01 ms"
    )


def test_findings_page_shows_verified_and_unverified_fixes(whatif_store, ids, monkeypatch):
    real = data.analysis
    monkeypatch.setattr(data, "analysis", lambda store, run: with_fixes(real(store, run)))
    text = " ".join(text_of(render_findings(whatif_store, {"run": ids["baseline"]})).split())
    assert f"Fix: set {PREFETCH}=2" in text
    assert "Verified by simulation: −20.1% (95% CI −20.2% .. −20.1%), 980 µs -> 783 µs: recommended" in text
    assert "Fix: derive limits file" in text  # minibatching's fix, never verified
    assert "not verified yet: scprof analyze baseline --verify" in text
    assert text.count("Verified by simulation") == 1


def test_tuning_reads_the_latest_session_in_order(whatif_store, ids):
    t = whatif_data.tuning(whatif_store, ids["baseline"])
    trials = t["trials"]
    assert [r["seq"] for r in trials] == [1, 2, 3, 4, 5]
    assert [r["change_text"] for r in trials] == [
        f"{PREFETCH}=2",
        f"{THREADS}=8",
        f"{PREFETCH}=4",
        f"{PREFETCH}=2, {THREADS}=8",
        f"{PREFETCH}=4, sparsecore.max_tables_per_stack=1",
    ]
    assert [r["accepted"] for r in trials] == [True, False, True, False, False]
    assert [r["failed"] for r in trials] == [False, False, False, False, True]
    # the path starts at the baseline's mean step time over its counted steps
    st = data.step_times(whatif_store, ids["baseline"], data.step_bounds(whatif_store, ids["baseline"]))
    start = float(np.mean(st["step_ps"][st["counted"]]))
    assert t["start_step_time_ps"] == pytest.approx(start)
    assert [x for x, _ in t["path"]] == [0, 1, 3]
    assert t["path"][1][1] == trials[0]["step_time_ps"] and t["best"]["seq"] == 3
    assert whatif_data.tuning(whatif_store, ids["tuned"]) is None


def test_tuning_figure_marks_accepted_tried_and_failed(whatif_store, ids):
    t = whatif_data.tuning(whatif_store, ids["baseline"])
    fig = trial_figure(t)
    traces = {tr.name: tr for tr in fig.data}
    assert list(traces["tried"].x) == [2, 4] and list(traces["failed"].x) == [5]
    assert list(traces["accepted path"].x) == [0, 1, 3]
    assert fig.layout.yaxis.title.text == "mean step time (µs)"  # about 980 µs
    assert traces["accepted path"].y[0] == pytest.approx(t["start_step_time_ps"] / 1e6)
    body = render_tuning(whatif_store, {"run": ids["baseline"]})
    assert find(body, "tuning-download").href == f"/download/tuned.toml?run={ids['baseline']}&session={t['session']}"
    assert "5 trials, 2 accepted, 1 failed" in text_of(find(body, "tuning-summary"))
    empty = " ".join(text_of(render_tuning(whatif_store, {"run": ids["tuned"]})).split())
    assert "No tuning session" in empty and "scprof tune tuned" in empty


def test_tuned_config_download(whatif_db, whatif_store, ids):
    from whatif.tune import tuned_toml

    best = whatif_data.tuning(whatif_store, ids["baseline"])["best"]
    expected = tuned_toml(whatif_store, best["trial_run_id"], "baseline", f"{PREFETCH}=4")
    app = create_app(whatif_db)
    client = app.server.test_client()
    try:
        r = client.get("/download/tuned.toml", query_string={"run": str(ids["baseline"])})
        assert r.status_code == 200
        assert r.headers["Content-Disposition"] == "attachment; filename=baseline-tuned.toml"
        assert r.get_data(as_text=True) == expected
        cfg = tomllib.loads(expected)
        assert cfg["flags"]["maximum_parallel_iterations"] == 4 and cfg["name"] == "baseline-tuned"
        r = client.get("/download/tuned.toml", query_string={"run": str(ids["tuned"])})
        assert r.status_code == 404 and "scprof tune tuned" in r.get_data(as_text=True)
        r = client.get("/download/tuned.toml", query_string={"run": "no-such-run"})
        assert r.status_code == 400
        r = client.get("/download/tuned.toml", query_string={"run": str(ids["baseline"]), "session": "other"})
        assert r.status_code == 404
    finally:
        app.scprof_access.close()


def test_shares_from_rows_hand_computed():
    def row(label, step, ref=1000.0, overrides=None):
        return {
            "label": label,
            "step_time_ps": step,
            "ref_step_time_ps": ref,
            "overrides": overrides or {},
            "change": (step - ref) / ref if step else None,
            "ci_low": None,
            "ci_high": None,
            "verdict": "x",
        }

    # base 1000, cand 800: gain 200. a alone 850 (150), the candidate without a 950 (150): 150, 75%;
    # b alone 960 (40), without b 860 (60): 50, 25%; interaction 200 - (150 + 40) = 10.
    rows = [
        row("candidate", 800.0),
        row("alone: a", 850.0, overrides={"a": 1}),
        row("left out: a", 950.0),
        row("alone: b", 960.0, overrides={"b": 2}),
        row("left out: b", 860.0),
    ]
    out = shares_from_rows(rows)
    assert out["gain_ps"] == 200.0 and out["interaction_ps"] == 10.0
    got = [(r["key"], r["value"], r["alone_gain_ps"], r["left_out_gain_ps"], r["share"]) for r in out["changes"]]
    assert got == [("a", 1, 150.0, 150.0, 0.75), ("b", 2, 40.0, 60.0, 0.25)]
    # one key: alone is the candidate and left out is the baseline, so it has all the gain
    one = shares_from_rows([row("candidate", 800.0), row("alone: a", 800.0, overrides={"a": 1})])
    assert [(r["alone_gain_ps"], r["left_out_gain_ps"], r["share"]) for r in one["changes"]] == [(200.0, 200.0, 1.0)]
    # a failed trial alone: its contribution is the left-out effect; no interaction
    failed = shares_from_rows([*rows[:3], row("alone: b", None), rows[4]])
    assert [r["contribution_ps"] for r in failed["changes"]] == [150.0, 60.0] and failed["interaction_ps"] is None
    assert shares_from_rows([])["changes"] == []


def test_compare_shows_each_changed_keys_share(whatif_store, ids):
    a = whatif_data.attribution(whatif_store, ids["baseline"], ids["tuned"])
    keys = {r["key"] for r in a["changes"]}
    assert keys == {PREFETCH, "flags.xla_sparse_core_max_ids_file"}
    # two keys: alone(1) + left out(2) = baseline - candidate, so the contributions add up to the gain
    assert sum(r["share"] for r in a["changes"]) == pytest.approx(1.0)
    assert a["changes"][0]["key"] == PREFETCH  # the larger contribution first
    section = attribution_section(whatif_store, ids["baseline"], ids["tuned"], "baseline", "tuned")
    table = text_of(find(section, "compare-attribution"))
    assert PREFETCH in table and "%" in table
    # the reverse pair has no attribution: say how to compute it
    assert whatif_data.attribution(whatif_store, ids["tuned"], ids["baseline"]) is None
    hint = attribution_section(whatif_store, ids["tuned"], ids["baseline"], "tuned", "baseline")
    assert "scprof compare tuned baseline --attribute" in " ".join(text_of(hint).split())


def test_a_trial_stored_with_the_older_verdict_words_reads_in_todays(whatif_db, tmp_path, ids):
    """Rows written before the verdicts were split say "no significant change": the Tuning page
    shows them as "inconclusive" (whether the interval lay within +-1% was not stored)."""
    import shutil

    from profiler.store import Store

    db = str(tmp_path / "old.duckdb")
    shutil.copyfile(whatif_db, db)
    with Store.open(db) as store:
        store.con.execute(
            "UPDATE whatif_trials SET verdict = 'no significant change' WHERE purpose = 'tune' AND NOT accepted "
            "AND verdict <> 'failed'"
        )
        trials = whatif_data.tuning(store, ids["baseline"])["trials"]
    verdicts = {r["verdict"] for r in trials}
    assert "no significant change" not in verdicts and "inconclusive" in verdicts

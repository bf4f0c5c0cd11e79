"""The Compare and Runs pages on a mixed store (ok, failed, captured runs): which pair a URL
compares, every pair renders, unknown runs are named, the page's order and scopes, the Runs
page's tags and pick of a pair."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest

from analyzers.compare import compare_runs, config_diff
from profiler.store import Store
from profiler.units import format_value, unit_of
from tests.tracekit import REPO
from tests.ui.test_data import data_table_of, find, text_of
from ui import compare_data
from ui.pages.compare import layout_compare, render_compare, render_compare_verdict
from ui.pages.runs import layout_runs, render_runs
from ui.routing import guarded
from ui.store_access import StoreAccess


def state_of(layout, page: str = "compare") -> dict:
    return find(layout, f"{page}-state").data


@pytest.fixture(scope="module")
def failed_last_db(ui_db, tmp_path_factory) -> str:
    """The UI store with a failed run recorded last (the newest run)."""
    from scprof.cli import main

    d = tmp_path_factory.mktemp("failed-last")
    db = str(d / "s.duckdb")
    shutil.copyfile(ui_db, db)
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "spmem_overflow.toml"),
                "--name",
                "spmem",
                "--db",
                db,
                "--out",
                str(d / "f"),
            ]
        )
        == 2
    )
    return db


def test_run_param_compares_that_run_against_the_newest_ok_run_before_it(mixed, mixed_ids):
    ids = mixed_ids
    st = state_of(layout_compare(mixed, {"run": str(ids["tuned"])}))
    assert st == {"base": ids["baseline"], "cand": ids["tuned"]}
    # jax_cpu's newest ok predecessor with steps is prefetch2: the failed spmem between them is skipped
    st = state_of(layout_compare(mixed, {"run": "jax_cpu"}))
    assert st == {"base": ids["prefetch2"], "cand": ids["jax_cpu"]}
    # an explicit pair wins, and either side stays selectable
    st = state_of(layout_compare(mixed, {"run": "jax_cpu", "base": "tuned"}))
    assert st == {"base": ids["tuned"], "cand": ids["jax_cpu"]}


def test_a_trial_is_compared_with_its_what_if_origin(whatif_store):
    rows = whatif_store.rows("SELECT run_id, name, tags FROM runs ORDER BY run_id")
    base = next(r["run_id"] for r in rows if r["name"] == "baseline")
    trials = [r["run_id"] for r in rows if '"whatif_origin": "baseline"' in (r["tags"] or "")]
    assert trials
    newest_trial = max(trials)
    # the newest ok run before it is another trial or tuned: the origin is what it was made from
    assert max(r["run_id"] for r in rows if r["run_id"] < newest_trial) != base
    assert state_of(layout_compare(whatif_store, {"run": str(newest_trial)})) == {"base": base, "cand": newest_trial}


def test_default_pair_leaves_out_a_failed_newest_run(failed_last_db):
    with Store.open(failed_last_db, read_only=True) as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        assert max(ids.values()) == ids["spmem"]
        want = {"base": ids["baseline"], "cand": ids["tuned"]}
        assert state_of(layout_compare(store, {})) == want
        runs = state_of(layout_runs(store, {}), "runs")
        assert (runs["base"], runs["cand"]) == (want["base"], want["cand"])


def test_default_pair_rules_on_a_listing():
    rows = [
        {"run_id": 1, "name": "a", "status": "ok", "counted_steps": 8, "tags": {}},
        {"run_id": 2, "name": "cap", "status": "ok", "counted_steps": None, "tags": {}},
        {"run_id": 3, "name": "b", "status": "ok", "counted_steps": 8, "tags": {}},
        {"run_id": 4, "name": "t", "status": "ok", "counted_steps": 8, "tags": {"whatif_origin": "a"}},
        {"run_id": 5, "name": "bad", "status": "failed", "counted_steps": None, "tags": {}},
    ]
    assert compare_data.default_candidate(rows) == 4
    assert compare_data.default_baseline(rows, 4) == 1  # its origin, not the newer b
    assert compare_data.default_baseline(rows, 3) == 1  # the run without steps is skipped
    assert compare_data.default_baseline(rows, 5) == 4
    assert compare_data.default_baseline(rows[:2], 1) == 2  # no ok run with steps left: any other run
    assert compare_data.default_candidate(rows[4:]) == 5 and compare_data.default_baseline(rows[4:], 5) is None


@pytest.mark.parametrize(
    ("st", "words"),
    [
        ({"run": "42"}, "candidate: run 42 is not in this store"),
        ({"cand": "nosuch", "base": "baseline"}, "candidate: run 'nosuch' is not in this store"),
        ({"base": "42", "cand": "tuned"}, "baseline: run 42 is not in this store"),
    ],
)
def test_an_unknown_run_is_named_never_replaced(mixed, st, words):
    page = layout_compare(mixed, st)
    assert words in text_of(find(page, "compare-unknown"))
    assert find(page, "compare-verdict") is None and find(page, "compare-body") is None  # nothing else compared
    unknown_role = "cand" if words.startswith("candidate") else "base"
    assert state_of(page)[unknown_role] is None


def test_every_pair_renders_without_an_error(mixed_db, mixed_ids):
    access = StoreAccess(mixed_db)
    try:
        for b, c in itertools.permutations(sorted(mixed_ids.values()), 2):
            verdict = guarded(access, 2, ("base", "cand"))(render_compare_verdict)({"base": b, "cand": c})
            sql_side = guarded(access, 1, ("base", "cand"))(render_compare)({"base": b, "cand": c})
            text = text_of(list(verdict)) + text_of(sql_side)
            assert "internal error" not in text and "Error:" not in text, (b, c, text[:400])
            top = verdict[0]
            assert find(top, "compare-verdict-word") is not None or find(top, "compare-not-comparable") is not None
            assert find(top, "compare-findings-new") is not None, (b, c)
    finally:
        access.close()


def test_a_failed_run_is_named_and_config_and_findings_still_compare(mixed, mixed_ids):
    base, cand = mixed_ids["baseline"], mixed_ids["spmem"]
    top, rest = render_compare_verdict(mixed, {"base": base, "cand": cand})
    why = text_of(find(top, "compare-why-not"))
    assert f"candidate 'spmem' (run_id {cand}) has no steps (the run is failed: spmem_overflow)" in why
    assert "TileSpmem" in text_of(find(top, "compare-not-comparable"))  # the run's own error
    new = text_of(find(top, "compare-findings-new"))
    assert "failure_spmem_overflow" in new  # the failed compile's finding is the candidate's new finding
    user = {
        r["key"] for r in compare_data.split_config_diff(compare_data.config_diff_of_pair(mixed, base, cand))["user"]
    }
    assert user and all(k in text_of(find(top, "compare-config")) for k in user)
    sql_text = text_of(render_compare(mixed, {"base": base, "cand": cand}))
    assert f"candidate 'spmem' (run_id {cand}) has no counted steps: the run failed" in sql_text


def test_a_capture_without_config_says_so(mixed, mixed_ids):
    top, _ = render_compare_verdict(mixed, {"base": mixed_ids["baseline"], "cand": mixed_ids["jax_cpu"]})
    assert "No config recorded for 'jax_cpu' (a captured run)" in text_of(top)
    assert find(top, "compare-verdict-word") is not None


def test_order_user_keys_first_and_derived_rows_collapsed(mixed, mixed_ids):
    base, cand = mixed_ids["baseline"], mixed_ids["tuned"]
    page = layout_compare(mixed, {"base": str(base), "cand": str(cand)})
    ids = [c.children.id for c in page.children if hasattr(getattr(c, "children", None), "id")]
    assert ids == ["compare-verdict", "compare-body", "compare-deltas"]  # verdict, distributions, deltas
    top, rest = render_compare_verdict(mixed, {"base": base, "cand": cand})
    order = [
        next(i for i, part in enumerate(top.children) if find(part, key) is not None)
        for key in ("compare-verdict-word", "compare-config", "compare-attribution-hint", "compare-findings-persisting")
    ]
    assert order == sorted(order)
    assert find(rest, "compare-breakdown") is not None and find(rest, "compare-ops") is not None
    configs = [
        json.loads(mixed.rows("SELECT config FROM runs WHERE run_id = ?", [r])[0]["config"]) for r in (base, cand)
    ]
    diff = config_diff(*configs)
    derived = [r for r in diff if r["key"].startswith(("resolved.", "run_name"))]
    user_table = text_of(find(top, "compare-config"))
    assert "flags.maximum_parallel_iterations" in user_table and "resolved." not in user_table
    summary = find(top, "compare-config-derived-details").children[0]
    assert (
        summary.children.startswith(f"{len(derived)} derived keys differ") and len(derived) >= 6
    )  # per stack: limits, their source


def test_persisting_findings_show_both_sides(mixed, mixed_ids):
    base, cand = mixed_ids["baseline"], mixed_ids["prefetch2"]
    ref = compare_runs(mixed, base, cand).findings["persisting"]
    assert ref  # minibatching persists
    top, _ = render_compare_verdict(mixed, {"base": base, "cand": cand})
    text = text_of(find(top, "compare-findings-persisting"))
    for p in ref:
        b, c = p["base"], p["cand"]
        assert c["title"] in text
        assert f"{b['metric']} {format_value(b['value'], b['unit'])} {format_value(c['value'], c['unit'])}" in text
        for k, vb in b["evidence"].items():
            vc = c["evidence"].get(k)
            if isinstance(vb, int | float) and isinstance(vc, int | float) and vb != vc:
                assert f"{k} {format_value(vb, unit_of(k))} {format_value(vc, unit_of(k))}" in text


def test_per_op_time_says_it_is_summed_over_the_cores(mixed, mixed_ids):
    base, cand = mixed_ids["baseline"], mixed_ids["tuned"]
    _, rest = render_compare_verdict(mixed, {"base": base, "cand": cand})
    ops = find(rest, "compare-ops")
    header = " ".join(data_table_of(ops)["columns"])
    assert "time per step, summed over cores: baseline" in header
    n_sc = mixed.rows(
        "SELECT count(DISTINCT (chip, core)) AS n FROM tracks WHERE run_id = ? AND kind = 'sparsecore' "
        "AND line NOT IN ('Sparse Core Steps', 'Sparse Core Modules')",
        [base],
    )[0]["n"]
    assert n_sc > 1 and f"sparsecore (sum of {n_sc} SparseCores)" in text_of(ops)
    assert "per step per chip" in text_of(find(rest, "compare-breakdown-table"))


def test_runs_page_tags_as_chips_and_picks_a_pair(mixed, mixed_ids):
    st = state_of(layout_runs(mixed, {}), "runs")
    page = render_runs(mixed, st)
    text = text_of(page)
    assert "failure: spmem_overflow" in text and '{"' not in text  # tags read as key: value, not JSON
    other = mixed_ids["jax_cpu"]
    link = find(page, f"runs-pick-candidate-{other}")
    assert link.href == f"/runs?base={st['base']}&cand={other}"
    assert text_of(find(page, f"runs-pick-baseline-{st['base']}")) == "✓ baseline"
    compare = find(layout_runs(mixed, {"base": str(st["base"]), "cand": str(other)}), "runs-compare-link")
    assert compare.href == f"/compare?base={st['base']}&cand={other}"

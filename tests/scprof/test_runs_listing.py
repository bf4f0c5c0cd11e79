"""What-if trials are kept apart from the runs a user made: after `tune`, `analyze --verify` and
`compare --attribute` store their trials,
`scprof runs` (text and --json), MCP's list_runs, the UI's Runs page, its run pickers and the
default Compare pair are what they were; `--trials` (trials=true, the Runs page's checkbox)
lists them, and a URL naming a trial still opens it."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.recording.record import record_run
from tests.scprof.test_whatif_cmds import STEPS, scprof
from tests.sim_backend.conftest import SMALL
from tests.sim_backend.test_sim_record import small_file


def surfaces(db: str) -> dict:
    """Every listing of runs and every default pick, as a user meets them."""
    from scprof import answers
    from ui import compare_data, data
    from ui.pages.common import pick_run
    from ui.pages.runs import pick_pair

    with Store.open(db, read_only=True) as store:
        return {
            "runs_doc": answers.runs_doc(store),
            "ui_runs": [{k: v for k, v in r.items() if k != "status_text"} for r in data.runs(store)],
            "pickers": data.run_options(store),
            "default_run": pick_run(store, {}),
            "runs_page_pair": pick_pair(store, {}),
            "compare_pair": compare_data.compare_pair(store, {}),
        }


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The emulated run 'small', then the trials of `scprof tune small`, `analyze small --verify` and
    `compare small TRIAL --attribute`."""
    root = tmp_path_factory.mktemp("runs_listing")
    config = small_file(root, {**copy.deepcopy(SMALL), "steps": STEPS})
    db = str(root / "store.duckdb")
    with Store.open(db) as store:
        ingest_trace(store, record_run(config, [], None, None, str(root / "rec")).trace_path)
    shutil.rmtree(root / "rec")
    before = {
        "surfaces": surfaces(db),
        "text": scprof(root, "runs", "--db", db),
        "json": scprof(root, "runs", "--json", "--db", db),
    }
    done = scprof(root, "tune", "small", "--db", db, "--workers", "1", "--budget", "2", "--out", "out")
    assert done.code == 0, done.err
    done = scprof(root, "analyze", "small", "--verify", "--db", db)
    assert done.code == 0, done.err
    with Store.open(db, read_only=True) as store:
        trial = store.rows("SELECT name FROM runs WHERE name LIKE 'small~%' ORDER BY run_id LIMIT 1")[0]["name"]
    done = scprof(root, "compare", "small", trial, "--attribute", "--db", db)
    assert done.code == 0, done.err
    return {"root": root, "db": db, "before": before}


def test_the_what_if_commands_leave_every_listing_and_default_pick_as_it_was(tuned):
    with Store.open(tuned["db"], read_only=True) as store:
        trials = store.rows(
            "SELECT run_id, name FROM runs WHERE json_extract_string(tags, '$.whatif_origin') = 'small'"
        )
    assert trials, "tune stored no trial"
    assert surfaces(tuned["db"]) == tuned["before"]["surfaces"]
    text = scprof(tuned["root"], "runs", "--db", tuned["db"])
    assert text.code == 0 and text.out == tuned["before"]["text"].out
    assert text.err.strip() == f"({len(trials)} what-if trial(s) not listed: `scprof runs --trials` lists them)"
    assert scprof(tuned["root"], "runs", "--json", "--db", tuned["db"]).out == tuned["before"]["json"].out


def test_trials_are_listed_when_asked_and_open_by_name(tuned):
    from scprof.mcp_tools import Settings, Tools
    from ui import data
    from ui.pages.common import pick_run

    listed = json.loads(scprof(tuned["root"], "runs", "--json", "--trials", "--db", tuned["db"]).out)
    plain = json.loads(tuned["before"]["json"].out)
    extra = [r for r in listed if r["run_id"] not in {p["run_id"] for p in plain}]
    assert extra and all(r["whatif_origin"] == "small" and r["name"].startswith("small~") for r in extra)
    assert all(r["whatif_origin"] is None for r in plain)
    with Store.open(tuned["db"], read_only=True) as store:
        assert [r["run_id"] for r in data.runs(store, trials=True)] == [r["run_id"] for r in listed]
        assert data.trials_count(store) == len(extra)
        trial = extra[0]
        assert pick_run(store, {"run": trial["name"]}) == trial["run_id"]  # a URL naming a trial opens it
        options = data.run_options(store, keep=trial["run_id"])
        assert [o["value"] for o in options] == [*(p["run_id"] for p in plain), trial["run_id"]]
        assert options[-1]["label"].endswith("what-if trial)")
    tools = Tools(Settings(db=tuned["db"]))
    assert [r["run_id"] for r in tools.list_runs()["runs"]] == [p["run_id"] for p in plain]
    assert [r["run_id"] for r in tools.list_runs(trials=True)["runs"]] == [r["run_id"] for r in listed]


def test_the_runs_page_hides_trials_until_its_checkbox_is_ticked(tuned):
    from ui.pages.runs import layout_runs, render_runs

    with Store.open(tuned["db"], read_only=True) as store:
        n = store.rows("SELECT count(*) AS n FROM runs WHERE json_extract_string(tags, '$.whatif_origin') IS NOT NULL")
        n = n[0]["n"]
        hidden = str(render_runs(store, {}))
        shown = str(render_runs(store, {"trials": "1"}))
        layout = str(layout_runs(store, {}))
    assert f"and {n} what-if trial(s) not listed" in hidden and "small~" not in hidden
    assert "small~" in shown and "not listed" not in shown
    assert f"what-if trials ({n})" in layout

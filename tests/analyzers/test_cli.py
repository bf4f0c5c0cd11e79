"""`scprof analyze` and `scprof compare` from the command line."""

from __future__ import annotations

import json

from tests.analyzers.runkit import TC_OPS, Ev, RunSpec, record
from tests.tracekit import assert_one_error, cli


def two_runs(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    for name, tc_len in (("slow", 60), ("fast", 30)):
        events, steps = [], []
        for s in range(8):
            t = s * 100
            events += [Ev(TC_OPS, 0, 0, "dense", t + 10, tc_len + (s % 2), step=s, category="tc_forward")]
            steps.append((0, s, t, 20 + tc_len + (s % 2)))
        path = record(
            RunSpec(events=events, steps=steps, name=name, config={"tc": tc_len}), tmp_path / f"{name}.sctrace"
        )
        assert cli(capsys, "ingest", path, "--db", db).code == 0
    return db


def test_analyze_prints_findings_or_says_clean(tmp_path, capsys):
    db = two_runs(tmp_path, capsys)
    r = cli(capsys, "analyze", "fast", "--db", db)
    assert r.code == 0 and "step time" in r.out and "No problems found" in r.out
    # what the run cannot tell is said, not silently skipped
    assert "Not analysed" in r.out and "sc_partition_stats" in r.out


def test_analyze_json_is_one_document(tmp_path, capsys):
    db = two_runs(tmp_path, capsys)
    r = cli(capsys, "analyze", "slow", "--json", "--db", db)
    doc = json.loads(r.out)
    assert r.code == 0 and doc["run"]["name"] == "slow" and "breakdown" in doc["figures"]


def test_compare_reports_verdict_and_config_diff(tmp_path, capsys):
    db = two_runs(tmp_path, capsys)
    r = cli(capsys, "compare", "slow", "fast", "--json", "--db", db)
    doc = json.loads(r.out)
    assert r.code == 0 and doc["step_time"]["verdict"] == "improved"
    assert {"key": "tc", "base": 60, "cand": 30} in doc["config_diff"]
    text = cli(capsys, "compare", "slow", "fast", "--db", db).out
    assert "verdict: improved: \u2212" in text and "counted steps" in text
    assert doc["step_time"]["method"].startswith("symmetric bootstrap-t") and doc["step_time"]["min_steps"] == 5


def test_unknown_run_is_a_one_line_error(tmp_path, capsys):
    db = two_runs(tmp_path, capsys)
    assert_one_error(cli(capsys, "analyze", "nope", "--db", db), "nope", "slow")
    assert_one_error(cli(capsys, "compare", "slow", "nope", "--db", db), "nope")

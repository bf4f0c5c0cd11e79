"""Reports kept in the store (analyzers/kept_reports.py): `record` and `ingest` keep each run's
report; read back, it equals the analyzers run afresh (figures, findings, notes, tables); a report
made by other code, from a replaced run, or damaged is not used; what JSON cannot hold is not kept."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

from analyzers import kept_reports
from analyzers.registry import analyze_run
from profiler.schema import SCHEMA_VERSION
from profiler.store import Store
from scprof.cli import main
from tests.tracekit import REPO, record_small

DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def kept_db(tmp_path_factory):
    """An emulated run, a failed compile, a real CPU capture and a tiny hand-made trace, stored by
    the CLI."""
    d = tmp_path_factory.mktemp("kept")
    db = str(d / "s.duckdb")
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "baseline.toml"),
                "--steps",
                "4",
                "--name",
                "ok",
                "--db",
                db,
                "--out",
                str(d / "ok"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "spmem_overflow.toml"),
                "--name",
                "failed",
                "--db",
                db,
                "--out",
                str(d / "f"),
            ]
        )
        == 2
    )  # stored as a failed run
    assert main(["ingest", str(DATA / "jax_cpu_small.xplane.pb"), "--name", "cpu", "--db", db]) == 0
    # 4 events, SparseCore ops without minibatch counts (minibatching's figures once failed on it)
    assert main(["ingest", str(record_small(d / "small.sctrace")), "--name", "tiny", "--db", db]) == 0
    return db


def as_json(report) -> dict:
    """Everything a report holds but its tables, as `analyze --json` would write it (and more)."""
    return json.loads(
        json.dumps(
            {
                "report": report.to_dict(),
                "analyses": {
                    n: {"findings": [f.to_dict() for f in a.findings], "figures": a.figures, "notes": a.notes}
                    for n, a in report.analyses.items()
                },
            },
            default=str,
        )
    )


def close(a, b) -> bool:
    """Equal, floats to 1e-12 relative: DuckDB's parallel sums may differ in the last bit between
    two analyses of the same run."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same_report(kept, fresh) -> None:
    assert close(as_json(kept), as_json(fresh))
    assert kept.run == fresh.run
    assert [f.rule for f in kept.findings] == [f.rule for f in fresh.findings]
    for name, a in fresh.analyses.items():
        assert list(kept.analyses[name].tables) == list(a.tables)
        for t, table in a.tables.items():
            assert kept.analyses[name].tables[t].schema == table.schema, (name, t)
            assert close(kept.analyses[name].tables[t].to_pylist(), table.to_pylist()), (name, t)


@pytest.mark.parametrize("run", ["ok", "failed", "cpu", "tiny"])
def test_record_and_ingest_keep_a_report_equal_to_a_fresh_analysis(kept_db, run):
    with Store.open(kept_db, read_only=True) as store:
        run_id = store.resolve_run(run)
        kept = kept_reports.kept_report(store, run_id)
        assert kept is not None, f"{run}: no report kept"
        fresh = analyze_run(store, run_id)
        assert_same_report(kept, fresh)
        assert any(a.tables for a in kept.analyses.values()) and len(kept.analyses) == len(fresh.analyses)
        if run == "failed":  # the failed compile's finding, read back
            assert "compile_failure" in {f.rule for f in kept.findings} or kept.findings


def test_analyze_json_prints_the_kept_report(kept_db, capsys):
    capsys.readouterr()
    assert main(["analyze", "ok", "--db", kept_db, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    with Store.open(kept_db, read_only=True) as store:
        fresh = analyze_run(store, store.resolve_run("ok"))
    assert close(printed, json.loads(json.dumps(fresh.to_dict(), default=str)))


def copy_of(kept_db, tmp_path) -> str:
    import shutil

    db = str(tmp_path / "c.duckdb")
    shutil.copy(kept_db, db)
    return db


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE analysis_reports SET code_sha1 = 'other code'",
        "UPDATE analysis_reports SET uuid = 'a replaced run'",
        "UPDATE analysis_reports SET analyses = '{\"breakdown\": {}}'",
        "UPDATE analysis_reports SET analyses = '[1, 2]'",
        'UPDATE analysis_reports SET analyses = json_merge_patch(analyses, \'{"failures": {"findings": [{"x": 1}]}}\')',
        "UPDATE analysis_report_tables SET arrow_ipc = 'not arrow'::BLOB",
        "UPDATE analysis_report_tables SET analyzer = 'no such analyzer'",
        "DROP TABLE analysis_report_tables",
    ],
)
def test_a_report_of_other_code_another_run_or_damaged_is_computed_afresh(kept_db, tmp_path, damage):
    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:
        con.execute(damage)
    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        assert kept_reports.kept_report(store, run_id) is None
        assert_same_report(kept_reports.report_for(store, run_id), analyze_run(store, run_id))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("UPDATE analysis_report_tables SET arrow_ipc = 'not arrow'::BLOB", "ArrowInvalid"),
        ("DROP TABLE analysis_report_tables", "CatalogException"),  # DuckDB's message spans lines
    ],
)
def test_a_damaged_report_costs_the_user_one_warning_line_not_a_traceback(kept_db, tmp_path, damage, problem):
    """`scprof analyze` on a store whose kept report is damaged: the fresh analysis on stdout, one
    `kept report unreadable` line on stderr naming the run and the problem, exit 0."""
    import subprocess
    import sys

    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:
        con.execute(damage)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from scprof.cli import main; raise SystemExit(main())",
            "analyze",
            "ok",
            "--json",
            "--db",
            db,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"kept report unreadable ({problem}: " in lines[0], done.stderr
    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        assert f"run {run_id}:" in lines[0]
        assert json.loads(done.stdout)["run"]["run_id"] == run_id


def test_replacing_a_run_replaces_its_report(kept_db, tmp_path, capsys):
    db = copy_of(kept_db, tmp_path)
    assert (
        main(
            [
                "record",
                str(REPO / "configs" / "baseline.toml"),
                "--steps",
                "3",
                "--name",
                "ok",
                "--db",
                db,
                "--out",
                str(tmp_path / "again"),
                "--replace",
            ]
        )
        == 0
    )
    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        rows = store.rows(
            "SELECT k.uuid AS kept_uuid, r.uuid FROM analysis_reports k JOIN runs r USING (run_id) WHERE run_id = ?",
            [run_id],
        )
        assert len(rows) == 1 and rows[0]["kept_uuid"] == rows[0]["uuid"]
        kept = kept_reports.kept_report(store, run_id)
        assert kept is not None
        assert_same_report(kept, analyze_run(store, run_id))
        assert store.rows("SELECT count(*) AS n FROM runs")[0]["n"] == 4


def test_a_report_json_cannot_hold_exactly_is_not_kept(kept_db, tmp_path):
    db = copy_of(kept_db, tmp_path)
    with Store.open(db) as store:
        run_id = store.resolve_run("ok")
        report = analyze_run(store, run_id)
        before = store.rows("SELECT * FROM analysis_reports ORDER BY run_id")
        report.analyses["breakdown"].figures["pair"] = (1, 2)  # a tuple reads back as a list
        assert kept_reports.keep_report(store, report) is False
        report.analyses["breakdown"].figures.pop("pair")
        report.analyses["overlap"].figures["by_chip"] = {0: 0.5}  # a number key reads back as text
        assert kept_reports.keep_report(store, report) is False
        assert store.rows("SELECT * FROM analysis_reports ORDER BY run_id") == before  # nothing written
        report.analyses["overlap"].figures["by_chip"] = {"0": float("nan")}  # NaN reads back as NaN
        assert kept_reports.keep_report(store, report) is True
        assert math.isnan(kept_reports.kept_report(store, run_id).analyses["overlap"].figures["by_chip"]["0"])
        report.analyses["overlap"].figures.pop("by_chip")
        assert kept_reports.keep_report(store, report) is True
        assert_same_report(kept_reports.kept_report(store, run_id), report)


def test_code_sha1_follows_the_analyzers_source(monkeypatch, tmp_path):
    (tmp_path / "analyzers").mkdir()
    (tmp_path / "profiler").mkdir()
    (tmp_path / "analyzers" / "a.py").write_text("x = 1\n")
    (tmp_path / "analyzers" / "q.sql").write_text("SELECT 1\n")
    (tmp_path / "profiler" / "notes.txt").write_text("not source\n")

    def sha(root) -> str:
        monkeypatch.setattr(kept_reports, "__file__", str(root / "analyzers" / "kept_reports.py"))
        kept_reports.code_sha1.cache_clear()
        return kept_reports.code_sha1()

    try:
        first = sha(tmp_path)
        (tmp_path / "profiler" / "notes.txt").write_text("still not source\n")
        assert sha(tmp_path) == first
        (tmp_path / "analyzers" / "q.sql").write_text("SELECT 2\n")
        assert sha(tmp_path) != first
    finally:
        kept_reports.code_sha1.cache_clear()


def test_a_version_5_store_reads_without_reports_and_gets_the_tables_on_write(kept_db, tmp_path):
    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:  # what a version-5 store was: no report tables
        con.execute("DROP TABLE analysis_reports")
        con.execute("DROP TABLE analysis_report_tables")
        con.execute("UPDATE scprof_meta SET value = '5' WHERE key = 'schema_version'")
    with Store.open(db, read_only=True) as store:
        assert store.schema_version() == 5
        run_id = store.resolve_run("ok")
        assert kept_reports.kept_report(store, run_id) is None
        assert_same_report(kept_reports.report_for(store, run_id), analyze_run(store, run_id))
    with Store.open(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.rows("SELECT count(*) AS n FROM analysis_reports")[0]["n"] == 0
        assert kept_reports.analyse_and_keep(store, store.resolve_run("ok")) is None
    with Store.open(db, read_only=True) as store:
        assert kept_reports.kept_report(store, store.resolve_run("ok")) is not None


def test_memory_peak_time_is_the_earliest_sample_at_the_peak(kept_db):
    # The kept report and a fresh analysis must agree, so a peak reached several times is dated
    # by its first sample (as the store's hbm_peaks view), not by whichever the scan meets first.
    with Store.open(kept_db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        samples = store.rows(
            "SELECT chip, counter, ts_ps, value FROM counter_samples WHERE run_id = ? AND unit = 'bytes' AND chip >= 0",
            [run_id],
        )
        table = analyze_run(store, run_id).analyses["memory"].tables["memory_peaks"]
    want: dict[tuple, tuple] = {}
    for s in samples:
        key = (s["chip"], s["counter"])
        peak, first = want.get(key, (None, None))
        if peak is None or s["value"] > peak or (s["value"] == peak and s["ts_ps"] < first):
            want[key] = (s["value"], s["ts_ps"])
    got = {(r["chip"], r["counter"]): (r["peak_bytes"], r["peak_ts_ps"]) for r in table.to_pylist()}
    assert got == want
    repeated = sum(
        sum(1 for s in samples if (s["chip"], s["counter"]) == k and s["value"] == v[0]) > 1 for k, v in want.items()
    )
    assert repeated > 0  # the case that was ambiguous occurs in this run


def test_an_analyzer_failing_at_ingest_leaves_the_run_stored_without_a_report(tmp_path, capsys, monkeypatch):
    from analyzers.rules import skew

    def broken(ctx):
        raise RuntimeError("a bug in an analyzer")

    monkeypatch.setattr(skew, "analyze", broken)
    db = str(tmp_path / "new.duckdb")
    capsys.readouterr()
    assert main(["ingest", str(DATA / "jax_cpu_small.xplane.pb"), "--name", "cpu", "--db", db]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "scprof: warning: run 1 stored without its report (RuntimeError: a bug in an analyzer); "
        "`scprof analyze` retries it"
    ]
    with Store.open(db, read_only=True) as store:
        assert [r["name"] for r in store.rows("SELECT name FROM runs")] == ["cpu"]
        assert store.rows("SELECT count(*) AS n FROM analysis_reports")[0]["n"] == 0

"""The analysis tables (analyzers/materialize.py writes, analyzers/runstats.py reads): `record` and
`ingest` store each run's analysis; read back, it equals the analyzers run afresh (figures,
findings, notes, the breakdown's tables); rows of other code, of a replaced run or damaged are not
used; what the tables cannot hold exactly is not stored."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

from analyzers import materialize, runstats
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


STORED_TABLES = {"breakdown": ["step_breakdown", "step_times"]}  # the tables read outside the analyzers


def assert_same_report(kept, fresh) -> None:
    """Equal figures, findings, notes and run; the stored tables equal the computed ones (a fresh
    report has every analyzer's tables, a stored one those read outside the analyzers)."""
    assert close(as_json(kept), as_json(fresh))
    assert kept.run == fresh.run
    assert [f.rule for f in kept.findings] == [f.rule for f in fresh.findings]
    for name, a in kept.analyses.items():
        assert list(a.tables) in ([], list(fresh.analyses[name].tables)), name
        for t, table in a.tables.items():
            assert table.schema == fresh.analyses[name].tables[t].schema, (name, t)
            assert close(table.to_pylist(), fresh.analyses[name].tables[t].to_pylist()), (name, t)


@pytest.mark.parametrize("run", ["ok", "failed", "cpu", "tiny"])
def test_record_and_ingest_store_an_analysis_equal_to_a_fresh_one(kept_db, run):
    with Store.open(kept_db, read_only=True) as store:
        run_id = store.resolve_run(run)
        kept = runstats.stored_report(store, run_id)
        assert kept is not None, f"{run}: no analysis stored"
        fresh = analyze_run(store, run_id)
        assert_same_report(kept, fresh)
        assert {n: list(a.tables) for n, a in kept.analyses.items() if a.tables} == STORED_TABLES
        assert list(kept.analyses) == list(fresh.analyses)
        if run == "failed":  # the failed compile's finding, read back
            assert "compile_failure" in {f.rule for f in kept.findings} or kept.findings


def test_run_figures_name_each_quantity_by_its_path(kept_db):
    """A figure's row is found by its path, with the value the report holds (plain SQL, no Python)."""
    with Store.open(kept_db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        figures = analyze_run(store, run_id).analyses["breakdown"].figures
        rows = store.rows(
            "SELECT path, type, int_value, double_value FROM run_figures WHERE run_id = ? AND path IN "
            "('breakdown.steps', 'breakdown.step_ps_mean', 'breakdown.share.idle')",
            [run_id],
        )
        got = {r["path"]: r["int_value"] if r["type"] == "int" else r["double_value"] for r in rows}
        assert got == {
            "breakdown.steps": figures["steps"],
            "breakdown.step_ps_mean": pytest.approx(figures["step_ps_mean"], rel=1e-12),
            "breakdown.share.idle": pytest.approx(figures["share"]["idle"], rel=1e-12),
        }
        ranked = store.rows("SELECT rule FROM run_findings WHERE run_id = ? ORDER BY rank", [run_id])
        assert [r["rule"] for r in ranked] == [f.rule for f in analyze_run(store, run_id).findings]


@pytest.mark.parametrize(
    "figures",
    [
        {},
        {"a": 1, "b": -(2**63), "c": 2**63 - 1, "d": 0.1, "e": float("inf"), "f": float("nan")},
        {"t": True, "f": False, "n": None, "s": "é;'--", "z": 0},
        {"l": [], "d": {}, "nested": {"x": [1, [2.5, {"y": None}], {"": "empty key"}], "a.b": 3}},
        {"lists": [[[]], [{}], [1, "1", 1.0, True]]},
    ],
)
def test_figures_flatten_and_rebuild_exactly(figures):
    """materialize.flatten and runstats.unflatten are inverses: types, key order and NaN kept."""
    rows = materialize.flatten("x", figures)
    assert [r["ord"] for r in rows] == list(range(len(rows)))
    rebuilt = runstats.unflatten(rows)
    assert materialize.same(rebuilt.get("x", {}), figures)


def test_analyze_json_prints_the_stored_analysis(kept_db, capsys):
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
        "UPDATE run_analysis SET analysis_sha1 = 'other code'",
        "UPDATE run_analysis SET uuid = 'a replaced run'",
        "UPDATE run_analysis SET error = 'it failed'",
        "DELETE FROM run_analysis",
        "UPDATE run_figures SET type = 'tuple' WHERE ord = 0",
        "UPDATE run_figures SET parent = 9999 WHERE parent IS NOT NULL",
        "UPDATE run_findings SET finding = '{\"x\": 1}'",
        "UPDATE run_findings SET finding = '[1, 2]'",
        "UPDATE run_findings SET analyzer = 'no such analyzer' WHERE rank = 0",
        "UPDATE run_figures SET analyzer = 'no such analyzer' WHERE analyzer = 'breakdown'",
        "UPDATE run_notes SET analyzer = 'no such analyzer' WHERE ord = 0 AND analyzer = 'async_overlap'",
        "DROP TABLE run_figures",
        "DROP TABLE run_step_split",
    ],
)
def test_an_analysis_of_other_code_another_run_or_damaged_is_computed_afresh(kept_db, tmp_path, damage):
    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:
        con.execute(damage)
    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        assert runstats.stored_report(store, run_id) is None
        assert_same_report(runstats.report(store, run_id), analyze_run(store, run_id))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("UPDATE run_figures SET type = 'tuple' WHERE ord = 0", "ValueError"),
        ("DROP TABLE run_findings", "CatalogException"),  # DuckDB's message spans lines
    ],
)
def test_a_damaged_analysis_costs_the_user_one_warning_line_not_a_traceback(kept_db, tmp_path, damage, problem):
    """`scprof analyze` on a store whose stored analysis is damaged: the fresh analysis on stdout,
    one `stored analysis unreadable` line on stderr naming the run and the problem, exit 0."""
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
    assert len(lines) == 1 and f"stored analysis unreadable ({problem}: " in lines[0], done.stderr
    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run("ok")
        assert f"run {run_id}:" in lines[0]
        assert json.loads(done.stdout)["run"]["run_id"] == run_id


def test_replacing_a_run_replaces_its_analysis(kept_db, tmp_path, capsys):
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
            "SELECT a.uuid AS stamped_uuid, r.uuid FROM run_analysis a JOIN runs r USING (run_id) WHERE run_id = ?",
            [run_id],
        )
        assert len(rows) == 1 and rows[0]["stamped_uuid"] == rows[0]["uuid"]
        kept = runstats.stored_report(store, run_id)
        assert kept is not None
        assert_same_report(kept, analyze_run(store, run_id))
        assert store.rows("SELECT count(*) AS n FROM runs")[0]["n"] == 4
        assert store.rows("SELECT count(DISTINCT run_id) AS n FROM run_figures")[0]["n"] == 4


def test_an_analysis_the_tables_cannot_hold_exactly_is_not_stored(kept_db, tmp_path):
    db = copy_of(kept_db, tmp_path)
    with Store.open(db) as store:
        run_id = store.resolve_run("ok")
        report = analyze_run(store, run_id)

        def stamp() -> dict:
            return store.rows("SELECT error FROM run_analysis WHERE run_id = ?", [run_id])[0]

        def figure_rows() -> int:
            return store.rows("SELECT count(*) AS n FROM run_figures WHERE run_id = ?", [run_id])[0]["n"]

        for bad, why in [
            ((1, 2), "a tuple"),  # would read back as a list
            ({0: 0.5}, "key 0 is not a str"),  # a number key would read back as text
            (2**64, "does not fit 64 bits"),
        ]:
            report.analyses["overlap"].figures["bad"] = bad
            assert materialize.keep(store, report) is False
            assert why in stamp()["error"] and figure_rows() == 0
            assert runstats.stored_report(store, run_id) is None
        report.analyses["overlap"].figures["bad"] = {"0": float("nan")}  # NaN reads back as NaN
        assert materialize.keep(store, report) is True
        assert stamp()["error"] is None
        assert math.isnan(runstats.stored_report(store, run_id).analyses["overlap"].figures["bad"]["0"])
        report.analyses["overlap"].figures.pop("bad")
        report.findings[0].evidence["set"] = {1, 2}  # not JSON: the finding cannot be stored
        assert materialize.keep(store, report) is False and "finding" in stamp()["error"]
        report.findings[0].evidence.pop("set")
        report.findings[0].evidence.update(nan=float("nan"), inf=float("inf"), ninf=-float("inf"))  # kept
        assert materialize.keep(store, report) is True
        evidence = runstats.stored_report(store, run_id).findings[0].evidence
        assert math.isnan(evidence["nan"]) and evidence["inf"] == float("inf") and evidence["ninf"] == -float("inf")
        assert_same_report(runstats.stored_report(store, run_id), report)


def test_analysis_sha1_follows_the_analyzers_source(monkeypatch, tmp_path):
    (tmp_path / "analyzers").mkdir()
    (tmp_path / "profiler").mkdir()
    (tmp_path / "analyzers" / "a.py").write_text("x = 1\n")
    (tmp_path / "analyzers" / "q.sql").write_text("SELECT 1\n")
    (tmp_path / "profiler" / "notes.txt").write_text("not source\n")

    def sha(root) -> str:
        monkeypatch.setattr(materialize, "__file__", str(root / "analyzers" / "materialize.py"))
        materialize.analysis_sha1.cache_clear()
        return materialize.analysis_sha1()

    try:
        first = sha(tmp_path)
        (tmp_path / "profiler" / "notes.txt").write_text("still not source\n")
        assert sha(tmp_path) == first
        (tmp_path / "analyzers" / "q.sql").write_text("SELECT 2\n")
        assert sha(tmp_path) != first
    finally:
        materialize.analysis_sha1.cache_clear()


def test_a_version_7_store_reads_without_analysis_tables_and_the_ui_migration_stores_them(kept_db, tmp_path):
    """A version-7 store (reports as JSON): read-only opens analyse each run; the migration the UI
    runs drops the old reports, creates the tables and stores every run's analysis."""
    from ui.store_access import migrate_if_old

    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:  # what a version-7 store was: reports as JSON and blobs
        for t in ("run_analysis", "run_figures", "run_findings", "run_notes", "run_step_split"):
            con.execute(f"DROP TABLE {t}")
        con.execute("CREATE TABLE analysis_reports (run_id INTEGER, uuid VARCHAR, code_sha1 VARCHAR, analyses JSON)")
        con.execute(
            "CREATE TABLE analysis_report_tables (run_id INTEGER, analyzer VARCHAR, name VARCHAR, arrow_ipc BLOB)"
        )
        con.execute("UPDATE scprof_meta SET value = '7' WHERE key = 'schema_version'")
    with Store.open(db, read_only=True) as store:
        assert store.schema_version() == 7
        run_id = store.resolve_run("ok")
        assert runstats.stored_report(store, run_id) is None
        assert_same_report(runstats.report(store, run_id), analyze_run(store, run_id))
    assert migrate_if_old(db) is True
    with Store.open(db, read_only=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        tables = {r["table_name"] for r in store.rows("SELECT table_name FROM duckdb_tables()")}
        assert "analysis_reports" not in tables and "analysis_report_tables" not in tables
        runs = [r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id")]
        for run_id in runs:
            kept = runstats.stored_report(store, run_id)
            assert kept is not None, run_id
            assert_same_report(kept, analyze_run(store, run_id))


def test_memory_peak_time_is_the_earliest_sample_at_the_peak(kept_db):
    # The stored analysis and a fresh one must agree, so a peak reached several times is dated
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


def test_an_analyzer_failing_at_ingest_leaves_the_run_stored_without_its_analysis(tmp_path, capsys, monkeypatch):
    from analyzers.rules import skew

    def broken(ctx):
        raise RuntimeError("a bug in an analyzer")

    monkeypatch.setattr(skew, "analyze", broken)
    db = str(tmp_path / "new.duckdb")
    capsys.readouterr()
    assert main(["ingest", str(DATA / "jax_cpu_small.xplane.pb"), "--name", "cpu", "--db", db]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "scprof: warning: run 1 stored without its analysis (RuntimeError: a bug in an analyzer); "
        "`scprof analyze` retries it"
    ]
    with Store.open(db, read_only=True) as store:
        assert [r["name"] for r in store.rows("SELECT name FROM runs")] == ["cpu"]
        assert store.rows("SELECT count(*) AS n FROM run_figures")[0]["n"] == 0
        stamp = store.rows("SELECT error FROM run_analysis")
        assert stamp == [{"error": "RuntimeError: a bug in an analyzer"}]
        # readers analyse it afresh (and explain); writers do not retry what this code failed on
        assert runstats.stored_report(store, 1) is None and materialize.stale_runs(store) == []


@pytest.mark.parametrize("steps", [None, "1:3"])
def test_the_perfetto_breakdown_from_the_stored_split_equals_the_one_computed_afresh(kept_db, tmp_path, steps):
    """The export reads run_step_split when the run's analysis is current and computes the split per
    export span otherwise: the two traces are the same bytes."""
    stale = copy_of(kept_db, tmp_path)
    with duckdb.connect(stale) as con:
        con.execute("UPDATE run_analysis SET analysis_sha1 = 'other code'")
    out = {}
    for name, db in (("current", kept_db), ("stale", stale)):
        path = tmp_path / f"{name}.pftrace"
        args = ["export", "perfetto", "ok", "--db", db, "-o", str(path), *(["--steps", steps] if steps else [])]
        assert main(args) == 0
        out[name] = path.read_bytes()
    with Store.open(kept_db, read_only=True) as store:
        assert runstats.is_current(store, store.resolve_run("ok"))
    assert out["current"] == out["stale"] and b"Step breakdown" in out["current"]


def test_scprof_ui_stores_the_analysis_of_stale_runs_once_before_serving(kept_db, tmp_path, capsys):
    """Runs analysed by other code: `scprof ui` (ui/app.serve) analyses and stores them before it
    serves, once; a store with nothing stale, or no store, is left as it is."""
    from ui.store_access import analyse_stale_runs

    db = copy_of(kept_db, tmp_path)
    with duckdb.connect(db) as con:
        con.execute("UPDATE run_analysis SET analysis_sha1 = 'an older scprof' WHERE run_id <> 1")
    with Store.open(db, read_only=True) as store:
        assert materialize.stale_runs(store) == [2, 3, 4]
    capsys.readouterr()
    assert analyse_stale_runs(db) == 3
    assert "analysing 3 run(s) this scprof version has not analysed yet" in capsys.readouterr().out
    with Store.open(db, read_only=True) as store:
        assert materialize.stale_runs(store) == []
        for run_id in (2, 3, 4):
            assert_same_report(runstats.stored_report(store, run_id), analyze_run(store, run_id))
    before = (tmp_path / "c.duckdb").stat().st_mtime_ns
    assert analyse_stale_runs(db) == 0 and (tmp_path / "c.duckdb").stat().st_mtime_ns == before
    assert analyse_stale_runs(str(tmp_path / "none.duckdb")) == 0 and not (tmp_path / "none.duckdb").exists()

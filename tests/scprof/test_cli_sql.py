"""`scprof sql`: read-only, one statement, capped rows, a time limit, three formats."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from tests.tracekit import REPO, assert_one_error, cli, snapshot

REFUSED = {
    "insert": "INSERT INTO runs (run_id) VALUES (99)",
    "update": "UPDATE runs SET name = 'x'",
    "delete": "DELETE FROM events",
    "create": "CREATE TABLE t (a INTEGER)",
    "create-view": "CREATE VIEW v AS SELECT 1",
    "drop": "DROP TABLE events",
    "attach": "ATTACH '{tmp}/other.duckdb' AS other",
    "copy": "COPY runs TO '{tmp}/out.csv'",
    "export": "EXPORT DATABASE '{tmp}/exported'",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "pragma": "PRAGMA database_list",
    "set": "SET threads = 1",
    "call": "CALL pragma_version()",
    "two-statements": "SELECT 1; SELECT 2",
    "select-then-delete": "SELECT 1; DELETE FROM events",
    "read_csv": "SELECT * FROM read_csv('{tmp}/data.csv')",
    "read_csv_auto": "SELECT * FROM read_csv_auto('{tmp}/data.csv')",
    "read_parquet": "SELECT * FROM read_parquet('{tmp}/data.parquet')",
    "read_text": "SELECT * FROM read_text('{tmp}/data.csv')",
    "read_blob": "SELECT * FROM read_blob('{tmp}/data.csv')",
    "glob": "SELECT * FROM glob('{tmp}/*')",
    "bare-path": "SELECT * FROM '{tmp}/data.csv'",
    "syntax-error": "SELEC 1",
    "explain-analyze-create": "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "explain-analyze-options-insert": "EXPLAIN (ANALYZE) INSERT INTO runs (run_id) VALUES (99)",
    "update-extensions": "UPDATE EXTENSIONS",
    "pivot-without-in": "PIVOT runs ON name USING count(*)",
    "unknown-table": "SELECT * FROM no_such_table",
}


@pytest.fixture
def files(tmp_path):
    """Files a refused query might try to read."""
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    return tmp_path


@pytest.mark.parametrize("query", REFUSED.values(), ids=REFUSED.keys())
def test_refused_statements(capsys, store_path, files, query):
    before = snapshot(store_path)
    listing = sorted(p.name for p in files.iterdir())
    r = cli(capsys, "sql", query.format(tmp=files), "--db", store_path)
    assert_one_error(r, "query")
    assert r.out == ""
    assert snapshot(store_path) == before
    assert sorted(p.name for p in files.iterdir()) == listing  # nothing written next to it either


def rows_csv(text):
    return list(csv.reader(io.StringIO(text)))


SLICES = "SELECT event_id, name, dur_ps, table_name, ids FROM slices ORDER BY event_id"


def test_select_csv(capsys, store_path):
    r = cli(capsys, "sql", SLICES, "--format", "csv", "--db", store_path)
    assert (r.code, r.err) == (0, "")
    assert rows_csv(r.out) == [
        ["event_id", "name", "dur_ps", "table_name", "ids"],
        ["0", "fusion.1", "1500000", "", ""],
        ["1", "dot.2", "900000", "", ""],
        ["2", "gather", "4000", "table_a", "64"],
        ["3", "gather", "4000", "table_b", "80"],
    ]


def test_select_json(capsys, store_path):
    r = cli(capsys, "sql", SLICES + " LIMIT 3", "--format", "json", "--db", store_path)
    assert (r.code, r.err) == (0, "")
    assert json.loads(r.out) == [
        {"event_id": 0, "name": "fusion.1", "dur_ps": 1500000, "table_name": None, "ids": None},
        {"event_id": 1, "name": "dot.2", "dur_ps": 900000, "table_name": None, "ids": None},
        {"event_id": 2, "name": "gather", "dur_ps": 4000, "table_name": "table_a", "ids": 64},
    ]


def test_select_table(capsys, store_path):
    r = cli(capsys, "sql", "SELECT counter, ts_ps, value FROM counter_samples ORDER BY ts_ps", "--db", store_path)
    assert (r.code, r.err) == (0, "")
    lines = r.out.splitlines()
    assert lines[0].split() == ["counter", "ts_ps", "value"]
    assert [ln.split() for ln in lines[2:4]] == [["HBM", "heap", "0", "1024"], ["HBM", "heap", "2000000", "4096"]]
    assert lines[-1] == "(2 rows)"


def test_parameters_of_a_with_query_and_empty_result(capsys, store_path):
    q = "WITH s AS (SELECT step, count(*) AS n FROM slices GROUP BY step) SELECT * FROM s WHERE n > 100"
    r = cli(capsys, "sql", q, "--format", "json", "--db", store_path)
    assert (r.code, json.loads(r.out)) == (0, [])


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_row_cap(capsys, store_path, fmt):
    r = cli(capsys, "sql", "SELECT range AS i FROM range(50)", "--max-rows", "7", "--format", fmt, "--db", store_path)
    assert r.code == 0
    if fmt == "csv":
        values = [row[0] for row in rows_csv(r.out)[1:]]
    elif fmt == "json":
        values = [row["i"] for row in json.loads(r.out)]
    else:
        values = [ln.strip() for ln in r.out.splitlines()[2:-1]]
    assert values == [str(i) if fmt != "json" else i for i in range(7)]
    assert len(r.err_lines) == 1 and "7" in r.err and "--max-rows" in r.err


def test_no_note_when_rows_fit_exactly(capsys, store_path):
    r = cli(capsys, "sql", "SELECT * FROM range(7)", "--max-rows", "7", "--format", "csv", "--db", store_path)
    assert (r.code, r.err, len(rows_csv(r.out))) == (0, "", 8)


def test_max_rows_must_be_positive(capsys, store_path):
    assert_one_error(cli(capsys, "sql", "SELECT 1", "--max-rows", "0", "--db", store_path), "--max-rows")


def test_timeout_interrupts_a_long_query(store_path):
    # A subprocess, so that a broken time limit fails the test instead of hanging it.
    q = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"
    proc = subprocess.run(
        [sys.executable, "-m", "scprof.cli", "sql", q, "--timeout", "0.2", "--db", str(store_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("scprof: error: ")
    assert "time limit" in proc.stderr and "0.2" in proc.stderr


def test_sql_without_a_store(capsys, tmp_path):
    missing = tmp_path / "nope.duckdb"
    assert_one_error(cli(capsys, "sql", "SELECT 1", "--db", missing), str(missing))
    assert not missing.exists()


def test_sql_on_a_file_that_is_not_a_store(capsys, tmp_path):
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("not a database\n" * 100)
    assert_one_error(cli(capsys, "sql", "SELECT 1", "--db", bogus), str(bogus))
    assert bogus.read_text() == "not a database\n" * 100


@pytest.mark.parametrize("timeout", ["inf", "nan", "0", "-1", "1e9", "-inf"])
def test_timeout_must_be_finite_positive_and_sane(capsys, store_path, timeout):
    r = cli(capsys, "sql", "SELECT 1", f"--timeout={timeout}", "--db", store_path)
    assert_one_error(r, "--timeout", "3600")
    assert r.out == ""


@pytest.mark.parametrize("rows", ["99999999999999999999", "1000001", "-3"])
def test_max_rows_must_be_sane(capsys, store_path, rows):
    assert_one_error(
        cli(capsys, "sql", "SELECT 1", f"--max-rows={rows}", "--db", store_path), "--max-rows", "1,000,000"
    )


def test_string_functions_stay_within_the_memory_cap(capsys, store_path):
    # The example: ran 15-21 s and peaked at 4 GB under the 1 GB cap, then printed the length
    r = cli(capsys, "sql", "SELECT length(repeat('x', 2000000000))", "--timeout", "5", "--db", store_path)
    assert_one_error(r, "ran out of memory", "SCPROF_MEMORY_LIMIT")
    assert r.out == ""


def test_wide_results_are_capped_in_bytes(capsys, store_path):
    # 200 rows of 1 MB strings: 200 MB; the 64 MiB result cap keeps the first 67 (each 1,000,000 + 4 bytes)
    q = "SELECT repeat('x', 1000000) AS s FROM range(200)"
    r = cli(capsys, "sql", q, "--format", "csv", "--db", store_path)
    assert r.code == 0
    assert r.out.splitlines() == ["s"] + ["x" * 1_000_000] * (64 * 2**20 // 1_000_004)
    assert len(r.err_lines) == 1 and "capped at 64 MiB" in r.err and "LIMIT" in r.err

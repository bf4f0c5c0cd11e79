"""Names from the store cannot forge output lines or drive the terminal: control characters in
run names, finding text and error messages are printed as visible escapes (\\n, \\x1b); --json
keeps the exact values."""

from __future__ import annotations

import csv
import io
import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.findings import Finding
from profiler.synthetic import write_synthetic_trace
from profiler.units import escape_control, escape_lines
from scprof.formatting import render
from scprof.report import finding_lines
from tests.tracekit import PROPERTY, assert_one_error, cli

EVIL = "a\nb\x1b[2J\x9bc\x7f\u202e\r\x00"  # newline, clear screen, C1 CSI, DEL, RTL override, CR, NUL
SHOWN = "a\\nb\\x1b[2J\\x9bc\\x7f\\u202e\\r\\x00"


@pytest.mark.parametrize(
    "text, shown",
    [
        ("plain name_1", "plain name_1"),
        ("café 中文 ünïcode", "café 中文 ünïcode"),  # printable non-ASCII stays as it is
        ("tab\there", "tab\\there"),
        ("C:\\path", "C:\\path"),  # backslashes are not doubled: readable, and nothing to forge with
        ("\u2028\u2029", "\\u2028\\u2029"),
        (EVIL, SHOWN),
    ],
)
def test_escape_control_by_hand(text, shown):
    assert escape_control(text) == shown


def _terminal_active(ch: str) -> bool:
    return (
        unicodedata.category(ch) == "Cc"
        or ch in "\u2028\u2029"
        or 0x202A <= ord(ch) <= 0x202E
        or (0x2066 <= ord(ch) <= 0x2069)
    )


@PROPERTY
@given(st.text())
def test_escaped_text_has_nothing_a_terminal_acts_on(text):
    out = escape_control(text)
    assert not any(_terminal_active(c) for c in out)
    assert escape_control(out) == out  # idempotent: escaping twice changes nothing
    if not any(_terminal_active(c) for c in text):
        assert out == text


def test_escape_lines_keeps_line_breaks_only():
    assert escape_lines("one\x1b[1m\ntwo\r") == "one\\x1b[1m\ntwo\\r"


def test_finding_lines_escape_names_everywhere():
    f = Finding(
        rule="r",
        severity="warning",
        title=f"table {EVIL} overflows",
        metric="m\nx",
        value=1.0,
        unit="ps",
        recommendation=f"raise the limit of {EVIL}",
        evidence={"k": EVIL},
        entities={"tables": [EVIL]},
    )
    lines = finding_lines(f)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x9b" not in text and "\r" not in text
    assert len(lines) == 5 and all(SHOWN in line for line in (lines[0], lines[2], lines[3], lines[4]))


def test_sql_formats(capsys):
    import pyarrow as pa

    table = pa.table({"name": [EVIL, "ok"], "n": [1, 2]})
    text = render(table, "table")
    assert "\x1b" not in text and len(text.splitlines()) == 2 + 2 + 1  # header, rule, 2 rows, count
    assert SHOWN in text
    rows = list(csv.reader(io.StringIO(render(table, "csv"))))
    assert rows == [["name", "n"], [SHOWN, "1"], ["ok", "2"]] and render(table, "csv").count("\n") == 3
    assert json.loads(render(table, "json"))[0]["name"] == EVIL  # json keeps the exact value


@pytest.fixture
def evil_store(tmp_path):
    """A store holding two runs whose names hold control characters."""
    from scprof.cli import main

    for i, name in enumerate((EVIL, "second\x1b]0;pwned\x07")):
        write_synthetic_trace(str(tmp_path / f"s{i}.sctrace"), 2000, chips=2, scs=2, seed=i, run_name=name)
        assert main(["ingest", f"s{i}.sctrace", "--db", "evil.duckdb"]) == 0
    return "evil.duckdb"


def _clean(text: str) -> None:
    for c in "\x1b\x9b\x07\x00\r\x7f\u202e":
        assert c not in text, f"{c!r} printed raw"


def test_cli_prints_names_escaped(evil_store, capsys):
    runs = cli(capsys, "runs", "--db", evil_store)
    _clean(runs.out)
    assert len(runs.out.splitlines()) == 4 and SHOWN in runs.out  # header, rule, one line per run
    assert [r["name"] for r in json.loads(cli(capsys, "runs", "--json", "--db", evil_store).out)][0] == EVIL
    for argv in (["analyze", "1"], ["compare", "1", "2"]):
        res = cli(capsys, *argv, "--db", evil_store)
        assert res.code == 0, res.err
        _clean(res.out)
        assert "a\\nb\\x1b[2J" in res.out
    assert json.loads(cli(capsys, "analyze", "1", "--json", "--db", evil_store).out)["run"]["name"] == EVIL


def test_cli_ingest_line_and_error_line_are_escaped(tmp_path, capsys):
    write_synthetic_trace(str(tmp_path / "s.sctrace"), 500, chips=1, scs=1, run_name="x")
    res = cli(capsys, "ingest", "s.sctrace", "--name", EVIL, "--db", "e.duckdb")
    _clean(res.out)
    assert res.out.count("\n") == 1 and SHOWN in res.out
    err = cli(capsys, "analyze", "nope\x1b[31m\nscprof: error: forged", "--db", "e.duckdb")
    line = assert_one_error(err, "nope\\x1b[31m\\nscprof: error: forged")
    _clean(line)


def test_names_that_are_not_utf8_are_usage_errors(tmp_path, capsys):
    """A name from bytes that are not UTF-8 (argv surrogates) is refused, not an internal error."""
    write_synthetic_trace(str(tmp_path / "s.sctrace"), 500, chips=1, scs=1, run_name="x")
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert_one_error(cli(capsys, "ingest", "s.sctrace", "--name", bad, "--db", "e.duckdb"), "--name", "UTF-8")
    assert not (tmp_path / "e.duckdb").exists()
    assert main_ok(capsys, "ingest", "s.sctrace", "--db", "e.duckdb")
    assert_one_error(cli(capsys, "analyze", bad, "--db", "e.duckdb"), "RUN", "UTF-8")


def main_ok(capsys, *argv: str) -> bool:
    return cli(capsys, *argv).code == 0

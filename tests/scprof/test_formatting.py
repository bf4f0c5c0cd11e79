"""The CLI's three output formats of Arrow tables."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa

from scprof.formatting import render

TABLE = pa.table({"name": ["a,b", 'say "hi"', None], "n": [1, None, 3], "x": [0.5, 1e-9, None]})


def test_render_csv_quotes_and_nulls():
    assert list(csv.reader(io.StringIO(render(TABLE, "csv")))) == [
        ["name", "n", "x"],
        ["a,b", "1", "0.5"],
        ['say "hi"', "", "1e-09"],
        ["", "3", ""],
    ]


def test_render_json():
    assert json.loads(render(TABLE, "json")) == [
        {"name": "a,b", "n": 1, "x": 0.5},
        {"name": 'say "hi"', "n": None, "x": 1e-9},
        {"name": None, "n": 3, "x": None},
    ]


def test_render_table():
    lines = render(TABLE, "table").splitlines()
    assert lines[0].split() == ["name", "n", "x"]
    assert lines[4].split() == ["NULL", "3", "NULL"]
    assert lines[-1] == "(3 rows)"
    assert render(TABLE.slice(0, 1), "table").splitlines()[-1] == "(1 row)"

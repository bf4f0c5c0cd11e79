"""Every statement the product runs lives in the SQL tree (profiler/sql/): tools/sql_outside.py
finds no SQL text elsewhere in the product's Python, and it does find each kind of SQL text when
one is there."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.tracekit import REPO


def test_no_sql_outside_the_tree():
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "sql_outside.py")], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert json.loads(out[-1]) == {"sql_outside": 0, "by_file": {}}, out[:-1]


def test_sql_outside_finds_each_kind_of_sql_text(tmp_path):
    pkg = tmp_path / "profiler"
    pkg.mkdir()
    (pkg / "leaky.py").write_text(
        '''"""A docstring that says SELECT x FROM t is not SQL text."""
run = 3
A = "SELECT name FROM events"
B = f"DELETE FROM {run}"
C = "INSERT INTO t VALUES (1)"
D = "CREATE OR REPLACE TEMP VIEW v AS SELECT 1"
E = ("UPDATE runs " "SET name = 'x'")
'''
    )
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "sql_outside.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert json.loads(out[-1]) == {"sql_outside": 5, "by_file": {"profiler/leaky.py": 5}}
    assert [int(line.split(":")[1]) for line in out[:-1]] == [3, 4, 5, 6, 7]

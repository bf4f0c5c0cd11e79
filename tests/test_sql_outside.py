"""tools/sql_outside.py: the count of SQL text outside the SQL tree (a count to watch fall while SQL
moves into profiler/sql/, not yet a gate): its last line parses, and the files whose SQL has moved
report none."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.tracekit import REPO

MOVED = (
    "profiler/summaries.py",
    "profiler/store.py",
    "profiler/store_faults.py",
    "profiler/safe_output.py",
    "profiler/schema.py",
    "profiler/sqltree.py",
    "profiler/sql_guard.py",
)


def test_sql_outside_reports_a_count_and_none_in_moved_files():
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "sql_outside.py")], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    report = json.loads(out[-1])
    assert report["sql_outside"] == sum(report["by_file"].values()) == len(out) - 1
    assert all(line.split(":")[0] in report["by_file"] for line in out[:-1])
    assert {f: n for f, n in report["by_file"].items() if f in MOVED} == {}

"""The UI's SQL is the tree's (profiler/sql/ui/): its Python runs queries by name and holds no
statement of its own, but for the console's examples (text shown to users)."""

from __future__ import annotations

import ast
import re

from profiler import sqltree
from tests.tracekit import REPO

STATEMENT = re.compile(r"^\s*(SELECT|WITH|INSERT|DELETE|UPDATE|CREATE)\b.*\bFROM\b", re.S)
NAMED = re.compile(r"sqltree\.(?:query|execute)\(\s*[\w.]+,\s*\"([\w.]+)\"")


def ui_files():
    return sorted(p for p in (REPO / "ui").rglob("*.py"))


def test_the_ui_holds_no_sql_statement_but_the_console_examples():
    found = []
    for path in ui_files():
        tree = ast.parse(path.read_text())
        examples = {
            id(n)
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign) and any(getattr(t, "id", "") == "SQL_EXAMPLES" for t in a.targets)
            for n in ast.walk(a.value)
        }
        found += [
            f"{path.relative_to(REPO)}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and STATEMENT.match(n.value)
            if id(n) not in examples
        ]
    assert found == []


def test_every_query_the_ui_names_is_in_the_tree():
    names = {m for path in ui_files() for m in NAMED.findall(path.read_text())}
    assert len(names) > 40
    for name in names:
        assert sqltree.get(name).kind in ("query", "statement"), name

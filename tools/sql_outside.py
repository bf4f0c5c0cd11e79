"""SQL text outside the SQL tree: every string literal or f-string of the product that reads like SQL.

The goal of the SQL tree (profiler/sql/, profiler/sqltree.py) is that every statement the
product runs lives there. This scan reads the product packages' Python (their `_pb2` files left
out) with `ast` and lists each string literal and f-string (implicitly joined pieces as one; an
f-string's replacement fields written `{...}`) that holds SQL: SELECT ... FROM, INSERT INTO,
CREATE [TEMP] TABLE|VIEW|MACRO, DELETE FROM, UPDATE ... SET, DROP TABLE|VIEW|..., ALTER TABLE,
SET x =, COMMENT ON, ATTACH. Docstrings are not literals in expressions and are skipped.

ALLOWED names what stays on purpose: profiler/sql_guard.py's keyword lists (it refuses users'
statements by their keywords), the DDL generators from Python declarations (profiler/schema.py's
CREATE TABLE and COMMENT ON, the typed-field ALTER; profiler/sqltree.py's own CREATE and COMMENT
from a module's tags, and the loader's patterns), and text shown to users (docs/schema.md's
example, a `help=` text, an exception's message).

Prints `file:line: text` per hit, then one JSON line {"sql_outside": N, "by_file": {...}};
exits 0. tests/test_sql_outside.py holds the product to 0.

Usage
    python tools/sql_outside.py [ROOT]     # ROOT: the repository (default: this one)
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("profiler", "analyzers", "exporters", "ui", "scprof", "whatif", "sim_backend")

SQL = re.compile(
    r"\bSELECT\b[\s\S]*?\bFROM\b"
    r"|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b"
    r"|\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(?:TABLE|VIEW|MACRO)\b"
    r"|\bDELETE\s+FROM\b"
    r"|\bUPDATE\s+\w+\s+SET\b"
    r"|\bDROP\s+(?:TABLE|VIEW|MACRO|FUNCTION|INDEX|SCHEMA|SEQUENCE|TYPE)\b"
    r"|\bALTER\s+TABLE\b"
    r"|(?:^|;)\s*SET\s+\w+\s*="
    r"|\bCOMMENT\s+ON\b"
    r"|\bATTACH\b"
)

# (file, enclosing function/class or module-level name): why it stays out of the tree
ALLOWED: dict[tuple[str, str], str] = {
    ("profiler/schema.py", "table_ddl"): "DDL generator from TABLES (moves to schema/raw.sql later)",
    ("profiler/schema.py", "add_column_ddl"): "DDL generator from TYPED_FIELDS (moves with table_ddl)",
    ("profiler/schema.py", "markdown"): "docs/schema.md's text: an example query for users",
    ("profiler/sqltree.py", "Tree.ddl"): "the tree's CREATE and COMMENT ON from a module's tags",
    ("profiler/sqltree.py", "_CREATE_VIEW"): "the loader's pattern of a view's statement",
    ("profiler/sqltree.py", "_CREATE_MACRO"): "the loader's pattern of a macro's statement",
    ("profiler/sqltree.py", "_READ"): "the loader's pattern of a read",
}
# files whose keyword lists name SQL statements to refuse them (module-level names)
KEYWORD_FILES = ("profiler/sql_guard.py",)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of the module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant | ast.JoinedStr):
                out.add(id(body[0].value))
    return out


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)
    return None


class _Scan(ast.NodeVisitor):
    def __init__(self, rel: str, docs: set[int]) -> None:
        self.rel, self.docs = rel, docs
        self.scope: list[str] = []  # enclosing classes and functions
        self.target = ""  # the module-level name being assigned
        self.user_text = 0  # inside a raise, or a help= keyword
        self.hits: list[tuple[int, str]] = []

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if self.scope or not names:
            self.generic_visit(node)
            return
        self.target = names[0]
        self.generic_visit(node)
        self.target = ""

    visit_Assign = visit_AnnAssign = _assign

    def visit_Raise(self, node: ast.Raise) -> None:
        self.user_text += 1
        self.generic_visit(node)
        self.user_text -= 1

    def visit_keyword(self, node: ast.keyword) -> None:
        shown = node.arg in ("help", "description", "epilog")
        self.user_text += shown
        self.generic_visit(node)
        self.user_text -= shown

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._literal(node)  # its pieces are not literals of their own

    def visit_Constant(self, node: ast.Constant) -> None:
        self._literal(node)

    def _literal(self, node: ast.Constant | ast.JoinedStr) -> None:
        text = _text(node)
        if text is None or id(node) in self.docs or self.user_text or not SQL.search(text):
            return
        where = ".".join(self.scope) or self.target
        if (self.rel, where) in ALLOWED or (self.rel, where.split(".")[0]) in ALLOWED:
            return
        if self.rel in KEYWORD_FILES and not self.scope:
            return
        self.hits.append((node.lineno, text))


def scan(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, text) of every SQL-like literal outside the tree, by file and line."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if path.stem.endswith("_pb2") or rel.startswith("profiler/sql/"):
                continue
            tree = ast.parse(path.read_text(), rel)
            s = _Scan(rel, _docstrings(tree))
            s.visit(tree)
            out += [(rel, line, text) for line, text in s.hits]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(REPO), help="the repository (default: this one)")
    args = ap.parse_args(argv)
    hits = scan(Path(args.root))
    by_file: dict[str, int] = {}
    for rel, line, text in hits:
        shown = " ".join(text.split())
        print(f"{rel}:{line}: {shown[:160]}{'...' if len(shown) > 160 else ''}")
        by_file[rel] = by_file.get(rel, 0) + 1
    print(json.dumps({"sql_outside": len(hits), "by_file": by_file}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

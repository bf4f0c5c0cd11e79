"""A hint for a user's query that named a column or table the store does not have: the views to use.

    SELECT name FROM events  ->  "events stores name_id; the view slices has name"
    SELECT * FROM slice      ->  "views with close names: slices"

Built from the store's own catalog (its views, what each reads, their columns), never from a
list kept by hand: a view added to the SQL tree is named as soon as stores hold it.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from profiler import sqltree

_Q = "store.hints."
_MISSING_COLUMN = (
    re.compile(r'Referenced column "([^"]+)" not found'),
    re.compile(r'does not have a column named "([^"]+)"'),
)
_MISSING_TABLE = re.compile(r"Table with name ([^\s!]+) does not exist")
_CREATE_VIEW = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+.*?\s+AS\s+", re.IGNORECASE | re.DOTALL)
MAX_NAMED = 3  # views named at most in one hint


def hint(con: Any, sql: str, error: str) -> str | None:
    """The hint for `error` (DuckDB's message) raised by the user's `sql`, or None when there is none.

    A missing column `c` of table `t`: the views that expose `c`, those reading `t` first (and `t`'s
    column `c_id` when it stores the name's id). A missing table: the views with close names.
    """
    import duckdb

    try:
        return _hint(con, sql, error)
    except (duckdb.Error, RuntimeError, ValueError):  # a catalog that cannot be read: no hint
        return None


def _hint(con: Any, sql: str, error: str) -> str | None:
    columns: dict[str, list[str]] = {}
    for r in sqltree.query(con, _Q + "columns").to_pylist():
        columns.setdefault(r["table_name"], []).append(r["column_name"])
    views = {r["view_name"]: r["sql"] for r in sqltree.query(con, _Q + "views").to_pylist()}
    table = _MISSING_TABLE.search(error)
    if table:
        close = difflib.get_close_matches(table.group(1).strip('"').lower(), list(views), n=MAX_NAMED, cutoff=0.6)
        return f"views with close names: {', '.join(close)}" if close else None
    column = next((m.group(1) for p in _MISSING_COLUMN if (m := p.search(error))), None)
    if column is None:
        return None
    having = [v for v in views if column in columns.get(v, ())]
    if not having:
        return None
    read = [t for t in _tables_of(con, sql) if t in columns]
    direct = {v: set(_tables_of(con, text)) for v, text in views.items()}
    reads = _reads(direct)
    # the views over the query's tables first, the nearest (reading fewest tables) first among them
    named = sorted(having, key=lambda v: (not reads[v] & set(read), not direct[v] & set(read), len(reads[v]), v))
    named = named[:MAX_NAMED]
    which = f"the view {named[0]} has" if len(named) == 1 else f"the views {', '.join(named)} have"
    stored = [f"{t} stores {column}_id" for t in read if f"{column}_id" in columns.get(t, ())]
    return "; ".join([*stored, f"{which} {column}"])


def _tables_of(con: Any, sql: str) -> list[str]:
    """The tables and views a SELECT (or a view's CREATE VIEW) reads, by DuckDB's parser, in name
    order; none if it does not parse. Parsed only: the query may name what the store lacks."""
    select = _CREATE_VIEW.sub("", sql, count=1)
    tree = json.loads(sqltree.query(con, _Q + "parse", sql=select).column("tree")[0].as_py())
    if tree.get("error"):
        return []
    found: set[str] = set()
    todo: list[Any] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
                found.add(node["table_name"])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return sorted(found)


def _reads(direct: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every table or view each view reads, directly or through other views (`direct`: what each names)."""
    closed: dict[str, set[str]] = {}
    for v in direct:
        seen, todo = set(), [v]
        while todo:
            for t in direct.get(todo.pop(), ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        closed[v] = seen
    return closed

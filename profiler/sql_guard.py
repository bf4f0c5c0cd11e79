"""Read-only SQL for users: one SELECT-like statement, capped rows, a time limit.

Defence in depth: the store is opened read-only with file-system access
disabled (profiler/store.py), and statements are checked by DuckDB's own parser
before they run, so writes, ATTACH, COPY, INSTALL/LOAD, PRAGMA and SET never
reach the engine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from profiler.errors import ScprofError
from profiler.store import Store

ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 30.0


class QueryError(ScprofError):
    """A user query that is refused or fails."""


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool  # more rows existed than max_rows
    max_rows: int


def check_read_only(sql: str) -> str:
    """The single read-only statement in `sql`, or QueryError saying why not."""
    try:
        statements = duckdb.connect(":memory:").extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"query: {_one_line(e)}") from None
    if len(statements) != 1:
        raise QueryError(f"query: give exactly one statement (got {len(statements)})")
    stmt = statements[0]
    if stmt.type not in ALLOWED:
        kind = str(stmt.type).split(".")[-1]
        kind = "INSTALL/LOAD" if kind == "LOAD" else kind
        raise QueryError(f"query: only read-only SELECT queries are allowed, not {kind}")
    return sql


def run_query(
    store: Store, sql: str, max_rows: int = DEFAULT_MAX_ROWS, timeout_s: float = DEFAULT_TIMEOUT_S
) -> QueryResult:
    """Run a user's query on a read-only store with a row cap and a time limit."""
    if not store.read_only:
        raise ValueError("run_query needs a store opened with read_only=True")
    check_read_only(sql)
    timer = threading.Timer(timeout_s, store.con.interrupt)
    timer.start()
    try:
        reader = store.con.sql(sql).to_arrow_reader(batch_size=min(max_rows + 1, 100_000))
        batches, rows = [], 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if rows > max_rows:
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException:
        raise QueryError(f"query: stopped after the {timeout_s:g} s time limit") from None
    except duckdb.Error as e:
        raise QueryError(f"query: {_one_line(e)}") from None
    finally:
        timer.cancel()
    return QueryResult(table.slice(0, max_rows), rows > max_rows, max_rows)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())

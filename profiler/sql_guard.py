"""Read-only SQL for users: one query statement, a time limit, a memory cap, results capped in rows and bytes.

Defences, outermost first:
- `check_read_only` is an allow-list on DuckDB's own parse: exactly one statement, of type
  SELECT (which covers WITH, VALUES, set operations, UNPIVOT, PIVOT with an IN list, SUMMARIZE,
  DESCRIBE, SHOW, FROM-first), or EXPLAIN [ANALYZE] of one such statement. Everything else is
  refused: writes, DDL, ATTACH, COPY, INSTALL/LOAD, PRAGMA, SET, CALL, UPDATE EXTENSIONS, PIVOT
  without an IN list (a MULTI statement that creates a type), and statement types this code does
  not know (a newer DuckDB's).
- The store is opened read-only with file-system access off and its configuration locked
  (profiler/store.py).
- `run_query` runs the statement in a worker process of its own (profiler/sql_worker.py; in a
  long-lived process, started ahead of the query: keep_spare_worker): DuckDB's
  interrupt at the time limit, then a kill KILL_GRACE_S later for functions that never look at it
  (`repeat('x', 300000000)` spends 2.8 s in one call), and an RLIMIT_DATA of the memory cap, since
  DuckDB's memory_limit "only applies to the buffer manager" (DuckDB docs, Operations manual:
  Limits) and string functions allocate outside it (`repeat('x', 2000000000)` grew the process to
  4 GB under a 1 GB memory_limit). Past the cap an allocation fails and the query ends with a
  one-line out-of-memory error.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from profiler.errors import ScprofError, one_line
from profiler.store import Store, read_only_memory_limit

DEFAULT_MAX_ROWS = 10_000
MAX_ROWS = 1_000_000  # --max-rows at most
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 3600.0  # --timeout at most
DEFAULT_MAX_BYTES = 64 * 2**20  # result cap in Arrow bytes
MAX_QUERY_CHARS = 100_000  # longer query texts are refused before parsing
KILL_GRACE_S = 1.0  # how long past its time limit a worker may take to stop by DuckDB's interrupt
START_LIMIT_S = 60.0  # how long a worker may take to start (imports, opening the store)
BUFFER_SHARE = 2 / 3  # of the memory cap, for DuckDB's buffer pool; the rest for what it does not count
MAX_CONCURRENT_QUERIES = 2  # workers of one process at a time (each may use the memory cap)

_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_QUERIES)
_UNITS = {
    "": None,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "k": 1e3,
    "kb": 1e3,
    "kib": 2**10,
    "m": 1e6,
    "mb": 1e6,
    "mib": 2**20,
    "g": 1e9,
    "gb": 1e9,
    "gib": 2**30,
    "t": 1e12,
    "tb": 1e12,
    "tib": 2**40,
}


class QueryError(ScprofError):
    """A user query that is refused or fails: one line (str), and `detail`, the message with DuckDB's
    line breaks kept (its `LINE 3: ...` and the caret under the place it points at)."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail or message


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool  # more rows existed than were returned
    max_rows: int
    max_bytes: int = DEFAULT_MAX_BYTES
    capped_by: str | None = None  # "rows" or "bytes" when truncated


def check_read_only(sql: str) -> str:
    """The single read-only statement in `sql`, or QueryError saying why not."""
    if not isinstance(sql, str):
        raise QueryError(f"query: expected SQL text, got {type(sql).__name__}")
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryError(f"query: {len(sql):,} characters, more than the {MAX_QUERY_CHARS:,} allowed")
    kind = _statement_kind(sql)
    if kind == "EXPLAIN":
        inner = _explained_kind(sql)
        if inner != "SELECT":
            raise QueryError(f"query: EXPLAIN is allowed only of a read-only SELECT query, not of {inner}")
    elif kind != "SELECT":
        raise QueryError(f"query: only read-only SELECT queries are allowed, not {kind}")
    return sql


def check_limits(max_rows: object, timeout_s: object, max_bytes: object = DEFAULT_MAX_BYTES) -> None:
    """QueryError unless the row cap, time limit and byte cap are sane (named as the CLI names them)."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= MAX_ROWS:
        raise QueryError(f"--max-rows: must be a whole number from 1 to {MAX_ROWS:,}, got {max_rows}")
    try:
        t = float(timeout_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(timeout_s, bool) or not (math.isfinite(t) and 0 < t <= MAX_TIMEOUT_S):
        raise QueryError(f"--timeout: must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds, got {timeout_s}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise QueryError(f"result byte cap: must be a positive whole number, got {max_bytes}")


def memory_cap_bytes(text: str | None = None) -> int:
    """The memory cap of one query, in bytes: SCPROF_MEMORY_LIMIT (DuckDB's units: 1GB = 1000**3,
    1GiB = 1024**3, or a percentage of RAM), else profiler.store's default."""
    text = read_only_memory_limit() if text is None else text
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([a-zA-Z%]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m and unit == "%":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        value = float(m.group(1)) / 100 * total
    elif m and _UNITS.get(unit):
        value = float(m.group(1)) * _UNITS[unit]  # type: ignore[operator]
    else:
        raise QueryError(f"SCPROF_MEMORY_LIMIT: {text!r} is not a memory size such as '1GB' or '512MiB'")
    if not 16 * 2**20 <= value <= 2**50:
        raise QueryError(f"SCPROF_MEMORY_LIMIT: {text!r} is outside 16 MiB .. 1 PiB")
    return int(value)


def run_query(
    store: Store,
    sql: str,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> QueryResult:
    """Run a user's query against a read-only store's file in a worker process, within the limits."""
    if not store.read_only:
        raise ValueError("run_query needs a store opened with read_only=True")
    if store.path == ":memory:":
        raise ValueError("run_query needs a store file (its worker process opens the file)")
    check_limits(max_rows, timeout_s, max_bytes)
    check_read_only(sql)
    cap = memory_cap_bytes()
    request = {
        "path": os.path.abspath(store.path),
        "sql": sql,
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "timeout_s": float(timeout_s),
        "cap_bytes": cap,
        "cap_text": read_only_memory_limit(),
        "buffer_limit": f"{int(cap * BUFFER_SHARE)}B",
    }
    if not _SLOTS.acquire(timeout=float(timeout_s)):
        raise QueryError(f"query: {MAX_CONCURRENT_QUERIES} other queries are running; try again when one ends")
    try:
        meta, ipc = _run_worker(request, float(timeout_s), max_bytes + max(16 * 2**20, max_bytes // 4))
    finally:
        _SLOTS.release()
    if "error" in meta:
        raise QueryError(meta["error"], meta.get("detail"))
    try:
        table = pa.ipc.open_stream(ipc).read_all()
    except pa.ArrowException as e:
        raise QueryError(f"query: the query process sent a result that cannot be read: {one_line(e)}") from None
    capped_by = meta.get("capped_by")
    return QueryResult(table, capped_by is not None, max_rows, max_bytes, capped_by)


class Worker:
    """A started profiler/sql_worker.py process, its modules loading, waiting for its one request
    on stdin; its stderr goes to a temporary file (read when it dies without an answer)."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = "import sys; sys.path.insert(0, sys.argv[1]); from profiler.sql_worker import main; main()"
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process: close()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", boot, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            close_fds=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Kill the process if it still runs, reap it, and drop its pipes and stderr file."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.errors):
            if f is not None:
                f.close()


_spare_lock = threading.Lock()
_spares: list[Worker] = []  # oldest first
_keep_spares = False
# Workers kept started ahead: as many as may run at once, so that two queries sent back to back
# (or at once) each find one; each waits on stdin, its modules loaded (about 75 MB each).
SPARE_WORKERS = MAX_CONCURRENT_QUERIES


def keep_spare_worker(on: bool = True) -> None:
    """Keep SPARE_WORKERS workers started ahead for the next queries (a long-lived process such
    as the UI server): a query then skips the worker's start-up (Python and DuckDB imports, about
    0.3-0.4 s); each query still runs in a fresh process of its own, with the same limits."""
    global _keep_spares
    _keep_spares = on
    if on:
        _start_spare()
    else:
        _drop_spare()


def _take_worker() -> Worker:
    """The oldest live spare worker, else a newly started one (dead spares are reaped). Taken
    under the lock, so that queries sent at once never take the same one nor miss a live one."""
    with _spare_lock:
        alive = [(w, w.alive()) for w in _spares]
        live = [w for w, ok in alive if ok]
        _spares[:] = live[1:]
    for w, ok in alive:
        if not ok:
            w.close()
    return live[0] if live else Worker()


def _start_spare() -> None:
    """Top the spare workers up to SPARE_WORKERS, when spares are kept."""
    if not _keep_spares:
        return
    with _spare_lock:
        while len(_spares) < SPARE_WORKERS:
            _spares.append(Worker())


@atexit.register
def _drop_spare() -> None:
    with _spare_lock:
        workers, _spares[:] = list(_spares), []
    for worker in workers:
        worker.close()


def _run_worker(request: dict, timeout_s: float, answer_limit_bytes: int) -> tuple[dict, bytes]:
    """Give `request` to a worker process (the spare, or one started now) and read its answer
    within the time limit: (meta, Arrow IPC stream). A worker past its limit (plus KILL_GRACE_S)
    is killed. When spares are kept, the next one starts as this one is taken (its start-up
    overlaps this query), and dead ones are replaced after it."""
    worker = _take_worker()
    _start_spare()
    proc = worker.proc
    try:
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            answer, started = _read_answer(proc, timeout_s, answer_limit_bytes)
            code = proc.wait()
        except BrokenPipeError:
            answer, started, code = b"", False, proc.wait()
        newline = answer.find(b"\n")
        if newline < 0:  # no answer: the worker died (e.g. killed by the system for memory)
            worker.errors.seek(0)
            detail = one_line(worker.errors.read()[-2000:].decode(errors="replace")) or "no message"
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            phase = "while running the query" if started else "while starting"
            raise QueryError(f"query: the query process ended {phase} without an answer ({how}; {detail})")
    finally:
        worker.close()
        _start_spare()
    try:
        meta = json.loads(answer[:newline])
    except ValueError:
        raise QueryError("query: the query process sent an answer that cannot be read") from None
    return meta, answer[newline + 1 :]


def _read_answer(proc: subprocess.Popen, timeout_s: float, limit_bytes: int) -> tuple[bytes, bool]:
    """The worker's whole output, and whether it said it started. Its first byte is b"R" once the
    store is open: the time limit counts from then."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    buf = bytearray()
    started = False
    deadline = time.monotonic() + START_LIMIT_S
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                if started:
                    raise QueryError(f"query: stopped after the {timeout_s:g} s time limit")
                raise QueryError(f"query: the query process did not start within {START_LIMIT_S:g} s")
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(buf), started
            buf += chunk
            if not started and buf[:1] == b"R":
                started = True
                del buf[:1]
                deadline = time.monotonic() + timeout_s + KILL_GRACE_S
            if len(buf) > limit_bytes:
                proc.kill()
                raise QueryError(f"query: the result is larger than the {limit_bytes:,} bytes allowed")


def _statement_kind(sql: str) -> str:
    """The type of the one statement in `sql` (QueryError if none, several, or unparseable)."""
    try:
        with duckdb.connect(":memory:") as con:
            statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"query: {one_line(e)}", f"query: {str(e).strip()}") from None
    except (ValueError, TypeError, RuntimeError) as e:  # e.g. a NUL character
        raise QueryError(f"query: cannot parse it ({one_line(e)})") from None
    if len(statements) != 1:
        raise QueryError(f"query: give exactly one statement (got {len(statements)})")
    return _kind(statements[0])


def _kind(statement: object) -> str:
    """A statement's type as a word; types unknown to this DuckDB's Python enum included."""
    try:
        name = statement.type.name  # type: ignore[attr-defined]
    except (ValueError, AttributeError):  # "29 is not a valid StatementType" (UPDATE EXTENSIONS)
        return "a statement of a type this scprof does not know"
    return {"LOAD": "INSTALL/LOAD", "MULTI": "a multi-step statement (PIVOT needs an IN list here)"}.get(name, name)


def _explained_kind(sql: str) -> str:
    """What an EXPLAIN [ANALYZE] [(options)] statement explains: 'SELECT' only when every reading
    of the text after the EXPLAIN prefix is one read-only query (re-parsed by DuckDB)."""
    try:
        starts = [s for s, _ in duckdb.tokenize(sql)]
        kinds = [str(k).rsplit(".", 1)[-1] for _, k in duckdb.tokenize(sql)]
    except (duckdb.Error, ValueError, RuntimeError):
        return "a statement that cannot be tokenised"
    ends = starts[1:] + [len(sql)]
    tokens = [(s, sql[s:e].strip().upper()) for s, e, k in zip(starts, ends, kinds, strict=True) if k != "comment"]
    if not tokens or tokens[0][1] != "EXPLAIN" or len(tokens) < 2:
        return "a statement this guard cannot read"
    i = 2 if tokens[1][1] in ("ANALYZE", "ANALYSE") else 1
    if i >= len(tokens):
        return "nothing"
    candidates = [tokens[i][0]]
    if tokens[i][1] == "(":  # either an option list or a parenthesised query: try both
        depth = 0
        for j in range(i, len(tokens)):
            depth += {"(": 1, ")": -1}.get(tokens[j][1], 0)
            if depth == 0:
                if j + 1 < len(tokens):
                    candidates.append(tokens[j + 1][0])
                break
    readings = []
    for start in candidates:
        try:
            readings.append(_statement_kind(sql[start:]))
        except QueryError:
            continue
    if not readings:
        return "a statement this guard cannot read"
    return next((r for r in readings if r != "SELECT"), "SELECT")

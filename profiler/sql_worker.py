"""The process that runs one user query for profiler/sql_guard.py, so that its limits can be enforced.

It reads a JSON request on stdin, opens the store read-only, limits its own data segment to the
memory cap (RLIMIT_DATA: every allocation, not only DuckDB's buffer pool), writes b"R" (the
parent's time limit starts), interrupts DuckDB at the time limit, and answers on stdout with one
JSON line ({"error": ...} or {"capped_by": ...}) followed by the rows as an Arrow IPC stream,
capped in rows and bytes. The parent kills it if it does not answer in time.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, BinaryIO

from profiler.errors import one_line

DATA_STATUS = "/proc/self/status"


def main() -> None:
    out = sys.stdout.buffer
    try:
        # Loaded before the request is read: a worker started ahead (sql_guard.keep_spare_worker)
        # has them ready when its query comes. The store reads SCPROF_MEMORY_LIMIT when it opens.
        import duckdb  # noqa: F401
        import pyarrow  # noqa: F401

        from profiler.store import Store  # noqa: F401

        request = json.loads(sys.stdin.buffer.read())
        meta, schema, batches = run(request, out)
        _answer(out, meta, schema, batches)
    except BaseException as e:  # noqa: BLE001 - the parent turns this line into the user's error
        _answer(out, {"error": f"query: failed in the query process: {type(e).__name__}: {one_line(e)}"})
    os._exit(0)  # at once: DuckDB's threads may still be inside a function that ignored the interrupt


def run(request: dict[str, Any], out: BinaryIO) -> tuple[dict[str, Any], Any, list]:
    """(answer meta, schema, record batches) for one request."""
    os.environ["SCPROF_MEMORY_LIMIT"] = request["buffer_limit"]  # DuckDB's share of the cap
    import duckdb
    import pyarrow as pa

    from profiler import sql_hints, store_faults
    from profiler.errors import ScprofError
    from profiler.store import Store

    try:
        store = Store.open(request["path"], read_only=True)
    except ScprofError as e:
        return {"error": str(e)}, None, []
    limit_data(request["cap_bytes"])
    out.write(b"R")
    out.flush()
    timeout_s = request["timeout_s"]
    timer = threading.Timer(timeout_s, store.con.interrupt)
    timer.daemon = True
    timer.start()
    memory = (
        f"query: ran out of memory: one query may use {request['cap_text']} (SCPROF_MEMORY_LIMIT); "
        "add LIMIT, aggregate, or select fewer or shorter columns"
    )
    try:
        schema, batches, capped_by = fetch(store.con, request["sql"], request["max_rows"], request["max_bytes"])
    except duckdb.InterruptException:
        return {"error": f"query: stopped after the {timeout_s:g} s time limit"}, None, []
    except (duckdb.OutOfMemoryException, MemoryError):
        return {"error": memory}, None, []
    except (duckdb.Error, pa.ArrowException, OSError) as e:
        # DuckDB's Arrow conversion reports a failed allocation as OSError "Out of Memory Error: ..."
        if "out of memory" in str(e).lower():
            return {"error": memory}, None, []
        fault = store_faults.translate(e, request["path"])  # a damaged store met by the query
        if fault is not None:
            return {"error": str(fault)}, None, []
        # the one line for the CLI; DuckDB's own text too, whose line breaks place its caret (the UI shows it);
        # both end with the views to use where the query named a column or table the store lacks
        found = sql_hints.hint(store.con, request["sql"], str(e)) if isinstance(e, duckdb.Error) else None
        tail = ("; hint: " + found, "\nhint: " + found) if found else ("", "")
        return {"error": f"query: {one_line(e)}{tail[0]}", "detail": f"query: {str(e).strip()}{tail[1]}"}, None, []
    except ResultTooWide as e:
        return {"error": str(e)}, None, []
    finally:
        timer.cancel()
    return {"capped_by": capped_by}, schema, batches


class ResultTooWide(Exception):
    """One row alone is larger than the byte cap."""


def fetch(con: Any, sql: str, max_rows: int, max_bytes: int) -> tuple[Any, list, str | None]:
    """(schema, batches, capped_by) of a query's first rows within max_rows and max_bytes (Arrow
    bytes); capped_by is "rows" or "bytes" when more rows exist, None when all are there."""
    reader = con.sql(sql).to_arrow_reader(batch_size=min(max_rows + 1, 2048))
    batches: list = []
    rows = size = 0
    for batch in reader:
        if batch.num_rows == 0:
            continue
        if rows == max_rows:
            return reader.schema, batches, "rows"
        capped_by = None
        if rows + batch.num_rows > max_rows:
            batch, capped_by = batch.slice(0, max_rows - rows), "rows"
        if size + batch.nbytes > max_bytes:
            keep = _rows_within(batch, max_bytes - size)
            if rows + keep == 0:
                raise ResultTooWide(
                    f"query: its first row alone holds {batch.slice(0, 1).nbytes:,} bytes, more than the "
                    f"result cap of {max_bytes:,}; select fewer or shorter columns (e.g. left(s, 1000))"
                )
            batches.append(batch.slice(0, keep))
            return reader.schema, batches, "bytes"
        batches.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if capped_by:
            return reader.schema, batches, capped_by
    return reader.schema, batches, None


def _rows_within(batch: Any, budget_bytes: int) -> int:
    """The most leading rows of `batch` whose Arrow size fits in budget_bytes (bisection)."""
    lo, hi = 0, batch.num_rows
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if batch.slice(0, mid).nbytes <= budget_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def limit_data(cap_bytes: int) -> None:
    """Cap this process's data segment (heap and anonymous mappings) at what it uses now plus cap_bytes.

    Linux counts every private writable mapping against RLIMIT_DATA (since 4.7), so allocations
    DuckDB's memory_limit does not see fail too. Elsewhere (no /proc) only the time limit holds.
    """
    try:
        import resource

        with open(DATA_STATUS) as f:
            used_kib = next(int(line.split()[1]) for line in f if line.startswith("VmData:"))
    except (ImportError, OSError, StopIteration, ValueError):
        return
    soft = used_kib * 1024 + cap_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _answer(out: BinaryIO, meta: dict[str, Any], schema: Any = None, batches: list | None = None) -> None:
    try:
        out.write(json.dumps(meta).encode() + b"\n")
        if schema is not None:
            import pyarrow as pa

            with pa.ipc.new_stream(out, schema) as writer:
                for batch in batches or []:
                    writer.write_batch(batch)
        out.flush()
    except (BrokenPipeError, OSError):
        pass  # the parent has gone (it killed us or was interrupted)


if __name__ == "__main__":
    main()

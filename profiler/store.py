"""The DuckDB store: one file, many runs. A thin API over a DuckDB connection.

    with Store.open("scprof.duckdb") as store:
        table = store.query("SELECT name, count(*) FROM slices WHERE run_id = ? GROUP BY 1", [1])

Writers open it read-write (schema created or migrated on open; an open that finds it current
writes nothing); readers (`scprof sql`, the UI) open it read-only with file-system access
disabled. A damaged store file, and a write the disk refuses, are one StoreError line naming the
store (profiler/store_faults.py). The statements an open runs are in the SQL tree: store.meta,
store.connection, store.migrate, store.runs and store.temp_tables (profiler/sql/store/); the
tables' DDL comes from profiler/schema.py's declarations.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from profiler import sqltree, store_faults
from profiler.errors import StoreError
from profiler.schema import SCHEMA_VERSION, add_column_ddl, ddl, stdlib_ddl
from profiler.trace_fields import TYPED_FIELDS, TypedField

DEFAULT_PATH = "scprof.duckdb"
# DuckDB memory_limit of read-only connections (queries, UI, exports); $SCPROF_MEMORY_LIMIT overrides.
DEFAULT_MEMORY_LIMIT = "1GB"


def _add_summaries(con: duckdb.DuckDBPyConnection) -> None:
    """Version 1 -> 2: create the summary tables and build them for every run already stored."""
    from profiler.schema import SUMMARY_TABLES, table_ddl
    from profiler.summaries import build_all

    for stmt in [s for t in SUMMARY_TABLES for s in table_ddl(t)] + stdlib_ddl():  # what build_all fills
        con.execute(stmt)
    build_all(con)


def _add_stdlib(con: duckdb.DuckDBPyConnection) -> None:
    """Version 2 -> 3: the analysis standard library (views, recreated on every open, and the
    materialized chip_steps) and the summary table it reads, built for every run already stored."""
    from profiler.schema import table, table_ddl
    from profiler.summaries import build_step_event_extents

    for stmt in table_ddl(table("step_event_extents")) + stdlib_ddl():
        con.execute(stmt)
    build_step_event_extents(con)


def missing_typed_columns(con: duckdb.DuckDBPyConnection) -> list[TypedField]:
    """Typed fields (profiler/trace_fields.py) the store's events table has no column for."""
    have = {r[0] for r in sqltree.execute(con, "store.meta.events_columns").fetchall()}
    return [f for f in TYPED_FIELDS if have and f.column not in have]


# MIGRATIONS[v] turns a store of schema version v into version v + 1.
def _add_whatif(con: duckdb.DuckDBPyConnection) -> None:
    """Version 4 adds the whatif_trials table, which the DDL run after the migrations creates."""


def _add_tile_sums(con: duckdb.DuckDBPyConnection) -> None:
    """Version 4 -> 5: the trace viewer's tile pyramid base (tile_sums), built for every run already
    stored, in place of timeline_bins and timeline_long (which only the UI read)."""
    from profiler.schema import table, table_ddl

    sqltree.execute(con, "store.migrate.drop_timeline_bins")
    sqltree.execute(con, "store.migrate.drop_timeline_long")
    for stmt in table_ddl(table("tile_sums")):
        con.execute(stmt)
    # a store migrated from version 1 got them with its other summaries
    sqltree.execute(con, "store.migrate.clear_tile_sums")
    sqltree.install(con, ["derive.span"], temp=True, kinds=("macro",))
    sqltree.execute(con, "derive.span.fill_all_tile_sums")


def _add_reports(con: duckdb.DuckDBPyConnection) -> None:
    """Version 6 adds analysis_reports and analysis_report_tables, which the DDL run after the
    migrations creates (empty: runs stored before are analysed when asked for)."""


def _add_xspace_kept(con: duckdb.DuckDBPyConnection) -> None:
    """Version 7 adds xspace_files and xspace_events, which the DDL run after the migrations creates
    (empty: captures imported before keep no XSpace; their export is written from the store's rows)."""


def _add_analysis_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Version 8 replaces analysis_reports and analysis_report_tables (each run's report as JSON and
    Arrow blobs) by the analysis tables run_analysis, run_figures, run_findings, run_notes and
    run_step_split, which the DDL run after the migrations creates (empty: every run is analysed
    again when read, and stored so by the next writer: analyzers/materialize.py)."""
    sqltree.execute(con, "store.migrate.drop_analysis_reports")
    sqltree.execute(con, "store.migrate.drop_analysis_report_tables")


MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _add_summaries,
    2: _add_stdlib,
    3: _add_whatif,
    4: _add_tile_sums,
    5: _add_reports,
    6: _add_xspace_kept,
    7: _add_analysis_tables,
}


def _temp_stdlib(con: duckdb.DuckDBPyConnection) -> None:
    """The analysis standard library on one read-only connection to a version 2 store, as TEMP
    views (nothing written): step_event_extents, the summary table it reads, computed from the
    events on each query (what the migration to version 3 stores once)."""
    sqltree.install(con, ["derive.steps"], temp=True, kinds=("macro",))
    sqltree.execute(con, "derive.steps.temp_step_event_extents")
    for stmt in stdlib_ddl(temp=True):
        con.execute(stmt)


# The standard library's SQL the store's views and materialized tables were made with (scprof_meta):
# when the SQL changes (a new step rule), a writing open recreates the views and refills the
# materialized ones for every run, and a read-only open reads through TEMP views of the new SQL.
STDLIB_DIGEST_KEY = "stdlib_sha1"


def stdlib_digest() -> str:
    """SHA-1 of the standard library's view names and SQL."""
    from profiler.stdlib import STDLIB

    h = hashlib.sha1()
    for v in STDLIB:
        h.update(f"{v.name}\n{v.sql}\n".encode())
    return h.hexdigest()


# SHA-1 of all the DDL a writing open runs (tables, views, comments), kept in scprof_meta: when it
# and everything else is current, a writing open writes nothing.
DDL_DIGEST_KEY = "ddl_sha1"


def ddl_digest() -> str:
    return hashlib.sha1("\n".join(ddl()).encode()).hexdigest()


def _expected_objects() -> set[str]:
    """Names of the tables and views a writing open creates."""
    from profiler.schema import TABLES, VIEWS
    from profiler.stdlib import STDLIB

    return {t.name for t in TABLES} | {v.name for v in VIEWS} | {v.name for v in STDLIB}


def _stored_digest(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = sqltree.execute(con, "store.meta.meta_value", key=STDLIB_DIGEST_KEY).fetchall()
    return rows[0][0] if rows else None


# READ_ONLY_ADAPTERS[v]: what a read-only connection to a store of the older schema version v
# creates on itself (TEMP objects only) to read it as the current version; a read-only open of
# any other older version is refused (version 1 lacks the summary tables the UI reads).

# The tables an adapter makes empty TEMP ones of: store.temp_tables (tools/gen_sql.py) creates each.
TEMP_TABLES = (
    "whatif_trials",
    "xspace_files",
    "xspace_events",
    "run_analysis",
    "run_figures",
    "run_findings",
    "run_notes",
    "run_step_split",
)


def _temp_tables(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Empty TEMP tables of the current schema's `names` (of TEMP_TABLES)."""
    for name in names:
        sqltree.execute(con, f"store.temp_tables.temp_{name}")


def _temp_whatif(con: duckdb.DuckDBPyConnection) -> None:
    """Version 3: an empty TEMP whatif_trials, and what version 4 lacks."""
    _temp_tables(con, "whatif_trials")
    _temp_tile_sums(con)


def _temp_tile_sums(con: duckdb.DuckDBPyConnection) -> None:
    """Version 4: tile_sums as a TEMP view computed from the events on each query (what the
    migration to version 5 stores once), and what version 5 lacks."""
    sqltree.install(con, ["derive.span"], temp=True, kinds=("macro",))
    sqltree.execute(con, "derive.span.temp_tile_sums")
    _temp_xspace_kept(con)


def _temp_xspace_kept(con: duckdb.DuckDBPyConnection) -> None:
    """Versions 5 and 6: empty TEMP xspace_files and xspace_events (no capture keeps its XSpace),
    and what version 7 lacks."""
    _temp_tables(con, "xspace_files", "xspace_events")
    _temp_analysis(con)


def _temp_analysis(con: duckdb.DuckDBPyConnection) -> None:
    """Version 7: empty TEMP analysis tables (no run's analysis stored: readers analyse each run)."""
    _temp_tables(con, "run_analysis", "run_figures", "run_findings", "run_notes", "run_step_split")


def _temp_stdlib_whatif(con: duckdb.DuckDBPyConnection) -> None:
    _temp_stdlib(con)
    _temp_whatif(con)


READ_ONLY_ADAPTERS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    2: _temp_stdlib_whatif,
    3: _temp_whatif,
    4: _temp_tile_sums,
    5: _temp_xspace_kept,
    6: _temp_xspace_kept,
    7: _temp_analysis,
}


def read_only_memory_limit() -> str:
    """DuckDB memory_limit of read-only stores: $SCPROF_MEMORY_LIMIT (e.g. '2GB'), else DEFAULT_MEMORY_LIMIT."""
    return os.environ.get("SCPROF_MEMORY_LIMIT") or DEFAULT_MEMORY_LIMIT


def default_path() -> str:
    """The store path: $SCPROF_DB, else ./scprof.duckdb."""
    return os.environ.get("SCPROF_DB") or DEFAULT_PATH


class Store:
    """An open store. Use `Store.open(path)` as a context manager."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, read_only: bool):
        self.con = con
        self.path = path
        self.read_only = read_only
        self._key: tuple[int, int] | None = None  # the file, while open() has it registered
        self._state: tuple[int, bytes, bool] | None = None  # a writer's file at open (shrink_back)

    @classmethod
    def open(cls, path: str | None = None, read_only: bool = False) -> Store:
        """Open (and for writers create or migrate) the store at `path`.

        A damaged store file is refused (StoreError, one line) before anything is written:
        profiler/store_faults.py.
        """
        path = path or default_path()
        if read_only and path != ":memory:" and not os.path.exists(path):
            raise StoreError(f"{path}: no store here yet (record or ingest a run first, or pass --db)")
        if path != ":memory:" and os.path.exists(path) and not os.path.isfile(path):
            # DuckDB would block on a FIFO and give a long IO error on a directory
            what = "a directory" if os.path.isdir(path) else "not a regular file (a FIFO or device?)"
            raise StoreError(f"{path}: is {what}, not a store (--db names the store file)")
        suspect, state = None, None
        # Reading the file while a DuckDB database of this process has it open would drop that
        # database's lock (POSIX locks go with any close of the file): then the open one checked it.
        if path != ":memory:" and os.path.isfile(path) and not _held(path):
            declared = store_faults.check_file(path)
            if declared is not None and os.path.getsize(path) < declared[0]:
                suspect = declared[1]  # shorter than its header says: trimmed free blocks, or truncated
            if suspect is not None and not read_only:  # checked read-only: a writing open may write
                with contextlib.closing(_connect(path, read_only=True)) as probe:
                    _checked(path, lambda: store_faults.check_blocks(probe, path, os.path.getsize(path), suspect))
                suspect = None
            if not read_only:
                state = store_faults.file_state(path)
        con = _connect(path, read_only)
        store = cls(con, path, read_only)
        try:
            if suspect is not None:
                _checked(path, lambda: store_faults.check_blocks(con, path, os.path.getsize(path), suspect))
            # DuckDB's own progress bar would write to stdout in the middle of our output.
            if not sqltree.execute(con, "store.connection.lock_configuration").fetchall()[0][0]:
                sqltree.execute(con, "store.connection.no_progress_bar")
            _checked(path, store._prepare)
        except BaseException:
            con.close()
            if state is not None and not state[2]:  # a migration the disk refused: not left longer
                store_faults.shrink_back(path, state[0], state[1])
            raise
        store._opened(state)
        return store

    def _prepare(self) -> None:
        version = self.schema_version()
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store has schema version {version}, newer than this scprof's "
                f"{SCHEMA_VERSION}; upgrade scprof"
            )
        if self.read_only:
            if version is None:
                raise StoreError(f"{self.path}: not an scprof store (no scprof_meta table)")
            adapt = READ_ONLY_ADAPTERS.get(version) if version < SCHEMA_VERSION else None
            if version < SCHEMA_VERSION and adapt is None:
                raise StoreError(
                    f"{self.path}: store has schema version {version}, older than this scprof's "
                    f"{SCHEMA_VERSION}; open it once for writing to migrate it (any scprof ingest or "
                    "record into it does, and so does scprof ui)"
                )
            if adapt is not None:  # on every connection: TEMP views are the connection's own
                adapt(self.con)
            if adapt is not _temp_stdlib_whatif and _stored_digest(self.con) != stdlib_digest():  # older stdlib SQL
                for stmt in stdlib_ddl(temp=True):  # TEMP views shadow the stored views and tables
                    self.con.execute(stmt)
            missing = missing_typed_columns(self.con)
            if missing:
                raise StoreError(
                    f"{self.path}: store predates the typed event field(s) "
                    f"{', '.join(f.name for f in missing)}; open it once for writing to add them "
                    "(any scprof ingest or record into it does, and so does scprof ui)"
                )
            # A second read-only open in one process shares the first's database, already locked.
            locked = sqltree.execute(self.con, "store.connection.lock_configuration").fetchall()[0][0]
            if locked:
                if sqltree.execute(self.con, "store.connection.external_access").fetchall()[0][0]:
                    raise StoreError(f"{self.path}: opened elsewhere in this process with file access on")
                return
            # Users' SQL runs on read-only connections: keep it away from the file system.
            sqltree.execute(self.con, "store.connection.no_external_access")
            # Bound DuckDB's buffer pool, which otherwise keeps every block a long scan (an
            # export) reads, up to 80% of RAM; past the limit DuckDB evicts or spills.
            limit = read_only_memory_limit()
            try:
                sqltree.execute(self.con, "store.connection.memory_limit", limit=limit)
            except duckdb.Error as e:
                raise StoreError(
                    f"SCPROF_MEMORY_LIMIT: {limit!r} is not a DuckDB memory size such as "
                    f"'1GB' or '512MB' ({_first_line(e)})"
                ) from None
            sqltree.execute(self.con, "store.connection.lock_configuration_now")
            return
        if version == SCHEMA_VERSION and self._up_to_date():
            return  # nothing to write: a writing open that changes nothing leaves the file as it was
        self.con.begin()
        try:
            for v in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
                MIGRATIONS[v](self.con)
            for col in missing_typed_columns(self.con):  # a typed field added since the store was made
                self.con.execute(add_column_ddl(col))
            for stmt in ddl():
                self.con.execute(stmt)
            if _stored_digest(self.con) != (digest := stdlib_digest()):  # new step rules: every run afresh
                from profiler.summaries import fill_materialized

                fill_materialized(self.con)
                sqltree.execute(self.con, "store.meta.set_meta", key=STDLIB_DIGEST_KEY, value=digest)
            sqltree.execute(self.con, "store.meta.set_meta", key=DDL_DIGEST_KEY, value=ddl_digest())
            sqltree.execute(self.con, "store.meta.set_meta", key="schema_version", value=str(SCHEMA_VERSION))
            self.con.commit()
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # a COMMIT that failed has ended the transaction
                self.con.rollback()
            raise

    def _up_to_date(self) -> bool:
        """Whether the store already has this scprof's tables, columns, views and their comments
        (the DDL run on a writing open would change nothing)."""
        if missing_typed_columns(self.con) or _stored_digest(self.con) != stdlib_digest():
            return False
        rows = sqltree.execute(self.con, "store.meta.meta_value", key=DDL_DIGEST_KEY).fetchall()
        if not rows or rows[0][0] != ddl_digest():
            return False
        have = {r[0] for r in sqltree.execute(self.con, "store.meta.object_names").fetchall()}
        return _expected_objects() <= have

    def schema_version(self) -> int | None:
        """The store's schema version, or None for an empty database."""
        if not sqltree.execute(self.con, "store.meta.has_meta").fetchall()[0][0]:
            return None
        rows = sqltree.execute(self.con, "store.meta.meta_value", key="schema_version").fetchall()
        row = rows[0] if rows else None
        return int(row[0]) if row else None

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None, **tables: pa.Table) -> pa.Table:
        """Run one parameterised query (`?` with a list, `$name` with a dict); the result as Arrow.

        Keyword arguments name Arrow tables the query may read (e.g. `FROM t`).
        """
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            bound = dict(params) if isinstance(params, Mapping) else list(params or [])
            return self.con.sql(sql, params=bound).to_arrow_table()
        finally:
            for name in tables:
                self.con.unregister(name)

    def rows(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None, **tables: pa.Table
    ) -> list[dict[str, Any]]:
        """Run one parameterised query; the result as a list of dicts (small results only)."""
        return self.query(sql, params, **tables).to_pylist()

    def resolve_run(self, ref: str | int) -> int:
        """run_id of a run given by id, name, or (a prefix of) its uuid."""
        ref = str(ref)
        hits = sqltree.execute(self.con, "store.runs.resolve", ref=ref).fetchall()
        if not hits:
            names = [r[0] for r in sqltree.execute(self.con, "store.runs.names").fetchall()]
            known = ", ".join(names[:10]) or "none yet"
            raise StoreError(f"run {ref!r} not found in {self.path} (runs: {known})")
        if len(hits) > 1 and not ref.isdigit():
            exact = sqltree.execute(self.con, "store.runs.count_named", name=ref).fetchall()[0][0]
            if exact != 1:
                raise StoreError(f"run {ref!r} is ambiguous in {self.path}; use its run_id")
        return hits[0][0]

    def _opened(self, state: tuple[int, bytes, bool] | None) -> None:
        if self.path == ":memory:":
            return
        with contextlib.suppress(OSError):
            st = os.stat(self.path)
            self._key = (st.st_dev, st.st_ino)
            with _OPEN_LOCK:
                _OPEN[self._key] = _OPEN.get(self._key, 0) + 1
        self._state = state

    def close(self) -> None:
        self.con.close()
        key, self._key = self._key, None
        if key is None:
            return
        with _OPEN_LOCK:
            _OPEN[key] -= 1
            last = _OPEN[key] == 0
            if last:
                del _OPEN[key]
            # A writing open that committed nothing leaves the file as it was, not longer.
            if last and self._state is not None and not self._state[2]:
                store_faults.shrink_back(self.path, self._state[0], self._state[1])

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.close()
        fault = store_faults.translate(exc, self.path) if exc is not None else None
        if fault is not None:  # a damaged store or a refused write met mid-command: one line
            raise fault from exc


# The store files this process has open through Store.open, by (device, inode): open count.
_OPEN: dict[tuple[int, int], int] = {}
_OPEN_LOCK = threading.Lock()


def _held(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    with _OPEN_LOCK:
        return (st.st_dev, st.st_ino) in _OPEN


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(path, read_only=read_only)
    except duckdb.Error as e:
        if isinstance(e, duckdb.IOException) and "lock" in str(e).lower():
            raise StoreError(f"{path}: store is locked by another process (close it and retry)") from None
        fault = store_faults.translate(e, path)
        if fault is not None:
            raise fault from None
        if isinstance(e, duckdb.IOException):
            raise StoreError(f"{path}: cannot open store: {_first_line(e)}") from None
        raise StoreError(f"{path}: not a DuckDB store: {_first_line(e)}") from None


def _checked(path: str, step: Callable[[], None]) -> None:
    """Run one step of opening; a damaged store or a refused write it meets as one StoreError line."""
    try:
        step()
    except duckdb.Error as e:
        fault = store_faults.translate(e, path)
        if fault is not None:
            raise fault from None
        raise


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__

"""How the UI reads the store: one read-only connection, a cursor per request, cached analyses.

DuckDB connections are not thread-safe, so every request works on its own
`con.cursor()` of one shared read-only connection (cheap, and the database's
buffer cache survives between requests). The connection is closed after a
while without requests, so `scprof record`/`ingest` can write to the store
while the UI sits idle; the next request reopens it and sees the new runs. A store
of an older schema version is migrated once, on the first request (migrate_if_old).

Analyses (analyze_run) and comparisons are cached by the runs' content key
(run_id, uuid, ingest time), computed once per key even when several requests
ask at the same time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from analyzers import materialize
from profiler import sqltree
from profiler.errors import ScprofError, one_line
from profiler.schema import SCHEMA_VERSION
from profiler.store import Store

log = logging.getLogger(__name__)

IDLE_CLOSE_S = 20.0


class StoreAccess:
    """The store at `path`, opened read-only on demand."""

    def __init__(self, path: str, idle_close_s: float = IDLE_CLOSE_S):
        self.path = path
        self.idle_close_s = idle_close_s
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._users = 0
        self._last_used = time.monotonic()
        self._closer: threading.Thread | None = None
        self._checked = False  # whether the store's schema version was checked (see migrate_if_old)

    @contextmanager
    def open(self) -> Iterator[Store]:
        """A read-only Store on a cursor of its own (raises StoreError when there is no store)."""
        with self._lock:
            if self._store is None:
                if not self._checked:
                    migrate_if_old(self.path)
                    self._checked = True
                self._store = Store.open(self.path, read_only=True)
                self._start_closer()
            self._users += 1
            cursor = self._store.con.cursor()
        try:
            yield Store(cursor, self.path, read_only=True)
        finally:
            cursor.close()
            with self._lock:
                self._users -= 1
                self._last_used = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._store is not None and self._users == 0:
                self._store.close()
                self._store = None

    def _start_closer(self) -> None:
        if self._closer is not None and self._closer.is_alive():
            return

        def loop() -> None:
            while True:
                time.sleep(min(self.idle_close_s, 5.0))
                with self._lock:
                    if self._store is None:
                        return
                    if self._users == 0 and time.monotonic() - self._last_used > self.idle_close_s:
                        self._store.close()
                        self._store = None
                        return

        self._closer = threading.Thread(target=loop, name="scprof-ui-store-closer", daemon=True)
        self._closer.start()


def migrate_if_old(path: str) -> bool:
    """Migrate a store of an older schema version (open it once for writing), so the UI can read it.

    The migration builds what the UI needs from older stores (e.g. version 2's summary tables) in
    one transaction, then stores the analysis of every run whose stored analysis the migration left
    stale (analyzers/materialize.py: each run in a transaction of its own); it needs the store free
    of other writers, and is done once per server. Returns whether it migrated.
    """
    if not os.path.exists(path):
        return False
    try:
        con = duckdb.connect(path, read_only=True)
    except duckdb.Error:
        return False  # locked or not a store: Store.open says so
    try:
        version = Store(con, path, read_only=True).schema_version()
    except duckdb.Error:
        version = None
    finally:
        con.close()
    if version is None or version >= SCHEMA_VERSION:
        return False
    log.warning("%s: store has schema version %s; migrating it to %s (once)", path, version, SCHEMA_VERSION)
    with Store.open(path) as store:
        for warning in materialize.refresh(store):
            log.warning("%s", warning)
    return True


def analyse_stale_runs(path: str) -> int:
    """Store the analysis of every run of the store at `path` this scprof has not analysed (one
    stored by another version, or without its analysis: analyzers/materialize.py), once, as
    `scprof ui` starts, so that no page has to run the analyzers. Returns how many runs it analysed: 0 when none is stale, or
    when the store is missing or busy (its pages then analyse those runs when asked)."""
    if not os.path.isfile(path):
        return 0
    try:
        with Store.open(path, read_only=True) as store:
            stale = materialize.stale_runs(store)
        if not stale:
            return 0
        print(f"scprof: analysing {len(stale)} run(s) this scprof version has not analysed yet (once)", flush=True)
        with Store.open(path) as store:
            for warning in materialize.refresh(store):
                log.warning("%s", warning)
    except (ScprofError, duckdb.Error, OSError) as e:  # busy, or a file this user may not write
        log.warning("%s: runs not analysed ahead (%s); the pages analyse them when asked", path, one_line(e))
        return 0
    return len(stale)


class KeyedCache:
    """A small LRU of computed values; each key is computed once even under concurrent requests."""

    def __init__(self, size: int = 16):
        self.size = size
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._locks: dict[Any, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        return None

    def get_or_compute(self, key: Any, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = compute()
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
                self._locks.pop(key, None)
            return value


RUN_FACTS = KeyedCache(size=512)


def run_memo(store: Store, run_id: int, name: str, params: Any, compute: Callable[[], Any]) -> Any:
    """compute() once per run content (runs never change once ingested), store and parameters."""
    rows = sqltree.query(store.con, "ui.runs.run_key", run=run_id).to_pylist()
    key = (
        store.path,
        run_id,
        rows[0]["uuid"] if rows else None,
        rows[0]["ingested_at"] if rows else None,
        name,
        repr(params),
    )
    return RUN_FACTS.get_or_compute(key, compute)

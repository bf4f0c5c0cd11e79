"""The store: schema version and migrations, read-only opening, run lookup, rollback."""

from __future__ import annotations

import os

import duckdb
import pytest

from profiler import store as store_module
from profiler.errors import ScprofError, StoreError
from profiler.schema import SCHEMA_VERSION, TABLES, VIEWS
from profiler.stdlib import STDLIB
from profiler.store import DDL_DIGEST_KEY, STDLIB_DIGEST_KEY, Store, ddl_digest, stdlib_digest
from profiler.trace_to_store import ingest_trace
from tests.tracekit import record_small, snapshot


def set_version(db, version):
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE scprof_meta SET value = ? WHERE key = 'schema_version'", [str(version)])


def test_schema_version_recorded(tmp_path):
    db = tmp_path / "s.duckdb"
    with Store.open(str(db)) as store:
        assert store.schema_version() == SCHEMA_VERSION
    with duckdb.connect(str(db), read_only=True) as con:
        meta = con.execute("SELECT key, value FROM scprof_meta").fetchall()
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        comments = con.execute("SELECT count(*) FROM duckdb_columns() WHERE comment IS NOT NULL").fetchall()[0][0]
    assert sorted(meta) == [
        (DDL_DIGEST_KEY, ddl_digest()),
        ("schema_version", str(SCHEMA_VERSION)),
        (STDLIB_DIGEST_KEY, stdlib_digest()),
    ]
    stored = {v.name for v in STDLIB if v.materialized}  # the standard library's stored views
    assert tables == {t.name for t in TABLES} | stored and views >= {v.name for v in VIEWS}
    assert comments >= sum(len(t.columns) for t in TABLES)  # every column documented in the store itself


def test_newer_schema_version_is_refused(tmp_path, store_path):
    set_version(store_path, SCHEMA_VERSION + 1)
    for read_only in (False, True):
        with pytest.raises(StoreError, match="newer") as err:
            Store.open(str(store_path), read_only=read_only)
        assert str(store_path) in str(err.value) and "upgrade" in str(err.value)


@pytest.fixture
def next_version(monkeypatch):
    """Pretend this scprof is one schema version ahead: the stores made so far are old."""
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    return SCHEMA_VERSION + 1


def test_older_schema_is_migrated_on_write_and_refused_read_only(store_path, monkeypatch, next_version):
    with pytest.raises(StoreError, match="migrate"):
        Store.open(str(store_path), read_only=True)
    calls = []
    monkeypatch.setitem(
        store_module.MIGRATIONS,
        SCHEMA_VERSION,
        lambda con: calls.append(con.execute("ALTER TABLE runs ADD COLUMN note VARCHAR")),
    )
    with Store.open(str(store_path)) as store:
        assert store.schema_version() == next_version
        assert "note" in store.query("SELECT * FROM runs").column_names
    assert len(calls) == 1
    assert snapshot(store_path)["counts"]["events"] == 4  # the data survived
    with Store.open(str(store_path), read_only=True) as store:  # now current
        assert store.schema_version() == next_version


def test_failed_migration_leaves_the_store_as_it_was(store_path, monkeypatch, next_version):
    before = snapshot(store_path)

    def broken(con):
        con.execute("DELETE FROM events")
        raise RuntimeError("migration bug")

    monkeypatch.setitem(store_module.MIGRATIONS, SCHEMA_VERSION, broken)
    with pytest.raises(RuntimeError):
        Store.open(str(store_path))
    assert snapshot(store_path) == before


def test_read_only_open_of_missing_path(tmp_path):
    missing = tmp_path / "missing.duckdb"
    with pytest.raises(StoreError) as err:
        Store.open(str(missing), read_only=True)
    msg = str(err.value)
    assert str(missing) in msg and "--db" in msg and "ingest" in msg  # says what to do
    assert not missing.exists()


def test_read_only_store_refuses_writes(store_path):
    with Store.open(str(store_path), read_only=True) as store, pytest.raises(duckdb.Error):
        store.query("DELETE FROM events")


def test_a_plain_duckdb_file_is_not_a_store(tmp_path):
    db = tmp_path / "plain.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE x (a INTEGER)")
    with pytest.raises(StoreError, match="not an scprof store"):
        Store.open(str(db), read_only=True)


def test_query_binds_parameters(store_path):
    with Store.open(str(store_path), read_only=True) as store:
        t = store.query("SELECT name FROM slices WHERE name = ? ORDER BY event_id", ["x' OR '1'='1"])
        assert t.num_rows == 0
        t = store.query("SELECT dur_ps FROM slices WHERE name = ? ORDER BY event_id", ["gather"])
        assert t.column("dur_ps").to_pylist() == [4000, 4000]
        assert str(t.schema.field("dur_ps").type) == "int64"


@pytest.fixture
def three_runs(tmp_path):
    db = tmp_path / "runs.duckdb"
    with Store.open(str(db)) as store:
        for name, uuid in (("base", "abcdef01-0000"), ("tuned", "abcdef02-1111"), ("7", "99999999-2222")):
            ingest_trace(store, str(record_small(tmp_path / f"{name}.sctrace", run_name=name, run_id=uuid)))
    return db


def test_resolve_run(three_runs):
    with Store.open(str(three_runs), read_only=True) as store:
        assert store.resolve_run(1) == store.resolve_run("1") == store.resolve_run("base") == 1
        assert store.resolve_run("tuned") == 2
        assert store.resolve_run("abcdef02") == 2  # uuid prefix
        assert store.resolve_run("abcdef02-1111") == 2  # whole uuid
        assert store.resolve_run("99999999") == 3
        assert store.resolve_run("7") == 3  # an exact name wins over a run_id that does not exist
        with pytest.raises(StoreError, match="ambiguous"):
            store.resolve_run("abcdef")  # prefix of two uuids


@pytest.mark.parametrize("ref", ["nope", "42", "abc"])  # "abc": too short to be a uuid prefix
def test_unknown_run_lists_known_runs(three_runs, ref):
    with Store.open(str(three_runs), read_only=True) as store, pytest.raises(StoreError) as err:
        store.resolve_run(ref)
    msg = str(err.value)
    assert repr(ref) in msg and "base" in msg and "tuned" in msg
    assert isinstance(err.value, ScprofError)


def test_unknown_run_in_empty_store(tmp_path):
    with Store.open(str(tmp_path / "e.duckdb")) as store, pytest.raises(StoreError, match="none yet"):
        store.resolve_run("base")


def test_failed_ingest_rolls_back(tmp_path, store_path):
    bad = tmp_path / "bad.sctrace"
    data = bytearray(record_small(tmp_path / "good.sctrace", run_name="good").read_bytes())
    data[-40] ^= 0x55  # damage the last chunks: everything before them was already inserted
    bad.write_bytes(bytes(data))
    before = snapshot(store_path)
    with Store.open(str(store_path)) as store, pytest.raises(ScprofError):
        ingest_trace(store, str(bad))
    assert snapshot(store_path) == before


def test_read_only_stores_bound_duckdb_memory(store_path, monkeypatch):
    """DuckDB's buffer pool (which keeps every block a scan reads) is capped on read-only stores."""

    def limit() -> str:
        with Store.open(str(store_path), read_only=True) as store:
            return store.con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]

    monkeypatch.delenv("SCPROF_MEMORY_LIMIT", raising=False)
    assert store_module.DEFAULT_MEMORY_LIMIT == "1GB" and limit() == "953.6 MiB"  # DuckDB shows 1 GB in MiB
    monkeypatch.setenv("SCPROF_MEMORY_LIMIT", "256MB")
    assert limit() == "244.1 MiB"
    monkeypatch.setenv("SCPROF_MEMORY_LIMIT", "lots")
    with pytest.raises(StoreError, match="SCPROF_MEMORY_LIMIT: 'lots'"):
        limit()


def test_ingest_reports_progress_up_to_the_file_size(tmp_path):
    from profiler.trace_to_store import ingest_traces
    from tests.tracekit import record_small

    trace = record_small(tmp_path / "p.sctrace", chunk_rows=4)
    seen: list[tuple[int, int]] = []
    with Store.open(str(tmp_path / "p.duckdb")) as store:
        ingest_traces(store, [str(trace)], progress=lambda done, total: seen.append((done, total)))
    size = os.path.getsize(trace)
    assert len(seen) > 2 and all(t == size for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (size, size)


def test_version_1_store_gets_its_summaries_on_first_writable_open(tmp_path):
    from profiler.schema import SUMMARY_TABLES

    db = tmp_path / "v1.duckdb"
    with Store.open(str(db)) as store:
        ingest_trace(store, str(record_small(tmp_path / "a.sctrace", run_name="a")))
        ingest_trace(store, str(record_small(tmp_path / "b.sctrace", run_name="b", run_id="uuid-b")))
        fresh = {t.name: store.rows(f"SELECT * FROM {t.name} ORDER BY ALL") for t in SUMMARY_TABLES}
    assert fresh["tile_sums"] and fresh["sc_step_cells"] and len(fresh["run_summaries"]) == 2
    with duckdb.connect(str(db)) as con:  # what a version-1 store was: no summary tables
        for t in SUMMARY_TABLES:
            con.execute(f"DROP TABLE {t.name}")
        con.execute("UPDATE scprof_meta SET value = '1' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 1.*migrate.*scprof ui"):
        Store.open(str(db), read_only=True)
    with Store.open(str(db)) as store:  # the migration builds the summaries of the runs already there
        assert store.schema_version() == SCHEMA_VERSION
        assert {t.name: store.rows(f"SELECT * FROM {t.name} ORDER BY ALL") for t in SUMMARY_TABLES} == fresh


def test_a_store_made_with_older_step_rules_is_read_with_the_new_ones(tmp_path):
    # A store whose standard-library SQL is older than this scprof's (a step rule changed): its
    # stored step_times rows are stale. Read-only, TEMP views of the new SQL answer (the file
    # unchanged); a writing open refills the stored rows for every run.
    from scprof.cli import main
    from tests.xplane.helpers import JAX_SMALL

    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", JAX_SMALL, "--db", db]) == 0
    with Store.open(db, read_only=True) as store:
        want = store.rows("SELECT * FROM step_times ORDER BY step")
    with duckdb.connect(db) as con:  # as an older scprof left it
        con.execute("UPDATE step_times SET dur_ps = 1")
        con.execute("UPDATE scprof_meta SET value = 'old' WHERE key = ?", [STDLIB_DIGEST_KEY])
    before = (tmp_path / "s.duckdb").read_bytes()
    with Store.open(db, read_only=True) as store:
        assert store.rows("SELECT * FROM step_times ORDER BY step") == want
    assert (tmp_path / "s.duckdb").read_bytes() == before
    with Store.open(db) as store:
        assert store.rows("SELECT * FROM step_times ORDER BY step") == want
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT min(dur_ps) FROM step_times").fetchall()[0][0] > 1
        assert con.execute("SELECT value FROM scprof_meta WHERE key = ?", [STDLIB_DIGEST_KEY]).fetchall() == [
            (stdlib_digest(),)
        ]

"""profiler/store_faults.py through Store.open: a damaged store file is refused with one line
before anything is written, a healthy one is never taken for damaged (a file DuckDB trimmed of
free blocks, a write-ahead log left by a crash), a writing open that changes nothing writes
nothing, and a writing open that committed nothing leaves the file no longer than it was."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from profiler import store_faults
from profiler.errors import StoreError
from profiler.store import Store
from tests.tracekit import REPO, snapshot


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wal(db: Path) -> Path:
    return Path(str(db) + ".wal")


def _damage(db: Path, how: str) -> None:
    size = db.stat().st_size
    if how == "empty":
        os.truncate(db, 0)
    elif how == "half":
        os.truncate(db, size // 2)
    elif how == "header cut":
        os.truncate(db, 8192)
    elif how == "header checksum":  # both database headers (DuckDB reads the newer one)
        with open(db, "r+b") as f:
            for offset in (4096, 8192):
                f.seek(offset + 8)  # past the checksum: the fields it covers
                f.write(b"\xa5" * 48)
    elif how == "garbage WAL":
        _wal(db).write_bytes(bytes(range(7, 256)) * 40)
    elif how == "zeroed WAL":
        _wal(db).write_bytes(bytes(4096))
    elif how == "not DuckDB":
        db.write_bytes(b"SQLite format 3\x00" + bytes(20000))


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writing"])
@pytest.mark.parametrize(
    "how, words",
    [
        ("empty", "damaged (truncated or corrupt): the file is empty"),
        ("half", "damaged (truncated or corrupt): the file ends at byte"),
        ("header cut", "the file ends at byte 8,192, inside DuckDB's 12,288-byte header"),
        ("header checksum", "the block at byte 4,096 fails its checksum"),
        ("garbage WAL", "write-ahead log"),
        ("zeroed WAL", "write-ahead log"),
        ("not DuckDB", "not a DuckDB store"),
    ],
)
def test_a_damaged_store_is_refused_before_anything_is_written(store_path, read_only, how, words):
    _damage(store_path, how)
    files = {p.name: _sha(p) for p in store_path.parent.iterdir() if p.is_file()}
    with pytest.raises(StoreError) as err:
        Store.open(str(store_path), read_only=read_only)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(store_path)) and words in line
    assert {p.name: _sha(p) for p in store_path.parent.iterdir() if p.is_file()} == files  # no WAL made either


def test_a_store_trimmed_of_free_blocks_is_not_taken_for_truncated(store_path):
    # DuckDB cuts free blocks off the end of the file at a checkpoint after writing the header, so
    # a healthy file can be shorter than the header's block count says.
    with duckdb.connect(str(store_path)) as con:
        con.execute("CREATE TABLE filler AS SELECT range AS i, repeat('x', 50) AS s FROM range(300000)")
        con.execute("CHECKPOINT")
        con.execute("DROP TABLE filler")
        con.execute("CHECKPOINT")
    declared = store_faults.check_file(str(store_path))
    assert declared is not None and store_path.stat().st_size < declared[0]
    rows = snapshot(store_path)
    for read_only in (True, False):
        with Store.open(str(store_path), read_only=read_only) as store:
            assert store.rows("SELECT name FROM runs") == [{"name": "small"}]
    assert snapshot(store_path) == rows


def test_a_write_ahead_log_left_by_a_crash_is_replayed_not_refused(store_path):
    # A writer that died before its checkpoint: its committed change is in the WAL only.
    crash = (
        "import duckdb, os, sys; con = duckdb.connect(sys.argv[1]); "
        "con.execute(\"UPDATE runs SET name = 'renamed'\"); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", crash, str(store_path)], check=True, cwd=REPO)
    assert _wal(store_path).stat().st_size > 0
    before = (_sha(store_path), _sha(_wal(store_path)))
    with Store.open(str(store_path), read_only=True) as store:
        assert store.rows("SELECT name FROM runs") == [{"name": "renamed"}]
    assert (_sha(store_path), _sha(_wal(store_path))) == before
    with Store.open(str(store_path)) as store:
        assert store.rows("SELECT name FROM runs") == [{"name": "renamed"}]


def test_a_writing_open_that_changes_nothing_writes_nothing(store_path):
    before = _sha(store_path)
    with Store.open(str(store_path)):
        pass
    assert _sha(store_path) == before and not _wal(store_path).exists()


def test_a_writing_open_that_commits_nothing_leaves_the_file_its_size(store_path):
    size0, sha0, rows = store_path.stat().st_size, _sha(store_path), snapshot(store_path)
    with Store.open(str(store_path)) as store:
        store.con.execute("BEGIN")
        # random values, enough of them that DuckDB writes row groups to new blocks before the commit
        store.con.execute("INSERT INTO counters SELECT 99, range % 7, range, random() FROM range(2000000)")
        assert store_path.stat().st_size > size0
        store.con.execute("ROLLBACK")
    assert store_path.stat().st_size == size0 and snapshot(store_path) == rows
    assert _sha(store_path) == sha0 and not _wal(store_path).exists()  # no checkpoint either


def test_a_second_open_keeps_the_first_ones_lock(store_path):
    # POSIX locks go with any close of the file in the process: a second open in this process must
    # not read the file (its checks) while the first holds DuckDB's lock on it.
    writer = (
        "import duckdb, sys\ntry:\n    duckdb.connect(sys.argv[1])\nexcept duckdb.IOException as e:\n"
        "    print('locked' if 'lock' in str(e).lower() else e)\nelse:\n    print('opened')"
    )
    with Store.open(str(store_path), read_only=True) as reader:
        with Store.open(str(store_path), read_only=True):
            pass
        other = subprocess.run([sys.executable, "-c", writer, str(store_path)], capture_output=True, text=True)
        assert other.stdout.strip() == "locked", other
        assert reader.rows("SELECT count(*) AS n FROM runs") == [{"n": 1}]


def test_shrink_back_leaves_a_file_a_connection_holds(tmp_path):
    db = tmp_path / "held.duckdb"
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
            "c.execute('CREATE TABLE t AS SELECT range i FROM range(1000)'); c.execute('CHECKPOINT'); "
            "print('open', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout.readline().strip() == "open"
        size = db.stat().st_size
        head = db.read_bytes()[: store_faults.HEADER_BYTES]
        assert store_faults.shrink_back(str(db), size - 4096, head) == 0  # locked by the other process
        assert db.stat().st_size == size
    finally:
        held.communicate("")
    assert store_faults.shrink_back(str(db), size - 4096, db.read_bytes()[: store_faults.HEADER_BYTES]) == 4096


@pytest.mark.parametrize(
    "message, words",
    [
        (
            'IO Error: Could not write file "/d/s.duckdb.wal": No space left on device',
            "/d/s.duckdb: cannot write its write-ahead log: no space left on device; the unfinished change was",
        ),
        (
            'IO Error: Could not write file "/d/s.duckdb": File too large',
            "/d/s.duckdb: cannot write the store: file too large",
        ),
        (
            'IO Error: Could not write file "/tmp/x/duckdb_temp_block-1.block": No space left on device',
            "/d/s.duckdb: cannot write /tmp/x/duckdb_temp_block-1.block: no space left on device",
        ),
        (
            "Corrupt database file: computed checksum 1 does not match stored checksum 2 in block at location 274432",
            "/d/s.duckdb: the store is damaged (truncated or corrupt): the block at byte 274,432 fails its checksum",
        ),
        (
            'IO Error: Could not read enough bytes from file "/d/s.duckdb": attempted to read 262144 bytes from location 1060864',
            "reading 262,144 bytes at byte 1,060,864 runs past the end of the file",
        ),
    ],
)
def test_duckdb_errors_become_one_line(message, words):
    fault = store_faults.translate(duckdb.IOException(message), "/d/s.duckdb")
    assert fault is not None and words in str(fault) and "\n" not in str(fault)
    if "temp_block" in message:
        assert "rolled back" not in str(fault)


def test_other_errors_are_left_alone():
    assert store_faults.translate(duckdb.CatalogException("Table with name x does not exist"), "s.duckdb") is None
    assert store_faults.translate(ValueError("No space left on device"), "s.duckdb") is None

"""A damaged store, a full disk and a read-only output, through the CLI in child processes: exit 2,
one `scprof: error:` line naming the store (or the output) and the cause, and the files as they
were. Before the hardening (docs/security.md "A damaged store or a full disk is one line"):
`internal error: IOException` (exit 1) and a store that ingest and tune wrote into, `internal error:
TransactionException: cannot rollback` and a store 60% larger after a full disk, and exports that
replaced a mode-444 file and exited 0."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from profiler.synthetic import write_synthetic_trace
from tests.tracekit import REPO, CliResult, assert_one_error, record_small, snapshot

HEADER = 3 * 4096  # DuckDB's file header; blocks follow


def cli_child(cwd, *argv: str, fsize: int | None = None, timeout_s: float = 180) -> CliResult:
    """`scprof argv...` in a child process; `fsize` caps the size of any file it writes (RLIMIT_FSIZE:
    a write past it fails with EFBIG, "File too large", as on a file system that is full)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    p = subprocess.run(
        [sys.executable, "-m", "scprof.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=limit,
    )
    return CliResult(p.returncode, p.stdout, p.stderr)


def _sha(path: Path) -> str | None:
    if path.is_dir():
        return "a directory"
    if not path.exists():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(world: Path) -> dict[str, str | None]:
    """Every file in the world, by content (the store, its WAL, and no new file)."""
    return {p.name: _sha(p) for p in sorted(world.iterdir())}


def _block_of_runs(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT max(block_id) FROM pragma_storage_info('runs')").fetchall()[0][0]


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _random(n: int) -> bytes:
    return np.random.default_rng(37).integers(0, 256, n, dtype=np.uint8).tobytes()


def _truncate(size_of):
    def damage(db: Path) -> None:
        os.truncate(db, size_of(db.stat().st_size))

    return damage


def _random_over_data(db: Path) -> None:
    # random bytes over the block holding the runs table, which every command reads (past its
    # 8-byte checksum): a disk that returned garbage in the middle of the file
    _overwrite(db, HEADER + _block_of_runs(db) * 262144 + 64, _random(4096))


def _garbage_wal(db: Path) -> None:
    Path(str(db) + ".wal").write_bytes(_random(10_000))


def _text_file(db: Path) -> None:
    db.write_text("not a store\n" * 100)


def _directory(db: Path) -> None:
    db.unlink()
    db.mkdir()


# damage -> words the one error line holds besides the store's name
DAMAGE = {
    "truncated to 0": (_truncate(lambda n: 0), ["damaged", "the file is empty"]),
    "truncated to 50%": (_truncate(lambda n: n // 2), ["damaged", "truncated or corrupt"]),
    "truncated to 4 KiB": (_truncate(lambda n: 4096), ["damaged", "inside DuckDB's 12,288-byte header"]),
    "random bytes over a data block": (_random_over_data, ["damaged", "fails its checksum"]),
    "garbage WAL": (_garbage_wal, ["write-ahead log", "store.duckdb.wal is damaged"]),
    "a text file": (_text_file, ["not a DuckDB store"]),
    "a directory": (_directory, ["is a directory, not a store"]),
}
COMMANDS = {
    "runs": ["runs"],
    "analyze": ["analyze", "small"],
    # --replace: the ingest reads the run it replaces (a new run's would skip the damaged block, by
    # its min/max statistics, and land: DuckDB checks a block's checksum when it reads the block)
    "ingest": ["ingest", "small.sctrace", "--replace"],
    "sql": ["sql", "SELECT * FROM runs"],
    "tune": ["tune", "small", "--budget", "1", "--workers", "1"],
}


@pytest.fixture
def world(tmp_path, store_path):
    """store.duckdb holding run 'small' (and its report), and small.sctrace, its trace."""
    record_small(tmp_path / "small.sctrace")
    return tmp_path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_is_one_line_and_left_as_it_is(world, damage, command):
    make, needles = DAMAGE[damage]
    make(world / "store.duckdb")
    before = _files(world)
    res = cli_child(world, *COMMANDS[command], "--db", "store.duckdb")
    assert_one_error(res, "store.duckdb", *needles)
    assert _files(world) == before  # the store (and its WAL) byte for byte; no WAL or other file made


@pytest.fixture
def tmpfs(tmp_path, store_path):
    """A directory on a small tmpfs of its own (root, where mounting is allowed), else skip."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root; the RLIMIT_FSIZE case tries a full disk without it")
    size = (store_path.stat().st_size >> 20) + 3  # MiB: the store and 3 MiB to spare
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip()}); the RLIMIT_FSIZE case tries a full disk without it"
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.parametrize("full", ["tmpfs (no space left on device)", "RLIMIT_FSIZE (file too large)"])
def test_a_full_disk_during_ingest_leaves_the_store_as_it_was(request, tmp_path, store_path, full):
    # A trace whose rows need several MiB more than the disk has; the store is the size of a small one.
    write_synthetic_trace(str(tmp_path / "big.sctrace"), 150_000, run_name="big")
    fsize = None
    if full.startswith("tmpfs"):
        disk = request.getfixturevalue("tmpfs")
        db = disk / "store.duckdb"
        shutil.copyfile(store_path, db)
        cause = "no space left on device"
    else:
        db = store_path
        fsize = db.stat().st_size + (1 << 20)
        cause = "file too large"
    size0, sha0, rows0 = db.stat().st_size, _sha(db), snapshot(db)
    with duckdb.connect(str(db), read_only=True) as con:
        free_blocks = con.execute("PRAGMA database_size").fetchall()[0][5]
    res = cli_child(tmp_path, "ingest", "big.sctrace", "--db", str(db), fsize=fsize)
    line = assert_one_error(res, str(db), "cannot write", cause, "rolled back")
    assert "internal error" not in line and "rollback - no transaction" not in line
    size1 = db.stat().st_size
    print(f"\n{full}: store {size0:,} bytes before the ingest, {size1:,} after; sha256 same: {_sha(db) == sha0}")
    assert not Path(str(db) + ".wal").exists()
    assert size1 == size0  # the blocks DuckDB wrote before the failed commit are cut off again
    if free_blocks == 0:  # no free block inside the file DuckDB could have written into
        assert _sha(db) == sha0
    assert snapshot(db) == rows0  # the same runs and rows
    copy = tmp_path / "copy.duckdb"  # its checkpoint is whole: it opens for writing and checkpoints
    shutil.copyfile(db, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("CHECKPOINT")
    assert snapshot(copy) == rows0
    ok = cli_child(tmp_path, "runs", "--db", str(db))
    assert ok.code == 0 and "small" in ok.out and "big" not in ok.out


@pytest.mark.parametrize("fmt", ["perfetto", "xspace"])
def test_export_over_a_read_only_file_is_refused(world, fmt):
    out = world / "keep.out"
    out.write_bytes(b"an export the user made read-only")
    out.chmod(0o444)
    before = _files(world)
    res = cli_child(world, "export", fmt, "small", "-o", "keep.out", "--db", "store.duckdb")
    assert_one_error(res, "keep.out", "is read-only (mode 444)")
    assert res.out == ""
    assert _files(world) == before  # unchanged, and no temporary file left
    assert stat.S_IMODE(out.stat().st_mode) == 0o444


def test_an_output_the_user_may_not_write_is_refused(tmp_path, monkeypatch):
    # Someone else's file (mode 644, not ours): os.access says no, and the rename would replace it.
    from profiler import safe_output

    out = tmp_path / "theirs.out"
    out.write_bytes(b"theirs")
    real_access = os.access
    monkeypatch.setattr(safe_output.os, "access", lambda p, m: False if str(p) == str(out) else real_access(p, m))
    with pytest.raises(safe_output.OutputRefused, match="is not writable by this user \\(mode 644\\)"):
        safe_output.check_output_path(str(out))
    monkeypatch.undo()
    assert safe_output.check_output_path(str(out)) == str(out)  # writable: replaced as before

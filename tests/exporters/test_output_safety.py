"""Exports never destroy what they did not make: the store, its WAL, a run's source trace, other
databases and traces are refused (exit 2, one line, nothing written), and a failed export leaves
no half file and the old file as it was."""

from __future__ import annotations

import os
import stat

import pytest

from profiler.errors import ScprofError
from tests.tracekit import assert_one_error, cli, record_small

FORMATS = ("perfetto", "xspace")


@pytest.fixture
def world(tmp_path):
    """A store (relative path, as users type it) holding run 'small' ingested from ./small.sctrace."""
    record_small(tmp_path / "small.sctrace")
    from scprof.cli import main

    assert main(["ingest", "small.sctrace", "--db", "store.duckdb"]) == 0
    return tmp_path


def _bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _make_wal(w):
    return "store.duckdb.wal", "write-ahead log"


def _hard_link(w):
    os.link(w / "store.duckdb", w / "hard.out")
    return "hard.out", "is the store"


def _symlink(w):
    os.symlink(w / "store.duckdb", w / "link.out")
    return "link.out", "is the store"


def _symlink_to_trace(w):
    os.symlink("small.sctrace", w / "trace-link.pb")
    return "trace-link.pb", "source of stored run 'small'"


def _absolute_store(w):
    return str(w / "store.duckdb"), "is the store"


def _dotted_store(w):
    os.mkdir(w / "sub")
    return "sub/../store.duckdb", "is the store"


def _other_duckdb(w):
    import shutil

    shutil.copyfile(w / "store.duckdb", w / "other.db")
    return "other.db", "DuckDB database"


def _other_trace(w):
    record_small(w / "unstored.sctrace", run_name="unstored")
    return "unstored.sctrace", "scprof trace"


def _directory(w):
    os.mkdir(w / "adir")
    return "adir", "is a directory"


def _missing_dir(w):
    return "nowhere/x.out", "does not exist"


def _fifo(w):
    os.mkfifo(w / "pipe.out")
    return "pipe.out", "FIFO"


def _empty(w):
    return "", "empty path"


CASES = {
    "store": lambda w: ("store.duckdb", "is the store"),
    "store absolute": _absolute_store,
    "store via ..": _dotted_store,
    "wal": _make_wal,
    "hard link to store": _hard_link,
    "symlink to store": _symlink,
    "source trace": lambda w: ("small.sctrace", "source of stored run 'small'"),
    "symlink to source trace": _symlink_to_trace,
    "other duckdb": _other_duckdb,
    "other scprof trace": _other_trace,
    "directory": _directory,
    "missing directory": _missing_dir,
    "fifo": _fifo,
    "empty": _empty,
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_outputs_write_nothing(world, capsys, fmt, case):
    out, needle = CASES[case](world)
    files = {p: _bytes(world / p) for p in ("store.duckdb", "small.sctrace")}
    listing = sorted(os.listdir(world))
    res = cli(capsys, "export", fmt, "small", "-o", out, "--check", "--db", "store.duckdb")
    assert_one_error(res, needle)
    assert "checked" not in res.out and res.out == ""
    assert {p: _bytes(world / p) for p in files} == files  # store and trace byte for byte
    assert sorted(os.listdir(world)) == listing  # no temporary or half file left
    assert cli(capsys, "runs", "--db", "store.duckdb").code == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any directory")
@pytest.mark.parametrize("fmt", FORMATS)
def test_unwritable_directory(world, capsys, fmt):
    os.mkdir(world / "ro")
    os.chmod(world / "ro", stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert_one_error(cli(capsys, "export", fmt, "small", "-o", "ro/x.out", "--db", "store.duckdb"), "ro")
    finally:
        os.chmod(world / "ro", stat.S_IRWXU)


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_replaces_its_own_output(world, capsys, fmt):
    """An existing file that is none of the above (an earlier export) is replaced, and --check says so."""
    (world / "run.out").write_bytes(b"an older export")
    res = cli(capsys, "export", fmt, "small", "-o", "run.out", "--check", "--db", "store.duckdb")
    assert res.code == 0, res.err
    assert "checked" in res.out and _bytes(world / "run.out") != b"an older export"
    assert not [f for f in os.listdir(world) if f.endswith(".part")]


def test_failed_export_keeps_the_old_file_and_leaves_no_part(world, capsys, monkeypatch):
    """The writer dies half way: the file at -o is unchanged and no temporary file remains."""
    from exporters.perfetto import export as perfetto

    def broken_run(self):
        self.f.write(b"half a trace")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(perfetto._Writer, "run", broken_run)
    (world / "old.pftrace").write_bytes(b"the previous export")
    res = cli(capsys, "export", "perfetto", "small", "-o", "old.pftrace", "--db", "store.duckdb")
    assert res.code == 1 and "disk on fire" in res.err
    assert _bytes(world / "old.pftrace") == b"the previous export"
    assert not [f for f in os.listdir(world) if f.endswith(".part")]


def test_open_output_commits_only_on_success(tmp_path):
    from profiler.safe_output import open_output

    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(ValueError), open_output(str(target)) as f:
        f.write(b"new but broken")
        raise ValueError("stop")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.bin"]
    with open_output(str(target)) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["out.bin"]
    # the mode open() gives (0666 less the umask), not mkstemp's 0600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~umask


def test_protected_paths_are_compared_by_file_not_by_name(tmp_path):
    from profiler.safe_output import check_output_path

    real = tmp_path / "data.bin"
    real.write_bytes(b"x")
    os.link(real, tmp_path / "alias.bin")
    for name in ("data.bin", "alias.bin", "./data.bin"):
        with pytest.raises(ScprofError, match="is mine"):
            check_output_path(str(tmp_path / name), {str(real): "mine"})
    assert check_output_path(str(tmp_path / "fresh.bin"), {str(real): "mine"}) == str(tmp_path / "fresh.bin")

"""Files scprof writes on a user's request (exports): never over what scprof did not make, never half-written.

    with open_output(path, protected=store_owned_paths(store)) as f:
        f.write(...)

`check_output_path` refuses, before anything is written, an output that is a directory, sits in
a missing directory, is not a regular file (a FIFO, a device), is a DuckDB database or its
write-ahead log, is an scprof trace (a recording), is read-only (no write permission for the user,
or no write bit at all: root too is refused), or is one of `protected` (the store, its WAL,
the source files of stored runs), compared by real path and by inode (`os.path.samefile`: hard
links, symlinks). `open_output` then writes to a temporary file in the same directory and renames
it over the output at the end, so a failed write leaves no half file and the old file unchanged.
Refusals are ScprofError (exit 2, one line naming the file).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from profiler import sqltree
from profiler.errors import ScprofError
from profiler.trace_file import MAGIC as TRACE_MAGIC

DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file (after an 8-byte checksum)
DUCKDB_MAGIC_OFFSET = 8
# Write errors that are the user's situation (disk full, quota, read-only file system), not a bug.
USER_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


class OutputRefused(ScprofError):
    """An output path scprof will not write (it names the file and why)."""


def store_owned_paths(store: object) -> dict[str, str]:
    """What an export must not overwrite, as path -> what it is: the store, its WAL, runs' sources.

    `store` is a profiler.store.Store (duck-typed: `.path` and `.con`). A run's `source_path`
    is stored as it was given to ingest, so a relative one is tried against the current
    directory and against the store's directory.
    """
    path = getattr(store, "path", "")
    owned: dict[str, str] = {}
    if path and path != ":memory:":
        owned[path] = "the store"
        owned[path + ".wal"] = "the store's write-ahead log"
    base = os.path.dirname(os.path.abspath(path)) if path and path != ":memory:" else os.getcwd()
    rows = sqltree.query(store.con, "store.runs.source_paths").to_pylist()  # type: ignore[attr-defined]
    for row in rows:
        src = row["source_path"]
        what = f"the source of stored run {row['name']!r}"
        for candidate in {src, os.path.join(base, src)} if not os.path.isabs(src) else {src}:
            owned.setdefault(candidate, what)
    return owned


def _same(a: str, b: str) -> bool:
    """One file under two names: equal real paths, or (both existing) the same inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be looked at)
        return False


def _inside(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return real != top and os.path.commonpath([real, top]) == top


def _head(path: str, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_output_path(path: str, protected: dict[str, str] | Iterable[str] = ()) -> str:
    """`path` if scprof may (over)write it; else OutputRefused naming the file and the reason."""
    if not path:
        raise OutputRefused("output file: empty path")
    owned = protected if isinstance(protected, dict) else dict.fromkeys(protected, "a protected file")
    shown = os.path.abspath(path) if os.path.basename(path) in ("", ".", "..") else path
    if os.path.isdir(path):
        raise OutputRefused(f"{shown}: is a directory; name a file to write")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise OutputRefused(f"{path}: cannot write there: directory {parent} {what}")
    for other, what in owned.items():
        if _same(path, other):
            raise OutputRefused(f"{path}: is {what}; exports never overwrite it (choose another file)")
        if os.path.isdir(other) and os.path.lexists(path) and _inside(path, other):
            raise OutputRefused(f"{path}: lies in {other}, {what}; exports never overwrite files there")
    if os.path.lexists(path):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:  # a dangling symlink: the rename replaces the link itself
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise OutputRefused(f"{path}: is {_kind(mode)}; exports write regular files only")
        if mode is not None and not (mode & 0o222 and os.access(path, os.W_OK)):
            # The rename would replace it whatever its mode: refuse what the mode says not to write
            # (no write bit at all counts for root too, who may write anything).
            why = "is read-only" if not mode & 0o222 else "is not writable by this user"
            raise OutputRefused(
                f"{path}: {why} (mode {stat.S_IMODE(mode):o}); exports do not replace a file "
                "without write permission (make it writable, or choose another file)"
            )
        head = _head(path, max(len(TRACE_MAGIC), DUCKDB_MAGIC_OFFSET + len(DUCKDB_MAGIC)))
        if head[DUCKDB_MAGIC_OFFSET : DUCKDB_MAGIC_OFFSET + len(DUCKDB_MAGIC)] == DUCKDB_MAGIC:
            raise OutputRefused(f"{path}: is a DuckDB database; exports never overwrite one (choose another file)")
        if head.startswith(TRACE_MAGIC):
            raise OutputRefused(f"{path}: is an scprof trace (a recording); exports never overwrite one")
    if path.endswith(".wal") and os.path.isfile(path[: -len(".wal")]):
        db_head = _head(path[: -len(".wal")], DUCKDB_MAGIC_OFFSET + len(DUCKDB_MAGIC))
        if db_head[DUCKDB_MAGIC_OFFSET:] == DUCKDB_MAGIC:
            raise OutputRefused(f"{path}: is the write-ahead log of a DuckDB database; exports never overwrite it")
    if not os.access(parent, os.W_OK):
        raise OutputRefused(f"{path}: cannot write in {parent} (permission denied)")
    return path


@contextlib.contextmanager
def open_output(path: str, protected: dict[str, str] | Iterable[str] = ()) -> Iterator[BinaryIO]:
    """Check `path`, then yield a binary file that becomes `path` only when the block succeeds.

    The data goes to a hidden temporary file next to `path` (same file system, so the final
    rename is atomic); any exception removes it and leaves an existing `path` untouched.
    """
    check_output_path(path, protected)
    directory = os.path.dirname(os.path.abspath(path))
    tmp, fd = _create_temp(path, directory)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        check_output_path(path, protected)  # nothing took its place while we wrote
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if e.errno in USER_WRITE_ERRNOS:
            raise OutputRefused(f"{path}: cannot write ({e.strerror})") from None
        raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def _create_temp(path: str, directory: str) -> tuple[str, int]:
    """A new hidden file next to `path`, created exclusively (mode 0666 less the umask, as open() gives)."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.part")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputRefused(f"{path}: cannot write in {directory} ({e.strerror})") from None
    raise OutputRefused(f"{path}: cannot create a temporary file in {directory}")

"""A store file that is damaged, and a store write the disk refused: one line naming the file.

Before DuckDB opens an existing store, `check_file` reads its first 12 KiB and refuses, with
nothing written, a file that is empty, not a DuckDB database, cut inside its header, or whose
write-ahead log (`<store>.wal`) is not a log DuckDB wrote (DuckDB itself would take such a log for
a torn write and drop it). It returns the size the header's block count implies; a file shorter
than that is either trimmed of free trailing blocks (DuckDB does that at a checkpoint) or
truncated, and `check_blocks` tells which from the blocks the store's tables and metadata use.

What only reading the data finds (a block that fails its checksum, a read past the end), and a
write that fails (no space left on device, file too large), DuckDB raises mid-command;
`translate` turns those into the same kind of one-line StoreError.

A writing open that ends without having committed anything (a failed ingest) can leave the file
longer than it was: DuckDB writes big inserts to new blocks before the commit, and keeps them
as free space after a rollback. `shrink_back` cuts such a file back to its size at open, when its
header is byte for byte the one it had then, no write-ahead log holds changes, and no one else
(no other process, and no other DuckDB database in this one) has the file open.

Reading the file here opens and closes it, and any close drops every POSIX lock the process holds
on the file, DuckDB's among them: Store.open reads it only while no other Store of this process
has it open (a DuckDB connection made past Store would lose its lock).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import struct

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no shrinking back
    fcntl = None  # type: ignore[assignment]

from profiler.errors import StoreError, one_line

HEADER_BYTES = 3 * 4096  # DuckDB's main header and its two alternating database headers
MAGIC = b"DUCK"
MAGIC_OFFSET = 8
# The first entry of every write-ahead log DuckDB writes is a serialized record whose first field
# (id 100, little-endian) is the entry's type: a log starting otherwise is not one.
WAL_START = b"\x64\x00"
ADVICE = "restore it from a backup, or move it aside and ingest the runs' traces again"
# DuckDB's texts for what reading a damaged file runs into
DAMAGE_MARKERS = (
    "Corrupt database file",
    "Could not read enough bytes",
    "not a valid DuckDB database file",
    "Corrupt WAL file",
    "Failure while replaying WAL",
)
# Write failures that are the user's situation, by the text DuckDB quotes (strerror)
WRITE_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def damaged(path: str, reason: str) -> StoreError:
    """The one line for a store file that is damaged."""
    return StoreError(f"{path}: the store is damaged (truncated or corrupt): {reason}; {ADVICE}")


def check_file(path: str) -> tuple[int, int] | None:
    """Refuse a store file damaged in ways its first bytes show (StoreError); else (the file size
    its header's block count implies, its block size), or None when the header cannot say (DuckDB
    checks it)."""
    size = os.path.getsize(path)
    if size == 0:
        raise damaged(path, "the file is empty (0 bytes)")
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if head[MAGIC_OFFSET : MAGIC_OFFSET + len(MAGIC)] != MAGIC:
        raise StoreError(
            f"{path}: not a DuckDB store (the file does not start with a DuckDB header: another kind "
            "of file, or a store whose start was overwritten); --db names the store file"
        )
    if size < HEADER_BYTES:
        raise damaged(path, f"the file ends at byte {size:,}, inside DuckDB's {HEADER_BYTES:,}-byte header")
    _check_wal(path)
    return declared_size(head)


def declared_size(head: bytes) -> tuple[int, int] | None:
    """(BLOCK_START + block_count * block_alloc_size, block_alloc_size) of the newer database
    header (by iteration)."""
    newest: tuple[int, int, int] | None = None
    for offset in (4096, 8192):
        # checksum, iteration, meta_block, free_list, block_count, block_alloc_size
        _, iteration, _, _, count, alloc = struct.unpack_from("<6Q", head, offset)
        if newest is None or iteration > newest[0]:
            newest = (iteration, count, alloc or 262144)
    assert newest is not None
    _, count, alloc = newest
    if not (4096 <= alloc <= 2**30 and alloc & (alloc - 1) == 0) or count > 2**40:
        return None  # not a header this code understands: DuckDB's own checks answer
    return HEADER_BYTES + count * alloc, alloc


def _check_wal(path: str) -> None:
    wal = path + ".wal"
    if not os.path.lexists(wal):
        return
    if not os.path.isfile(wal):
        raise StoreError(f"{path}: its write-ahead log {wal} is not a regular file; move it aside")
    with open(wal, "rb") as f:
        start = f.read(len(WAL_START))
    if start and start != WAL_START[: len(start)]:
        raise StoreError(
            f"{path}: the store's write-ahead log {wal} is damaged (it is not a log DuckDB wrote); "
            "move it aside to open the store as it was at its last checkpoint"
        )


def check_blocks(con: object, path: str, size: int, alloc: int) -> None:
    """Refuse (StoreError) a store file that ends before the last block its tables or metadata
    use. A check only: when DuckDB cannot list its blocks for another reason, nothing is said."""
    import duckdb

    from profiler import sqltree

    try:
        tables = sqltree.execute(con, "store.faults.tables").fetchall()  # type: ignore[arg-type]
        blocks = [sqltree.execute(con, "store.faults.metadata_last_block").fetchall()[0][0]]  # type: ignore[arg-type]
        for schema, name in tables:
            ident = '"' + schema.replace('"', '""') + '"."' + name.replace('"', '""') + '"'
            blocks.append(sqltree.execute(con, "store.faults.table_last_block", table=ident).fetchall()[0][0])  # type: ignore[arg-type]
        last = max((b for b in blocks if b is not None), default=None)
    except duckdb.Error as e:
        fault = translate(e, path)
        if fault is not None:
            raise fault from None
        return
    if last is not None and last >= 0:
        need = HEADER_BYTES + (last + 1) * alloc
        if size < need:
            raise damaged(path, f"the file ends at byte {size:,}, but its data reaches byte {need:,}")


def translate(e: BaseException, path: str) -> StoreError | None:
    """The one-line StoreError for a DuckDB error that is a damaged store or a refused write, else None."""
    try:
        import duckdb
    except ImportError:  # pragma: no cover - the store needs it
        return None
    if not isinstance(e, duckdb.Error) or not path or path == ":memory:":
        return None
    text = one_line(e)
    if any(m in text for m in DAMAGE_MARKERS):
        return damaged(path, _damage_reason(text))
    for code in WRITE_ERRNOS:
        if os.strerror(code) in text:
            reason = os.strerror(code).lower()
            quoted = re.search(r'file "([^"]+)"', text)
            file = quoted.group(1) if quoted else path
            for name, what in ((path, "the store"), (path + ".wal", "its write-ahead log")):
                with contextlib.suppress(OSError, ValueError):
                    if os.path.abspath(file) == os.path.abspath(name):
                        return StoreError(
                            f"{path}: cannot write {what}: {reason}; the unfinished change was rolled back "
                            "(the store holds what it held before it)"
                        )
            return StoreError(f"{path}: cannot write {file}: {reason}")  # DuckDB's temporary files, say
    return None


def _damage_reason(text: str) -> str:
    """DuckDB's reason, short: where in the file it went wrong."""
    if m := re.search(r"does not match stored checksum \d+ in block at location (\d+)", text):
        return f"the block at byte {int(m.group(1)):,} fails its checksum"
    if m := re.search(r"attempted to read (\d+) bytes from location (\d+)", text):
        return f"reading {int(m.group(1)):,} bytes at byte {int(m.group(2)):,} runs past the end of the file"
    text = re.sub(r"^[A-Za-z ]*Error: ", "", text)
    return text if len(text) <= 200 else text[:197] + "..."


def file_state(path: str) -> tuple[int, bytes, bool]:
    """(size, header bytes, whether a write-ahead log exists): what shrink_back compares against."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    return os.path.getsize(path), head, os.path.lexists(path + ".wal")


def shrink_back(path: str, size0: int, head0: bytes) -> int:
    """Cut `path` back to `size0` bytes when it grew without a commit (see the module doc), and
    remove an empty write-ahead log DuckDB left (one a failed commit emptied); the number of bytes
    cut (0: left as it is). Call only once this process's DuckDB has closed the store."""
    lock = getattr(fcntl, "F_OFD_SETLK", None)  # Linux; the struct below is its 64-bit layout
    if lock is None or struct.calcsize("l") != 8:
        return 0
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0
    wal = path + ".wal"
    try:
        # An open-file-description lock: it conflicts with DuckDB's lock of any open connection,
        # in other processes and in this one alike.
        fcntl.fcntl(fd, lock, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        if os.path.lexists(wal):
            if not os.path.isfile(wal) or os.path.getsize(wal) > 0:
                return 0  # it holds changes (or is not DuckDB's): they reference the blocks
            os.remove(wal)
        size = os.fstat(fd).st_size
        if size <= size0 or os.pread(fd, HEADER_BYTES, 0) != head0:
            return 0
        os.ftruncate(fd, size0)
        return size - size0
    except OSError:
        return 0
    finally:
        os.close(fd)

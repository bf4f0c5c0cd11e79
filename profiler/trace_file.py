"""Chunk framing of scprof trace files: the magic, then length-delimited chunks.

The file is one `TraceFile` protobuf message written field by field (see
proto/scprof_trace.proto): 16 bytes of magic (field 1), then `Chunk`s (field 2).
Each chunk starts with its CRC-32, so corruption is found where it happened, and
a file cut short still yields every chunk before the cut.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from profiler import scprof_trace_pb2 as pb
from profiler.errors import TraceFormatError
from profiler.wire import WireError, encode_varint, read_varint

FORMAT_VERSION = 1
MAGIC_VALUE = b"SCPROF-TRACE\x00\x01"
MAGIC = b"\x0a" + bytes([len(MAGIC_VALUE)]) + MAGIC_VALUE  # field 1 of TraceFile, 16 bytes
CHUNK_TAG = b"\x12"  # field 2 of TraceFile, length-delimited
CRC_TAG = b"\x0d"  # field 1 of Chunk, fixed32

# Chunk payload field number -> name of the oneof member.
PAYLOAD_FIELDS = {f.number: f.name for f in pb.Chunk.DESCRIPTOR.oneofs_by_name["payload"].fields}
PAYLOAD_NUMBERS = {name: number for number, name in PAYLOAD_FIELDS.items()}


def frame_chunk(kind: str, body: bytes) -> bytes:
    """Encode one chunk (crc + payload `kind` holding `body`) as a TraceFile.chunk field."""
    payload = encode_varint(PAYLOAD_NUMBERS[kind] << 3 | 2) + encode_varint(len(body)) + body
    crc = zlib.crc32(payload).to_bytes(4, "little")
    chunk_len = 1 + 4 + len(payload)
    return CHUNK_TAG + encode_varint(chunk_len) + CRC_TAG + crc + payload


@dataclass(frozen=True)
class RawChunk:
    """One chunk as read from the file: its kind, file offset and body bytes."""

    kind: str
    offset: int  # byte offset of the chunk in the file
    body: memoryview  # the payload message's encoding (numpy columns are views on it)


@dataclass(frozen=True)
class Cut:
    """Where a file stops being readable: the file, the byte offset and why."""

    path: str
    offset: int
    reason: str

    def message(self) -> str:
        return f"{self.path}: trace is cut short at byte {self.offset}: {self.reason}"


_SPECIAL = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (for error messages)."""
    return next((word for test, word in _SPECIAL if test(mode)), "a special file")


def check_regular(path: str, mode: int) -> None:
    """Refuse anything but a regular file: a FIFO or a device would block or never end."""
    if not stat.S_ISREG(mode):
        raise TraceFormatError(f"{path}: not a regular file ({file_kind(mode)})")


def open_trace(path: str) -> BinaryIO:
    """Open a regular file for reading, turning OS errors into one-line user errors.

    Opened non-blocking and checked with fstat before any read, so a FIFO, a device or a
    socket is refused at once (a FIFO without a writer would block a plain open forever).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file") from None
    except PermissionError:
        raise TraceFormatError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise TraceFormatError(f"{path}: not a regular file (a directory)") from None
    except OSError as e:  # a socket (ENXIO), too many links, a name too long, ...
        with contextlib.suppress(OSError):
            check_regular(path, os.stat(path).st_mode)
        raise TraceFormatError(f"{path}: cannot open ({e.strerror or e})") from None
    try:
        check_regular(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def iter_chunks(path: str) -> Iterator[RawChunk | Cut]:
    """Yield the file's chunks in order, streaming, and a final `Cut` if it ends early.

    Structural damage (bad magic, CRC mismatch, unknown chunk kinds) raises
    TraceFormatError naming the file and offset; truncation is yielded as a Cut
    so the caller decides whether the complete chunks are worth keeping.
    """
    with open_trace(path) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(len(MAGIC))
        _check_magic(path, head)
        pos = len(MAGIC)
        while pos < size:
            start = pos
            prefix = f.read(min(11, size - pos))
            if prefix[0] != CHUNK_TAG[0]:
                raise TraceFormatError(f"{path}: corrupt trace: expected a chunk at byte {start}")
            try:
                length, used = read_varint(prefix, 1, len(prefix))
            except WireError:
                yield Cut(path, start, "chunk length is incomplete")
                return
            body_pos = start + used
            if body_pos + length > size:
                yield Cut(path, start, f"chunk needs {length} bytes, {size - body_pos} remain")
                return
            f.seek(body_pos)
            chunk = f.read(length)
            pos = body_pos + length
            yield _parse_chunk(path, start, chunk)


# What `scprof ingest` reads, for the message refusing anything else.
READABLE_FORMATS = (
    "scprof reads .sctrace files, XProf captures (.xplane.pb files, run directories, logdirs) and Chrome "
    "trace JSON (.json, .json.gz: PyTorch Kineto, XProf, JAX)"
)


def _check_magic(path: str, head: bytes) -> None:
    if not head:
        raise TraceFormatError(f"{path}: file is empty, not an scprof trace")
    if head == MAGIC:
        return
    if head[:-1] == MAGIC[:-1]:
        raise TraceFormatError(
            f"{path}: unsupported trace format version {head[-1]} (this scprof reads {FORMAT_VERSION})"
        )
    raise TraceFormatError(
        f"{path}: not an scprof trace (bad magic at byte 0), XProf capture or Chrome trace JSON ({READABLE_FORMATS})"
    )


def _parse_chunk(path: str, offset: int, chunk: bytes) -> RawChunk:
    """Check a chunk's CRC and split off its payload."""
    if len(chunk) < 5 or chunk[0] != CRC_TAG[0]:
        raise TraceFormatError(f"{path}: corrupt trace: chunk at byte {offset} has no CRC")
    if zlib.crc32(memoryview(chunk)[5:]) != int.from_bytes(chunk[1:5], "little"):
        raise TraceFormatError(f"{path}: corrupt trace: chunk at byte {offset} fails its CRC check")
    try:
        key, body_start = read_varint(chunk, 5, len(chunk))
        body_len, body_start = read_varint(chunk, body_start, len(chunk))
    except WireError:
        raise TraceFormatError(f"{path}: corrupt trace: chunk at byte {offset} is malformed") from None
    kind = PAYLOAD_FIELDS.get(key >> 3)
    if kind is None or key & 7 != 2 or body_start + body_len != len(chunk):
        raise TraceFormatError(f"{path}: corrupt trace: chunk at byte {offset} has an unknown payload")
    return RawChunk(kind, offset, memoryview(chunk)[body_start:])

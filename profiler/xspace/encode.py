"""XSpace encoding with numpy, the mirror image of the decoders: rows of "pieces" (constant
bytes, varints, fixed64, nested blobs) laid out with numpy, no Python step per row. Used by the
XSpace exporters (exporters/xspace.py, xspace_kept.py), the import benchmark and the tests."""

from __future__ import annotations

import numpy as np

from profiler.wire import encode_varint, varint_len, write_varints

_U8 = np.uint8


def encode_rows(n: int, pieces: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """Lay out `n` rows, each the concatenation of `pieces`; returns (bytes as uint8, row offsets).

    A piece is ("const", bytes, mask|None), ("varint", values, mask|None),
    ("fixed64", float64 or int64 values, mask|None) or ("blob", uint8 buffer, offsets (n+1)).
    A masked-out piece contributes no bytes to that row.
    """
    sizes = []
    for p in pieces:
        kind, data = p[0], p[1]
        if kind == "blob":
            size = np.diff(data[1]).astype(np.int64)
        elif kind == "const":
            size = np.full(n, len(data), np.int64)
        elif kind == "varint":
            size = varint_len(data.astype(np.int64).view(np.uint64) if data.dtype.kind == "i" else data)
        else:
            size = np.full(n, 8, np.int64)
        if kind != "blob" and p[2] is not None:
            size = np.where(p[2], size, 0)
        sizes.append(size)
    row_len = np.sum(sizes, axis=0) if sizes else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(row_len, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), _U8)
    at = offsets[:-1].copy()
    for p, size in zip(pieces, sizes, strict=True):
        kind, data = p[0], p[1]
        rows = np.flatnonzero(size)
        pos = at[rows]
        if kind == "const":
            for j, byte in enumerate(data):
                out[pos + j] = byte
        elif kind == "varint":
            v = (data.astype(np.int64).view(np.uint64) if data.dtype.kind == "i" else data.astype(np.uint64))[rows]
            write_varints(out, pos, v)
        elif kind == "fixed64":
            raw = np.ascontiguousarray(data[rows]).view(_U8).reshape(-1, 8)
            out[(pos[:, None] + np.arange(8)).ravel()] = raw.ravel()
        else:  # blob: copy each row's slice of the source buffer
            src, src_off = data
            total = int(size.sum())
            if total:
                starts = src_off[:-1][rows]
                lens = size[rows]
                rep = np.repeat(np.arange(len(rows)), lens)
                within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
                out[pos[rep] + within] = src[starts[rep] + within]
        at += size
    return out, offsets


def key(number: int, wire: int) -> bytes:
    """Encoded field key."""
    return encode_varint(number << 3 | wire)


def message_pieces(number: int, blob: tuple[np.ndarray, np.ndarray]) -> list[tuple]:
    """Pieces writing a nested message field (key, length, payload) from encoded rows."""
    return [("const", key(number, 2), None), ("varint", np.diff(blob[1]).astype(np.uint64), None), ("blob", blob)]

"""TPU tiled layouts (docs/emulator.md): padded shapes, linear indices, byte footprints.

A layout `F32[3,5]{1,0:T(2,2)}` stores a shape in minor-to-major order (here row-major)
cut into tiles; the padding that tiling adds is real HBM footprint. The linear index
of an element is its tile's index over `ceil(d / t)` tiles per dimension, times the
tile size, plus its index inside the tile:

    linear_index((2, 3), (3, 5), (2, 2)) == (1*3 + 1) * 2*2 + (0*2 + 1) == 17

The common TPU tile formats:
- 32-bit: (8,128); when the second-minor dimension is 1 or 2: (2,128); 3 or 4: (4,128);
- 16-bit (bf16): (8,128)(2,1) (the second level packs two rows into one 32-bit word);
- 8-bit: (8,128)(4,1); PRED: one byte per element, tiled as 8-bit.
A later tile level that divides the first one only reorders data inside a tile, so
the footprint is that of the first level.

Model choices (no source): a rank-1 array is laid out as [1, n] (second-minor
dimension 1), a scalar as [1, 1]; major dimensions are not padded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# element type -> bytes per element
DTYPE_BYTES = {"f32": 4, "s32": 4, "bf16": 2, "s8": 1, "pred": 1}


def tpu_tiling(shape: Sequence[int], dtype: str) -> tuple[tuple[int, ...], ...]:
    """The tile levels XLA:TPU commonly uses for `dtype[shape]` (minor-to-major = row-major)."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, not {dtype!r}")
    second_minor = shape[-2] if len(shape) >= 2 else 1
    nbytes = DTYPE_BYTES[dtype]
    if nbytes == 4:
        if second_minor <= 2:
            return ((2, 128),)
        if second_minor <= 4:
            return ((4, 128),)
        return ((8, 128),)
    if nbytes == 2:
        return ((8, 128), (2, 1))
    return ((8, 128), (4, 1))


def _as_2d_minor(shape: Sequence[int], tile: Sequence[int]) -> tuple[int, ...]:
    """The shape with as many (leading 1) dimensions as the tile needs."""
    shape = tuple(int(d) for d in shape)
    missing = len(tile) - len(shape)
    return (1,) * missing + shape if missing > 0 else shape


def padded_shape(shape: Sequence[int], tile: Sequence[int]) -> tuple[int, ...]:
    """`shape` with its minor dimensions rounded up to multiples of `tile` (pad step)."""
    shape = _as_2d_minor(shape, tile)
    k = len(tile)
    major = shape[:-k]
    minor = tuple(-(-d // t) * t for d, t in zip(shape[-k:], tile, strict=True))
    return major + minor


def linear_index(index: Sequence[int], shape: Sequence[int], tile: Sequence[int]) -> int:
    """Position in memory of element `index` of row-major `shape` tiled by `tile` (one level).

    = LinearIndex(tile index, tile counts) * tile size + LinearIndex(index in tile, tile),
    with the major (untiled) dimensions outermost.
    """
    index = (0,) * (len(tile) - len(index)) + tuple(int(i) for i in index)
    shape = _as_2d_minor(shape, tile)
    if any(not 0 <= i < d for i, d in zip(index, shape, strict=True)):
        raise IndexError(f"index {tuple(index)} outside shape {shape}")
    k = len(tile)
    counts = [-(-d // t) for d, t in zip(shape[-k:], tile, strict=True)]
    outer = list(index[:-k]) + [i // t for i, t in zip(index[-k:], tile, strict=True)]
    outer_dims = list(shape[:-k]) + counts
    inner = [i % t for i, t in zip(index[-k:], tile, strict=True)]
    return _row_major(outer, outer_dims) * math.prod(tile) + _row_major(inner, list(tile))


def _row_major(index: Sequence[int], dims: Sequence[int]) -> int:
    out = 0
    for i, d in zip(index, dims, strict=True):
        out = out * d + i
    return out


def padded_elements(shape: Sequence[int], tiling: Sequence[Sequence[int]]) -> int:
    """Elements the tiled layout stores (data plus padding): set by the first tile level."""
    return math.prod(padded_shape(shape, tiling[0]))


def padded_bytes(shape: Sequence[int], dtype: str) -> int:
    """HBM bytes of `dtype[shape]` in XLA:TPU's default tiled layout (padding included)."""
    return padded_elements(shape, tpu_tiling(shape, dtype)) * DTYPE_BYTES[dtype]


def dense_dtype(element_bytes: int) -> str:
    """The element type of dense parameters stored with `element_bytes` bytes each."""
    return {4: "f32", 2: "bf16", 1: "s8"}[element_bytes]

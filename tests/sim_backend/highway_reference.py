"""HighwayHash-64 of 4-byte keys in numpy: the tests' own reference for sim_backend/_highway.c.

Written apart from the C walk, from the published algorithm (github.com/google/highwayhash,
the portable C version): reset from the key, the 4-byte input as the remainder packet, then
four permute-and-update rounds, on uint64 lanes with numpy's wrapping arithmetic. Checked
against the algorithm's published test vector (test_highway_hash.py); the plain-Python
preprocessing reference (test_sim_preprocess.py) buckets IDs with it.
"""

from __future__ import annotations

import numpy as np

from sim_backend.highway_hash import LIBRARY_KEY

_MUL0 = (0xDBE6D5D5FE4CCE2F, 0xA4093822299F31D0, 0x13198A2E03707344, 0x243F6A8885A308D3)
_MUL1 = (0x3BD39E10CB0EF593, 0xC0ACF169B5F18A8C, 0xBE5466CF34E90C6C, 0x452821E638D01377)
_LO32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)


def _swap_halves(x: np.ndarray) -> np.ndarray:
    return (x >> _U32) | (x << _U32)


def _zipper(v1: np.ndarray, v0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte shuffle HighwayHash adds into the other half of the state: (add1, add0)."""

    def b(x: np.ndarray, mask: int) -> np.ndarray:
        return x & np.uint64(mask)

    def sh(x: np.ndarray, n: int) -> np.ndarray:  # shift left (n > 0) or right (n < 0)
        return x << np.uint64(n) if n > 0 else x >> np.uint64(-n)

    add0 = (
        sh(b(v0, 0xFF000000) | b(v1, 0xFF00000000), -24)
        | sh(b(v0, 0xFF0000000000) | b(v1, 0xFF000000000000), -16)
        | b(v0, 0xFF0000)
        | sh(b(v0, 0xFF00), 32)
        | sh(b(v1, 0xFF00000000000000), -8)
        | sh(v0, 56)
    )
    add1 = (
        sh(b(v1, 0xFF000000) | b(v0, 0xFF00000000), -24)
        | b(v1, 0xFF0000)
        | sh(b(v1, 0xFF0000000000), -16)
        | sh(b(v1, 0xFF00), 24)
        | sh(b(v0, 0xFF000000000000), -8)
        | sh(b(v1, 0xFF), 48)
        | b(v0, 0xFF00000000000000)
    )
    return add1, add0


def _update(state: list[list[np.ndarray]], lanes: list[np.ndarray]) -> None:
    v0, v1, mul0, mul1 = state
    for i in range(4):
        v1[i] = v1[i] + mul0[i] + lanes[i]
        mul0[i] = mul0[i] ^ ((v1[i] & _LO32) * (v0[i] >> _U32))
        v0[i] = v0[i] + mul1[i]
        mul1[i] = mul1[i] ^ ((v0[i] & _LO32) * (v1[i] >> _U32))
    for hi, lo, dst in ((1, 0, v0), (3, 2, v0)):
        add1, add0 = _zipper(v1[hi], v1[lo])
        dst[hi], dst[lo] = dst[hi] + add1, dst[lo] + add0
    for hi, lo, dst in ((1, 0, v1), (3, 2, v1)):
        add1, add0 = _zipper(v0[hi], v0[lo])
        dst[hi], dst[lo] = dst[hi] + add1, dst[lo] + add0


def highway_hash64_u32(values: np.ndarray, key: tuple[int, int, int, int] = LIBRARY_KEY) -> np.ndarray:
    """HighwayHash-64 of each value's 4 little-endian bytes (uint64 array, same shape)."""
    x = np.asarray(values).astype(np.int64).astype(np.uint32).astype(np.uint64).ravel()
    n = len(x)
    with np.errstate(over="ignore"):
        mul0 = [np.full(n, m, dtype=np.uint64) for m in _MUL0]
        mul1 = [np.full(n, m, dtype=np.uint64) for m in _MUL1]
        v0 = [mul0[i] ^ np.uint64(key[i]) for i in range(4)]
        v1 = [mul1[i] ^ _swap_halves(np.full(n, key[i], dtype=np.uint64)) for i in range(4)]
        # the 4-byte input is the remainder packet: v0 += size in both halves, v1's halves
        # rotated left by size, then the packet (the bytes in lane 0, zeros after)
        size = np.uint64(4)
        for i in range(4):
            v0[i] = v0[i] + ((size << _U32) + size)
            lo, hi = v1[i] & _LO32, v1[i] >> _U32
            lo = ((lo << size) | (lo >> (_U32 - size))) & _LO32
            hi = ((hi << size) | (hi >> (_U32 - size))) & _LO32
            v1[i] = lo | (hi << _U32)
        zero = np.zeros(n, dtype=np.uint64)
        state = [v0, v1, mul0, mul1]
        _update(state, [x, zero, zero, zero])
        for _ in range(4):  # finalize: permute v0 into the lanes and update, four times
            p = [_swap_halves(v0[2]), _swap_halves(v0[3]), _swap_halves(v0[0]), _swap_halves(v0[1])]
            _update(state, p)
        out = v0[0] + v1[0] + mul0[0] + mul1[0]
    return out.reshape(np.shape(values))

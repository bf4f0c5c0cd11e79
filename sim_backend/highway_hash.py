"""HighwayHash-64 of 4-byte keys: the hash jax-tpu-embedding buckets IDs by for minibatching.

The library puts every stacked column ID into one of 64 minibatching buckets,
`HighwayHash64(int32 col_id bytes, key) & 63`, with a fixed key of its own
(`LIBRARY_KEY`). `highway_hash64` computes it with the C walk of _highway.c, written from
the published HighwayHash algorithm (github.com/google/highwayhash, the portable C
version). It is checked against the algorithm's published test vector and a numpy version
written apart (tests/sim_backend/highway_reference.py), and, through the minibatch counts
the hash decides, against the library itself (tests/sim_backend/test_library_oracle.py).
"""

from __future__ import annotations

import numpy as np

from sim_backend import _highway

LIBRARY_KEY = (0x4451E30F87DB9609, 0xCA7358A1FD2737F8, 0x4B2C991FCEE4FDEA, 0x0B2658E18326F6BA)
BUCKETS = 64  # the library's minibatching buckets (kMaxMinibatchingBuckets)


def highway_hash64(ids: np.ndarray, key: tuple[int, int, int, int] = LIBRARY_KEY) -> np.ndarray:
    """HighwayHash-64 of each int64 ID's low 4 bytes (little-endian), uint64."""
    ids = np.ascontiguousarray(ids, dtype=np.int64).ravel()
    out = np.empty(len(ids), dtype=np.uint64)
    _highway.hash_u32(ids, np.array(key, dtype=np.uint64), out)
    return out


def minibatch_bucket(col_ids: np.ndarray) -> np.ndarray:
    """The library's minibatching bucket of each stacked column ID (int64, 0..63)."""
    return (highway_hash64(col_ids) & np.uint64(BUCKETS - 1)).astype(np.int64)

"""Minibatching as jax-tpu-embedding decides it: 64 hash buckets merged along a binary tree.

When any stack's (source SparseCore, partition) buffer exceeds its limits in a step, the
library hashes every stacked column ID into one of 64 buckets (highway_hash.py), counts
IDs and unique IDs per (buffer, bucket), and walks a binary tree over the buckets: two
neighbouring subtrees whose counts together exceed the limit get a *split* between them,
else they merge (their counts add up the tree). One 63-bit split word per buffer; the
words of every buffer, stack and host are ORed, so every stack runs the same number of
minibatches, `popcount(split) + 1`, each a run of consecutive buckets. One ID's
occurrences all hash to one bucket: a minibatch never splits an ID. Bit numbering: the
32 nodes joining buckets (0, 1), (2, 3), ... are bits 0-31, the 16 nodes joining pairs of
those are bits 32-47, and so on to bit 62, the root.
"""

from __future__ import annotations

import numpy as np

from sim_backend.highway_hash import BUCKETS

LEVELS = BUCKETS.bit_length() - 1  # 6 levels of the tree over 64 buckets


def split_word(counts: np.ndarray, limit: int) -> int:
    """The OR over rows of each row's split word: counts int64 [rows, 64] per bucket."""
    c = np.array(counts, dtype=np.int64).reshape(-1, BUCKETS)
    word, bit = 0, 0
    size = 2
    while size <= BUCKETS:
        left = c[:, 0::size]
        right = c[:, size // 2 :: size]
        over = left + right > limit  # [rows, nodes of this level]
        merged = np.where(over, np.maximum(left, right), left + right)
        c[:, 0::size] = merged
        hit = over.any(axis=0)
        for node in np.flatnonzero(hit):
            word |= 1 << (bit + int(node))
        bit += BUCKETS // size
        size *= 2
    return word


def bucket_minibatch(word: int) -> np.ndarray:
    """int64 [64]: the minibatch of each bucket under a split word (buckets in order; a set bit
    is a boundary between the two subtrees its node joins)."""
    boundary = np.zeros(BUCKETS, dtype=np.int64)  # boundary[b]: a minibatch starts at bucket b
    bit, size = 0, 2
    while size <= BUCKETS:
        for node in range(BUCKETS // size):
            if word >> (bit + node) & 1:
                boundary[node * size + size // 2] = 1
        bit += BUCKETS // size
        size *= 2
    return np.cumsum(boundary)


def minibatch_count(word: int) -> int:
    return int(word).bit_count() + 1

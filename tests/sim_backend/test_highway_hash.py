"""The minibatching hash (sim_backend/highway_hash.py): HighwayHash-64 of 4-byte IDs, in numpy and in C,
against the algorithm's published test vector and against each other."""

from __future__ import annotations

import numpy as np

from sim_backend.highway_hash import BUCKETS, LIBRARY_KEY, highway_hash64, minibatch_bucket
from tests.sim_backend.highway_reference import highway_hash64_u32

# github.com/google/highwayhash, c/highwayhash_test.c: key 0x0706050403020100, ...; the
# input bytes 0, 1, 2, 3 (size 4) hash to kExpected64[4]
TEST_KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0x1716151413121110, 0x1F1E1D1C1B1A1918)


def test_the_published_test_vector():
    for impl in (highway_hash64, highway_hash64_u32):  # the C walk and the numpy reference
        assert int(impl(np.array([0x03020100]), TEST_KEY)[0]) == 0xF205A46893007EDA


def test_c_and_numpy_agree_on_the_librarys_key():
    ids = np.concatenate([np.arange(1000), np.random.default_rng(3).integers(0, 2**31 - 1, 100_000)])
    want = (highway_hash64_u32(ids, LIBRARY_KEY) & np.uint64(BUCKETS - 1)).astype(np.int64)
    got = minibatch_bucket(ids)
    np.testing.assert_array_equal(got, want)
    assert set(np.unique(got).tolist()) == set(range(BUCKETS))  # every bucket used

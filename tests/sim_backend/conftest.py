"""Shared fixtures for the emulator tests: small workloads built as dicts."""

from __future__ import annotations

import copy
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_DIR = os.path.join(REPO, "configs")
BUNDLED = sorted(f for f in os.listdir(CONFIG_DIR) if f.endswith(".toml"))
# bundled to show a failed compile (recorded, then `scprof record` exits 2): nothing runs
COMPILE_FAILURES = ("gather_too_large.toml", "spmem_overflow.toml")
RUNNABLE = [f for f in BUNDLED if f not in COMPILE_FAILURES]

SMALL = {
    "name": "small",
    "seed": 3,
    "steps": 4,
    "global_batch": 256,
    "hardware": {"generation": "v5p", "num_chips": 2},
    "host": {"num_threads": 4},
    "dense": {
        "num_dense_features": 13,
        "bottom_mlp": [64, 32],
        "top_mlp": [64, 1],
        "cross_layers": 1,
        "cross_low_rank": 32,
    },
    "sparsecore": {
        "max_ids_per_chip_per_sample": 1000,
        "max_ids_per_partition": 4096,
        "max_unique_ids_per_partition": 4096,
    },
    "flags": {"maximum_parallel_iterations": 2},
    "tables": [
        {"name": "big", "vocab": 100_000, "width": 32},
        {"name": "mid", "vocab": 5000, "width": 32},
        {"name": "tiny", "vocab": 7, "width": 16},
    ],
    "features": [
        {"name": "f_big", "table": "big", "multi_hot": 8, "distribution": "zipf", "zipf_exponent": 1.1},
        {"name": "f_mid", "table": "mid", "multi_hot": 4, "multi_hot_min": 1},
        {
            "name": "f_mid2",
            "table": "mid",
            "multi_hot": 2,
            "distribution": "hot_set",
            "hot_set_size": 3,
            "hot_fraction": 0.5,
        },
        {"name": "f_tiny", "table": "tiny", "multi_hot": 3},
    ],
}


@pytest.fixture(scope="session")
def library_session():
    """One child process running jax-tpu-embedding for every test that asks (the `reference`
    extra; under `make test` a missing extra fails these tests, elsewhere they skip)."""
    from sim_backend.reference_preprocess import ReferenceSession, library_available
    from tests.tracekit import missing_extra

    if not library_available():
        missing_extra("jax-tpu-embedding not installed (test extra `reference`; run `make install-test`)")
    with ReferenceSession() as session:
        yield session


@pytest.fixture
def small_raw() -> dict:
    """A fresh copy of the small workload (2 chips x 4 SCs, 3 tables, 4 features)."""
    return copy.deepcopy(SMALL)

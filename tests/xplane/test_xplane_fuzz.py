"""Property-based fuzzing of the XSpace import (profiler/xspace/): mutated,
truncated and concatenated captures built from valid seeds (tests/fuzzkit.py) either import
(the run complete, its values within the import's documented limits) or are refused with a
one-line ScprofError that leaves the store as it was; each under a hang guard."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from tests.fuzzkit import MUTATIONS, Env, apply, check_ingest, seeds
from tests.tracekit import PROPERTY
from tests.xplane.helpers import JAX_SMALL

MUTATION = st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 2**32), st.integers(0, 2**32))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("xspace-fuzz")
    inputs = seeds(d)["xspace"][:3]  # the small ones: many examples a second
    with Store.open(str(d / "fuzz.duckdb")) as store:
        ingest_traces(store, [JAX_SMALL])  # a run every refused input must leave alone
        yield Env(d, inputs, store)


@settings(PROPERTY, max_examples=100)
@given(seed=st.integers(0, 2), other=st.integers(0, 2), mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_capture_imports_or_is_refused(env, seed, other, mutations):
    d, inputs, store = env.d, env.inputs, env.store
    path = d / "mutant.xplane.pb"
    path.write_bytes(apply(inputs[seed], mutations, inputs[other], sctrace=False))
    assert check_ingest(store, [path], xspace=True, seconds=60) in ("ok", "refused")

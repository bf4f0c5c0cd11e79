"""Property-based fuzzing of the `.sctrace` reader (reader.py + trace_file.py, through ingest):
mutated (values and strings rewritten behind valid CRCs, bytes flipped), truncated and
concatenated traces built from valid seeds (tests/fuzzkit.py) either ingest completely or are
refused with a one-line ScprofError that leaves the store as it was; each under a hang guard."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from tests.fuzzkit import MUTATIONS, Env, apply, check_ingest, seeds
from tests.tracekit import PROPERTY

MUTATION = st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 2**32), st.integers(0, 2**32))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("sctrace-fuzz")
    inputs = seeds(d)["sctrace"]
    with Store.open(str(d / "fuzz.duckdb")) as store:
        ingest_traces(store, [str(d / "seed-small.sctrace")])  # a run every refused input must leave alone
        yield Env(d, inputs, store)


@settings(PROPERTY, max_examples=100)
@given(
    seed=st.integers(0, 1),
    other=st.integers(0, 1),
    mutations=st.lists(MUTATION, min_size=1, max_size=3),
    allow_truncated=st.booleans(),
)
# found by this test: a step marker's start rewritten to the smallest int64 overflowed step_times'
# tie-break (-start_ps) into an unhandled DuckDB error; the tie-break now negates a HUGEINT
@example(seed=1, other=0, mutations=[("text", 187, 3549)], allow_truncated=False)
def test_mutated_trace_ingests_or_is_refused(env, seed, other, mutations, allow_truncated):
    d, inputs, store = env.d, env.inputs, env.store
    path = d / "mutant.sctrace"
    path.write_bytes(apply(inputs[seed], mutations, inputs[other], sctrace=True))
    assert check_ingest(store, [path], xspace=False, allow_truncated=allow_truncated, seconds=60) in ("ok", "refused")

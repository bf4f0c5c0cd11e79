"""`sparsecore.preprocessing = "reference"`: jax-tpu-embedding preprocesses every step in a child
process; where it and scprof's native path agree, the two give the same trace, byte for byte
in every event, counter, step marker and partition statistic."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.errors import ConfigError, PreprocessError
from sim_backend.recording.record import record_run
from sim_backend.reference_preprocess import library_available
from tests.sim_backend.test_sim_record import small_file
from tests.tracekit import missing_extra


@pytest.fixture(autouse=True)
def _library():
    if not library_available():
        missing_extra("jax-tpu-embedding not installed (test extra `reference`; run `make install-test`)")


def _record(raw: dict, tmp_path, name: str, preprocessing: str):
    raw = copy.deepcopy(raw)
    raw["sparsecore"]["preprocessing"] = preprocessing
    where = tmp_path / f"{name}-{preprocessing}"
    where.mkdir()
    return record_run(small_file(where, raw), [], name, 3, str(where / "out"))


@pytest.mark.parametrize(
    "case, sparsecore",
    [
        ("fits", {}),
        ("minibatches", {"max_ids_per_partition": 32}),
        ("drops", {"max_ids_per_partition": 40, "allow_id_dropping": True, "enable_minibatching": False}),
    ],
)
def test_reference_and_native_traces_are_the_same(small_raw, tmp_path, case, sparsecore):
    small_raw["sparsecore"].update(sparsecore)
    native = _record(small_raw, tmp_path, case, "native")
    reference = _record(small_raw, tmp_path, case, "reference")
    a, b = read_trace(native.trace_path), read_trace(reference.trace_path)
    assert a.strings == b.strings
    for kind in ("events", "counters", "steps", "partition_stats"):
        assert a.data[kind].keys() == b.data[kind].keys()
        for col in a.data[kind]:
            np.testing.assert_array_equal(a.data[kind][col], b.data[kind][col], err_msg=f"{case}: {kind}.{col}")
    assert (native.minibatches, native.dropped_ids) == (reference.minibatches, reference.dropped_ids)
    if case == "minibatches":
        assert native.minibatches_per_step > 1
    if case == "drops":
        assert native.dropped_ids > 0


def test_the_library_abort_is_one_line(small_raw, tmp_path):
    small_raw["sparsecore"].update(max_ids_per_partition=2, enable_minibatching=False)
    with pytest.raises(PreprocessError) as exc:
        _record(small_raw, tmp_path, "abort", "reference")
    assert "jax-tpu-embedding stopped while preprocessing step 0" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_reference_needs_a_power_of_two_sparsecore_count(small_raw, tmp_path):
    small_raw["hardware"]["sparsecores_per_chip"] = 3
    small_raw["global_batch"] = 66 * 4
    with pytest.raises(ConfigError, match="power-of-two SparseCore count"):
        _record(small_raw, tmp_path, "odd", "reference")

"""analyzers/core_busy.py against the store's device_idle view (the definition) and a
plain-Python count of busy units: random overlapping ops on several cores and tracks,
real captures of others, an emulated run."""

from __future__ import annotations

import contextlib
import io
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.context import RunContext
from analyzers.core_busy import device_idle_rows
from profiler.store import Store
from scprof.cli import main
from tests.analyzers.runkit import SC_OPS, TC_OPS, Ev, RunSpec, store_with
from tests.xplane.helpers import DATA

TC_OTHER = ("/device:TPU:{chip}", "Other Ops", "tensorcore")  # a second track of the same TensorCore
WHERE = (TC_OPS, TC_OTHER, SC_OPS)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WILD_RUNS = ("tpu_v6e_inference", "tf2_gpu_multi_worker", "jax_cpu_4dev_collectives")


def view_rows(store: Store, run_id: int) -> list[dict]:
    return store.rows("SELECT * FROM device_idle WHERE run_id = ? ORDER BY track_kind, chip, core", [run_id])


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w)
        for key, value in w.items():
            if isinstance(value, float):
                assert math.isclose(g[key], value, rel_tol=1e-12, abs_tol=1e-15), (key, g, w)
            else:
                assert g[key] == value, (key, g, w)


def busy_units(events: list[Ev], where: set) -> int:
    """Units of time at least one op of positive length covers (host work left out), counted one by one."""
    covered = set()
    for e in events:
        if e.where in where and e.dur > 0 and not (e.category or "").startswith("host_"):
            covered.update(range(e.start, e.start + e.dur))
    return len(covered)


op = st.builds(
    Ev,
    where=st.sampled_from(WHERE),
    chip=st.integers(0, 1),
    core=st.integers(0, 1),
    name=st.sampled_from(["fusion", "copy-start", "copy-done", "convolution"]),
    start=st.integers(0, 60),
    dur=st.integers(0, 25),
    category=st.sampled_from([None, "tc_compute", "host_other"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(op, min_size=0, max_size=40))
def test_random_overlapping_ops_match_the_view_and_a_unit_count(tmp_path_factory, events):
    tmp = tmp_path_factory.mktemp("busy")
    for e in events:
        if e.where != SC_OPS:
            e.core = 0  # a TensorCore is core 0; its two tracks are one core
    with store_with(tmp, RunSpec(events=events)) as store:
        got, want = device_idle_rows(RunContext(store, 1)), view_rows(store, 1)
        assert_same(got, want)
        for row in got:
            where = {w for w in WHERE if w[2] == row["track_kind"]}
            mine = [e for e in events if e.chip == row["chip"] and e.core == row["core"]]
            assert row["busy_ps"] == busy_units(mine, where)


@pytest.fixture(scope="module")
def wild_store(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("wild") / "s.duckdb")
    for name in WILD_RUNS:
        folder = os.path.join(DATA, "wild", name)
        target = (
            folder
            if os.path.isdir(os.path.join(folder, "plugins"))
            else next(os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f != "PROVENANCE.md")
        )
        with contextlib.redirect_stderr(io.StringIO()):
            assert main(["ingest", target, "--db", db, "--name", name]) == 0
    return db


def test_real_captures_match_the_view(wild_store):
    with Store.open(wild_store, read_only=True) as store:
        runs = store.rows("SELECT run_id, name FROM runs ORDER BY run_id")
        assert {r["name"] for r in runs} == set(WILD_RUNS)
        for r in runs:
            got = device_idle_rows(RunContext(store, r["run_id"]))
            assert any(row["busy_ps"] for row in got), r["name"]
            assert_same(got, view_rows(store, r["run_id"]))


def test_an_emulated_run_matches_the_view(tmp_path):
    db = str(tmp_path / "s.duckdb")
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main(
                [
                    "record",
                    os.path.join(REPO, "configs", "baseline.toml"),
                    "--steps",
                    "3",
                    "--db",
                    db,
                    "--out",
                    str(tmp_path),
                ]
            )
            == 0
        )
    with Store.open(db, read_only=True) as store:
        got = device_idle_rows(RunContext(store, 1))
        assert {row["track_kind"] for row in got} == {"tensorcore", "sparsecore"}
        assert_same(got, view_rows(store, 1))

"""A capture file of a profiler session folder (`plugins/profile/<session>/`) is named after its session."""

from __future__ import annotations

import os
import shutil

import pytest

from profiler.errors import StoreError
from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from tests.xplane.helpers import JAX_SMALL

SESSION = "2026_11_29_10_00_00"
TORCH = os.path.join(os.path.dirname(__file__), "..", "data", "wild", "hta_gpu_train", "sampled_rank-0.json.gz")
TF2 = os.path.join(
    os.path.dirname(__file__), "..", "data", "wild", "tf2_gpu_multi_worker", "plugins", "profile", "GPU-multi-worker"
)


def _session(root, *files: tuple[str, str]) -> str:
    """A logdir under `root` whose one session holds (source, file name) copies; the session folder."""
    d = os.path.join(root, "logdir", "plugins", "profile", SESSION)
    os.makedirs(d)
    for src, name in files:
        shutil.copyfile(src, os.path.join(d, name))
    return d


def _names(db, paths, **kw) -> list[str]:
    with Store.open(str(db)) as store:
        return [r.name for r in ingest_traces(store, paths, **kw)]


def test_a_lone_host_file_is_named_after_its_session(tmp_path):
    d = _session(tmp_path, (JAX_SMALL, "host0.xplane.pb"))
    assert _names(tmp_path / "a.duckdb", [os.path.join(d, "host0.xplane.pb")]) == [SESSION]
    assert _names(tmp_path / "b.duckdb", [os.path.join(d, "host0.xplane.pb")], name="mine") == ["mine"]
    with Store.open(str(tmp_path / "a.duckdb"), read_only=True) as st:
        assert st.rows("SELECT name FROM runs") == [{"name": SESSION}]
        assert st.resolve_run(SESSION) == 1


def test_one_host_file_of_several_is_named_session_slash_host(tmp_path):
    hosts = sorted(f for f in os.listdir(TF2) if f.endswith(".xplane.pb"))
    d = _session(tmp_path, *((os.path.join(TF2, h), h) for h in hosts))
    first = hosts[0].removesuffix(".xplane.pb")
    assert _names(tmp_path / "a.duckdb", [os.path.join(d, hosts[0])]) == [f"{SESSION}/{first}"]
    with Store.open(str(tmp_path / "a.duckdb"), read_only=True) as st:
        assert st.resolve_run(f"{SESSION}/{first}") == 1
    # The folder itself is one run of every host, named after the session as before.
    assert _names(tmp_path / "b.duckdb", [d]) == [SESSION]


def test_a_file_outside_a_session_folder_keeps_its_own_name(tmp_path):
    d = tmp_path / "plugins" / "elsewhere"
    d.mkdir(parents=True)
    shutil.copyfile(JAX_SMALL, d / "host0.xplane.pb")
    assert _names(tmp_path / "a.duckdb", [str(d / "host0.xplane.pb")]) == ["host0"]


def test_a_chrome_trace_in_a_session_folder_is_named_after_its_session(tmp_path):
    d = _session(tmp_path, (TORCH, "worker0.pt.trace.json.gz"))
    assert _names(tmp_path / "a.duckdb", [os.path.join(d, "worker0.pt.trace.json.gz")]) == [SESSION]
    shutil.copyfile(TORCH, os.path.join(d, "worker1.pt.trace.json.gz"))
    assert _names(tmp_path / "b.duckdb", [os.path.join(d, "worker1.pt.trace.json.gz")]) == [f"{SESSION}/worker1"]
    # Two files of one session on one command: named apart, so both go in (the same trace: refused as one run).
    with pytest.raises(StoreError, match="the same run as"):
        _names(tmp_path / "c.duckdb", [os.path.join(d, f"worker{i}.pt.trace.json.gz") for i in (0, 1)])

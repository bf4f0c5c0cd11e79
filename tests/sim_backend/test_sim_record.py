"""record_run: trace contents the analyzers rely on, summary, the limits feedback loop."""

from __future__ import annotations

import io
import json
import os
import tomllib

import numpy as np
import pytest

from profiler.progress import TerminalProgress
from profiler.reader import read_trace
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.config import config_from_dict
from sim_backend.errors import ConfigError, PreprocessError
from sim_backend.recording.record import format_summary, record_run
from tests.sim_backend.conftest import CONFIG_DIR

BASELINE = os.path.join(CONFIG_DIR, "baseline.toml")


def small_file(tmp_path, raw: dict) -> str:
    """Write a dict workload as TOML (tables and features as arrays of tables)."""
    lines = []

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)

    for k, v in raw.items():
        if not isinstance(v, (dict, list)):
            lines.append(f"{k} = {value(v)}")
    for k, v in raw.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f"{kk} = {value(vv)}" for kk, vv in v.items()]
    for k in ("tables", "features"):
        for entry in raw[k]:
            lines.append(f"[[{k}]]")
            lines += [f"{kk} = {value(vv)}" for kk, vv in entry.items()]
    path = tmp_path / "small.toml"
    path.write_text("\n".join(lines) + "\n")
    config_from_dict(tomllib.loads(path.read_text()))  # the file round-trips
    return str(path)


def test_trace_has_xprof_tracks_steps_and_typed_args(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    res = record_run(path, [], "mine", None, str(tmp_path / "out"))
    assert res.trace_path == str(tmp_path / "out" / "trace.sctrace")
    tr = read_trace(res.trace_path)
    assert tr.header.run_name == "mine" and tr.header.producer.startswith("scprof-sim")
    assert tr.header.hardware.generation == "v5p" and tr.header.hardware.num_chips == 2
    config = json.loads(tr.header.config_json)
    assert config["sparsecore"]["max_ids_per_partition"] == 4096
    assert config["resolved"]["table_groups"][0]["tables"] == ["big", "mid"]
    planes = {(t.plane, t.line) for t in tr.tracks}
    for c in range(2):
        for line in ("Steps", "XLA Modules", "XLA Ops"):
            assert (f"/device:TPU:{c}", line) in planes
        for k in range(4):
            for line in ("Sparse Core Steps", "Sparse Core Modules", "Sparse Core Ops"):
                assert (f"/device:TPU:{c} SparseCore {k}", line) in planes
    assert any(p == "/host:CPU" for p, _ in planes)
    ev = tr.data["events"]
    names = np.array(tr.strings, dtype=object)[ev["name"]]
    assert {
        "SparseDenseMatmulOp",
        "SparseDenseMatmulGradOp",
        "dense_forward",
        "dense_backward",
        "all-to-all.activations",
        "all-reduce.dense_gradients",
        "preprocess_input",
        "host_to_hbm_transfer",
        "jit_train_step",
        "sparse_core_forward",
    } <= set(names)
    assert (ev["step"][names != "table_layout"] >= 0).all()  # the layout precedes step 0
    sc = names == "SparseDenseMatmulOp"
    assert (ev["ids"][sc] >= ev["unique_ids"][sc]).all()
    tables = np.array(tr.strings, dtype=object)[ev["table"][sc]]
    assert set(tables) == {"big_mid", "tiny"}
    row_bytes = np.where(tables == "tiny", 16 * 4, 32 * 4)  # width x f32 (multiples of 32 B: no padding)
    # HBM bytes moved: each unique row read, each ID's f32 activation row written
    assert (ev["bytes"][sc] == (ev["unique_ids"][sc] + ev["ids"][sc]) * row_bytes).all()
    tc = names == "dense_forward"
    assert (ev["flops"][tc] > 0).all()
    # partition statistics: one row per step x table group x SparseCore of the slice
    ps = tr.data["partition_stats"]
    assert len(ps["step"]) == small_raw["steps"] * 2 * 8
    assert (ps["max_ids_per_partition"] > 0).all()
    # step markers on every TensorCore and SparseCore
    assert len(tr.data["steps"]["step"]) == small_raw["steps"] * (2 + 8)
    assert len(tr.data["counters"]["ts_ps"]) > 0


def test_record_defaults_and_summary(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    os.chdir(tmp_path)
    # the stack big_mid sees ~55 IDs per partition; its largest hash bucket (< 32) still fits
    res = record_run(path, ["sparsecore.max_ids_per_partition=32"], None, 2, None)
    assert res.trace_path == os.path.join("runs", "small", "trace.sctrace")
    assert res.steps == 2 and res.run_name == "small" and res.minibatches_per_step > 1
    assert res.share_host + res.share_sc + res.share_tc + res.share_idle == pytest.approx(1.0)
    # what it read and wrote besides the trace; the figures are the stored analysis's to print
    assert format_summary(res) == f"perf tables  {res.perf_tables}"
    res = record_run(path, ["flags.xla_sparse_core_estimate_max_ids=true"], "est", 2, None)
    assert format_summary(res).splitlines()[1:] == [
        f"limits written  {res.limits_path}",
        f"FDO stats  {res.fdo_stats_path} (jax-tpu-embedding CSVFileFDOClient format)",
    ]


def test_user_errors_are_value_errors(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    with pytest.raises(ConfigError, match="^--steps"):
        record_run(path, [], None, 0, str(tmp_path / "o"))
    with pytest.raises(ConfigError, match=r"\.toml: sparsecore.bogus"):
        record_run(path, ["sparsecore.bogus=1"], None, 1, str(tmp_path / "o"))
    with pytest.raises(PreprocessError, match="stack 'big_mid' .*max_ids_per_partition=1 "):
        record_run(
            path,
            ["sparsecore.max_ids_per_partition=1", "sparsecore.enable_minibatching=false"],
            None,
            1,
            str(tmp_path / "o"),
        )


def test_progress_callback_and_bar(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    seen = []
    record_run(path, [], None, 3, str(tmp_path / "a"), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    buf = io.StringIO()
    bar = TerminalProgress("simulating", "steps", stream=buf)
    bar(1, 2)
    bar(2, 2)
    assert "simulating [" in buf.getvalue() and "1/2 steps" in buf.getvalue() and buf.getvalue().endswith("\r")


def test_derived_limits_close_the_loop(small_raw, tmp_path):
    """8-step procedure: derive limits, record again with them: no minibatching left."""
    small_raw["sparsecore"].update(max_ids_per_partition=32, max_unique_ids_per_partition=16)
    path = small_file(tmp_path, small_raw)
    first = record_run(path, ["flags.xla_sparse_core_estimate_max_ids=true"], "first", None, str(tmp_path / "first"))
    assert first.minibatches_per_step > 1 and first.limits_path and first.fdo_stats_path
    again = record_run(
        path, [f"flags.xla_sparse_core_max_ids_file={first.limits_path}"], "again", None, str(tmp_path / "again")
    )
    assert again.minibatches_per_step == 1.0 and again.dropped_ids == 0


def test_bundled_limits_file_is_what_the_baseline_derives(tmp_path):
    res = record_run(BASELINE, ["flags.xla_sparse_core_estimate_max_ids=true"], None, None, str(tmp_path / "b"))
    with open(res.limits_path, "rb") as a, open(os.path.join(CONFIG_DIR, "limits", "baseline_limits.toml"), "rb") as b:
        assert tomllib.load(a) == tomllib.load(b), (
            "configs/limits/baseline_limits.toml is stale: re-derive it (see its header)"
        )
    # the baseline's symptoms, and the tuned config fixing them
    tuned = record_run(os.path.join(CONFIG_DIR, "tuned.toml"), [], None, None, str(tmp_path / "t"))
    assert res.minibatches_per_step >= 2 and tuned.minibatches_per_step == 1.0
    assert tuned.mean_step_time_ps < 0.9 * res.mean_step_time_ps
    assert res.wall_time_s < 30


VARIANT_LIMITS = sorted(
    f for f in os.listdir(os.path.join(CONFIG_DIR, "limits")) if f.endswith(".toml") and f != "baseline_limits.toml"
)


@pytest.mark.parametrize("name", VARIANT_LIMITS)
def test_bundled_variant_limits_files_are_fresh(name):
    """Each configs/limits/*.toml is what the runs its header names derive (configs/limits/derive.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive", os.path.join(CONFIG_DIR, "limits", "derive.py"))
    derive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(derive)
    path = os.path.join(CONFIG_DIR, "limits", name)
    assert derive.derive(path) == derive.current(path), f"configs/limits/{name} is stale: re-derive it"


def test_trace_ingests_into_the_store(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    res = record_run(path, [], None, 2, str(tmp_path / "o"))
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        ingest_trace(store, res.trace_path, name=res.run_name)
        rows = store.rows("SELECT count(*) AS n FROM events")
        assert rows[0]["n"] == len(read_trace(res.trace_path).data["events"]["step"])
        assert store.rows("SELECT count(*) AS n FROM sc_partition_stats")[0]["n"] == 2 * 2 * 8


def test_header_stores_the_effective_config_after_overrides(small_raw, tmp_path):
    path = small_file(tmp_path, small_raw)
    res = record_run(path, ["flags.maximum_parallel_iterations=3", "tables.mid.width=32"], None, 1, str(tmp_path / "o"))
    config = json.loads(read_trace(res.trace_path).header.config_json)
    assert config["flags"]["maximum_parallel_iterations"] == 3
    assert config["steps"] == 1 and config["run_name"] == "small"
    assert config["resolved"]["hardware"]["sparsecores_per_chip"] == 4
    assert config["resolved"]["limits"]["big_mid"]["max_ids_per_partition"] == 4096  # per stack
    assert config["resolved"]["limits"]["big_mid"]["source"] == "default"

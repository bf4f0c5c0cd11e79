"""A run that fails (HBM out of memory) is still stored, marked failed, and analyzed."""

from __future__ import annotations

from analyzers.registry import analyze_run
from profiler.store import Store
from tests.tracekit import REPO, assert_one_error, cli

OOM = ["--set", "dense.top_mlp=[32768,32768,32768,1]", "--steps", "3"]  # heap past 96 GiB per chip


def test_failed_record_is_stored_and_reported(tmp_path, capsys):
    db = str(tmp_path / "f.duckdb")
    result = cli(
        capsys,
        "record",
        REPO / "configs" / "hbm_pressure.toml",
        *OOM,
        "--name",
        "oom",
        "--db",
        db,
        "--out",
        tmp_path / "oom",
    )
    line = assert_one_error(result, "Ran out of memory in memory space hbm", "hbm_pressure.toml")
    assert "recorded in" in line
    with Store.open(db, read_only=True) as store:
        (run,) = store.rows("SELECT name, status FROM runs")
        assert run == {"name": "oom", "status": "failed"}
        findings = analyze_run(store, store.resolve_run("oom")).findings
    assert findings[0].rule == "failure_hbm_oom" and findings[0].severity == "critical"
    assert "Exceeded hbm capacity" in findings[0].evidence["message"]

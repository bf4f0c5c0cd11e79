"""`scprof analyze` on imported XProf captures: it runs, and says which analyses the capture cannot feed.

The committed JAX captures come from the CPU: host planes only, steps marked by
`StepTraceAnnotation` (step_num), XLA ops on the CPU client's threads (the CPU device,
profiler/xspace/map_kinds.py), no SparseCore partition statistics, no HBM counters. Every
analyzer must run and name what is missing instead of reporting figures it never
measured (e.g. "0 IDs dropped"); the step breakdown is measured on the CPU device.
"""

from __future__ import annotations

import json

import pytest

from scprof.cli import main
from tests.xplane.helpers import JAX_RUN_DIR, JAX_SMALL
from tests.xplane.synth import tpu_space

# Analyzer -> words its note must carry for a host-only CPU capture.
LACKING_ON_CPU = {
    "overlap": "no TensorCore or SparseCore op events",
    "minibatching": "sc_partition_stats",
    "id_dropping": "sc_partition_stats",
    "skew": "sc_partition_stats",
    "memory": "no device memory counters",  # a CPU run's word for its memory, not HBM
    "stacking": "no table layout",
}


def _analyze(capsys, db: str, run: str, *extra: str) -> str:
    capsys.readouterr()
    assert main(["analyze", run, "--db", db, *extra]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", [JAX_SMALL, JAX_RUN_DIR])
def test_analyze_a_jax_cpu_capture_names_what_it_lacks(tmp_path, capsys, path):
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", path, "--db", db, "--name", "jax"]) == 0
    report = json.loads(_analyze(capsys, db, "jax", "--json"))
    assert report["run"]["source"] == "xplane"
    assert report["findings"] == []
    for name, words in LACKING_ON_CPU.items():
        assert any(words in n for n in report["notes"].get(name, [])), (name, report["notes"].get(name))
    assert "id_dropping" not in report["figures"]  # not measured, so no "0 dropped"
    # the host's step time (host step markers give the CPU device's steps) split by category on
    # the CPU device: its XLA ops, the host's work while it idles
    b = report["figures"]["breakdown"]
    assert b["steps"] >= 3 and b["step_ps_mean"] > 0
    assert b["share"]["device_compute"] > 0 and sum(b["share"].values()) == pytest.approx(1.0)
    assert "breakdown" not in report["notes"] and "idle_gaps" not in report["notes"]
    text = _analyze(capsys, db, "jax")
    assert "Not analysed (data the run lacks):" in text
    assert "device_compute" in text
    for name in LACKING_ON_CPU:
        assert f"  - {name}: " in text


def test_analyze_a_tpu_like_capture_measures_its_steps(tmp_path, capsys):
    path = str(tmp_path / "tpu.xplane.pb")
    with open(path, "wb") as f:
        f.write(tpu_space(steps=3).SerializeToString())
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", path, "--db", db, "--name", "tpu"]) == 0
    report = json.loads(_analyze(capsys, db, "tpu", "--json"))
    b = report["figures"]["breakdown"]
    assert b["steps"] == 3 and b["step_ps_mean"] == pytest.approx(1_000_000_000 - 1000, rel=1e-6)
    assert "breakdown" not in report["notes"] and "idle_gaps" not in report["notes"]
    # No partition statistics in an XSpace: the SparseCore limit analyses say so.
    for name in ("minibatching", "id_dropping", "skew"):
        assert any("sc_partition_stats" in n for n in report["notes"][name]), name

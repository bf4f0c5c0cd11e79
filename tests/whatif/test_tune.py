"""`scprof tune`: finds the bundled tuned config's gain on the baseline, takes only significant
improvements, writes a config that records to the claimed step time, refuses what fails."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from profiler.store import Store
from scprof.cli import main
from whatif.engine import Change, Measured, counted_step_ps
from whatif.verify import judge

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_tune_finds_at_least_the_bundled_tuned_gain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.duckdb")
    assert (
        main(["record", str(CONFIGS / "tuned.toml"), "--steps", "8", "--db", db, "--out", str(tmp_path / "tuned")]) == 0
    )
    capsys.readouterr()
    out = tmp_path / "tune"
    result = _run_json(
        capsys,
        "tune",
        str(CONFIGS / "baseline.toml"),
        "--set",
        "steps=8",
        "--workers",
        "1",
        "--out",
        str(out),
        "--db",
        db,
        "--json",
    )
    with Store.open(db, read_only=True) as store:
        tuned_ps = counted_step_ps(store, store.resolve_run("tuned")).mean()
        rows = store.rows("SELECT step_time_ps, accepted FROM whatif_trials WHERE purpose = 'tune' ORDER BY seq")
    assert set(result) >= {"baseline", "best", "trials", "simulations"}
    assert result["best"]["step_time_ps"] <= tuned_ps * 1.001
    assert result["best"]["change"] < -0.15 and result["best"]["ci_high"] < 0
    assert result["simulations"] < 64
    # every accepted trial is faster than the one accepted before it
    accepted = [t["step_time_ps"] for t in result["trials"] if t["accepted"]]
    path = [result["baseline"]["step_time_ps"], *accepted]
    assert accepted and all(b < a for a, b in zip(path, path[1:], strict=False))
    assert [r["accepted"] for r in rows] == [t["accepted"] for t in result["trials"]]
    # the tuned config is one TOML file that records to the claimed step time (within 1%)
    config = Path(result["best"]["config"])
    assert config == out / "tuned" / "baseline" / "tuned.toml" and "max_ids_file" not in tomllib.loads(
        config.read_text()
    )["flags"].get("xla_sparse_core_max_ids_file", "max_ids_file")
    assert main(["record", str(config), "--db", db, "--out", str(tmp_path / "again")]) == 0
    capsys.readouterr()
    with Store.open(db, read_only=True) as store:
        again_ps = counted_step_ps(store, store.resolve_run("baseline-tuned")).mean()
    assert again_ps == pytest.approx(result["best"]["step_time_ps"], rel=0.01)


def _measured(verdict: str, step_ps: float | None, dropped: int = 0, failure: str | None = None) -> Measured:
    change = None if step_ps is None else step_ps / 100 - 1
    return Measured(Change({"k": 1}), 1, "t", step_ps, 100.0, change, -0.3, -0.1, verdict, failure, dropped, True)


def test_judge_never_takes_a_failed_a_dropping_or_a_slower_trial() -> None:
    assert judge(_measured("improved", 80.0), 0, False)[0]
    assert not judge(_measured("failed", None, failure="HBM OOM: 96 GiB over 95 GiB"), 0, False)[0]
    ok, why = judge(_measured("improved", 80.0, dropped=10), 0, False)
    assert not ok and "drops 10 IDs" in why
    assert judge(_measured("improved", 80.0, dropped=10), 0, True)[0]  # the user allowed dropping
    assert not judge(_measured("regressed", 120.0), 0, False)[0]
    for verdict in ("inconclusive", "no change", "not enough steps"):
        ok, why = judge(_measured(verdict, 99.5), 0, False)
        assert not ok and why.startswith(f"{verdict}: ")
    assert not judge(_measured("improved", 80.0), 0, False, changes_numerics=True)[0]


def test_tune_refuses_a_real_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.duckdb")
    capture = Path(__file__).resolve().parents[1] / "data" / "jax_cpu_small.xplane.pb"
    assert main(["ingest", str(capture), "--name", "jax", "--db", db]) == 0
    capsys.readouterr()
    assert main(["tune", "jax", "--db", db, "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an emulated run" in err


def _win(change: Change, rel: float) -> Measured:
    return Measured(
        change, 1, "t", 100.0 * (1 + rel), 100.0, rel, rel - 0.02, rel + 0.02, "inconclusive", None, 0, True
    )


def test_small_wins_are_tried_together() -> None:
    from whatif.tune import combined

    current = Change({"flags.maximum_parallel_iterations": 2})
    wins = [
        _win(current.merged(Change({"host.num_threads": 8})), -0.004),
        _win(current.merged(Change({}, derive_limits=True)), -0.009),
        _win(current.merged(Change({"host.num_threads": 16})), -0.002),  # the same knob as another win
    ]
    got = {c.key() for c in combined(current, wins)}
    expected = [
        current.merged(Change({"host.num_threads": 8}, derive_limits=True)),  # the pair of different knobs
        current.merged(Change({"host.num_threads": 16}, derive_limits=True)),
        current.merged(Change({"host.num_threads": 8}, derive_limits=True)),  # all at once: one value per knob
    ]
    assert got == {c.key() for c in expected}
    assert combined(current, wins[:1]) == []


def test_verify_on_a_real_capture_keeps_the_analysis_and_says_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.duckdb")
    capture = Path(__file__).resolve().parents[1] / "data" / "jax_cpu_small.xplane.pb"
    assert main(["ingest", str(capture), "--name", "jax", "--db", db]) == 0
    capsys.readouterr()
    doc = _run_json(capsys, "analyze", "jax", "--verify", "--db", db, "--json")
    assert doc["simulations"] == 0 and "not an emulated run" in doc["not_verified"]
    assert doc["run"]["name"] == "jax" and "figures" in doc
    with Store.open(db, read_only=True) as store:
        assert store.rows("SELECT count(*) AS n FROM whatif_trials")[0]["n"] == 0


def test_attribute_on_real_captures_keeps_the_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.duckdb")
    data = Path(__file__).resolve().parents[1] / "data" / "input_pipeline"
    for name in ("host_bound", "prefetched"):
        assert main(["ingest", str(data / name), "--name", name, "--db", db]) == 0
    capsys.readouterr()
    doc = _run_json(capsys, "compare", "host_bound", "prefetched", "--attribute", "--db", db, "--json")
    assert doc["attribution"] is None and "not an emulated run" in doc["not_attributed"]
    assert doc["step_time"]["verdict"] == "improved" and not doc["step_time"]["paired"]


def test_tune_refuses_a_failed_run_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.duckdb")
    assert main(["record", str(CONFIGS / "spmem_overflow.toml"), "--db", db, "--out", str(tmp_path / "f")]) == 2
    capsys.readouterr()
    assert main(["tune", "spmem_overflow", "--db", db, "--workers", "1", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no counted steps" in err and "TileSpmem" in err
    assert not (tmp_path / "t").exists()
    with Store.open(db, read_only=True) as store:
        assert store.rows("SELECT count(*) AS n FROM whatif_trials")[0]["n"] == 0

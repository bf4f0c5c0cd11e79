"""docs/emulator.md cannot rot: every config key, cost constant, bundled config and event name."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from sim_backend.config import iter_keys
from sim_backend.costmodel import CostConstants
from sim_backend.hardware import PRESETS
from sim_backend.recording.instrument import SC_BWD_MODULE, SC_FWD_MODULE, TC_MODULE
from sim_backend.stepgraph import KIND_NAMES
from tests.sim_backend.conftest import BUNDLED, REPO

DOC = Path(os.path.join(REPO, "docs", "emulator.md")).read_text()


@pytest.mark.parametrize("key", [k for k, _, _ in iter_keys()])
def test_every_config_key_is_documented(key):
    assert f"| `{key}` |" in DOC, f"docs/emulator.md: config key {key} missing from the table"


# The public documents the doc cites, by the short titles its "Sources" list gives them.
SOURCES = re.findall(r"^- \*\*([^*]+)\*\*:", DOC.split("Sources:", 1)[1].split('\n\n"Assumption"', 1)[0], re.M)


def test_sources_are_listed():
    assert {"SparseCore guide", "XLA LHS cost model", "Mirage persistent kernel"} <= set(SOURCES), SOURCES


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(CostConstants)])
def test_every_cost_constant_is_documented_with_a_source(name):
    row = next((line for line in DOC.splitlines() if line.startswith(f"| `{name}` |")), None)
    assert row is not None, f"cost constant {name} missing"
    assert any(source in row for source in SOURCES) or "assumption" in row, row


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_config_is_documented(name):
    assert f"`{name}`" in DOC


def test_event_names_and_presets_are_documented():
    for name in [*KIND_NAMES.values(), TC_MODULE, SC_FWD_MODULE, SC_BWD_MODULE]:
        assert f"`{name}`" in DOC, name
    for gen in PRESETS:
        assert f"| {gen} |" in DOC or f" {gen} |" in DOC.split("### Hardware presets")[1][:300]

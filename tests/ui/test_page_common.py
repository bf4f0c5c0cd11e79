"""What every run page shares (ui/pages/common.py): the run header's hardware text."""

from __future__ import annotations


def test_run_header_names_hardware_only_as_far_as_the_trace_says():
    from ui.pages.common import hardware_text

    assert hardware_text("v5p", 4) == "v5p × 4 chips"
    assert hardware_text("CPU", 1) == "CPU × 1 chip"
    assert hardware_text("", 2) == "2 chips"
    assert hardware_text("v6e", None) == "v6e"
    assert hardware_text(None, 0) == "hardware not recorded"  # was "? × ? chips"

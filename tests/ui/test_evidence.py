"""Findings' evidence for people (ui/evidence.py): a label per key, a value formatted by the key's
unit suffix."""

from __future__ import annotations

from ui.evidence import evidence_label, format_evidence


def test_evidence_keys_read_as_words_and_format_by_their_unit_suffix():
    assert evidence_label("peak_ts_ps") == "peak at"
    assert format_evidence("peak_ts_ps", 47_320_039_028, start_ps=20_039_028) == "47.3 ms from the run's start"
    assert evidence_label("hbm_peak_bytes") == "HBM peak" and format_evidence("hbm_peak_bytes", 3 * 2**30) == "3 GiB"
    assert evidence_label("estimated_overhead_ps_per_step") == "estimated overhead per step"
    assert format_evidence("estimated_overhead_ps_per_step", 86_144_807.6) == "86.1 µs"
    assert evidence_label("idle_ps") == "idle time" and format_evidence("idle_ps", 1_013_962_046) == "1.01 ms"
    assert format_evidence("sparsecore_input_wait_share", 0.5257) == "52.6%"
    assert format_evidence("share_of_table_bytes", 0.25) == "25.0%"  # a share, not bytes
    assert format_evidence("dropped_ids", 156704) == "156,704" and evidence_label("dropped_ids") == "dropped IDs"
    assert format_evidence("worst_max_over_mean", 8.1384) == "8.14×"
    assert format_evidence("persistence", 1.0) == "100.0%"
    assert format_evidence("pipelining_disabled", True) == "yes"

"""Findings' evidence for people (profiler/units.py, the one formatter of the CLI and the UI): a
label per key, a value formatted by the key's unit suffix, nested values leaf by leaf."""

from __future__ import annotations

from profiler.units import evidence_items, evidence_label, format_evidence, unit_of


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
    assert format_evidence("largest_limit_over_observed", 1456.3107) == "1,456×"
    assert format_evidence("persistence_share", 1.0) == "100.0%"
    assert format_evidence("cv_ratio", 2.2412) == "2.24×" and evidence_label("cv_ratio").endswith("(CV)")
    assert format_evidence("pipelining_disabled", True) == "yes"
    assert format_evidence("per_step_median_dropped_ids", 103_002.5) == "103,002"  # no 1.03e+05
    assert format_evidence("mean_minibatches", 11.25) == "11.2"


def test_the_unit_comes_from_the_suffix_alone():
    """No key is an exception: a name that does not end in its unit is a plain number."""
    assert [unit_of(k) for k in ("a_ps", "a_ts_ps", "a_bytes", "a_share", "a_ratio", "a_over_b")] == [
        "ps",
        "ts",
        "bytes",
        "share",
        "ratio",
        "ratio",
    ]
    assert unit_of("persistence") == unit_of("cv") == unit_of("share_like_figure") == "count"
    assert unit_of("bytes_read_count") == "count"


def test_nested_values_are_formatted_leaf_by_leaf_without_braces():
    wait = {"host_input_share": 0.92, "input_transfer_share": 0.0125}
    assert format_evidence("wait_share", wait) == "host input share 92.0%, input transfer share 1.2%"
    events = [{"name": "Iterator::Map", "total_ps": 6_759_559_808_000, "events": 120}, {"name": "b", "total_ps": 5}]
    assert (
        format_evidence("host_input_events", events)
        == "Iterator::Map (total time 6.76 s, events 120); b (total time 5 ps)"
    )
    assert format_evidence("tables", ["t1", "t2"]) == "t1, t2"
    assert format_evidence("sizes_bytes", [1024, 2048]) == "1 KiB, 2 KiB"
    rows = evidence_items({"a_ps": 1e9, "gone": None, "b": float("nan"), "n": 3})
    assert rows == [("a_ps", "a time", "1 ms"), ("n", "n", "3")]  # absent figures left out

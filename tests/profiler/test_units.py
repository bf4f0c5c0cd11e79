"""Figures in human units: one definition for the CLI, the UI and the emulator's messages."""

from __future__ import annotations

import pytest

from profiler.units import format_bytes, format_delta, format_fine_share, format_ps, format_value, unit_of


@pytest.mark.parametrize(
    "ps, text",
    [
        (None, "-"),
        (0, "0 ps"),
        (999, "999 ps"),
        (1_000, "1 ns"),
        (1_500_000, "1.5 µs"),
        (2_900_000_000, "2.9 ms"),
        (1_160_000_000_000, "1.16 s"),
        (-2_000, "-2 ns"),
        (float("nan"), "-"),
    ],
)
def test_format_ps(ps, text):
    assert format_ps(ps) == text


@pytest.mark.parametrize("n, text", [(None, "-"), (512, "512 B"), (1536, "1.5 KiB"), (96 << 30, "96 GiB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (None, "ps", "-"),
        (float("nan"), "count", "-"),
        (982_300_000, "ps", "982 µs"),
        (1_200_000, "step_ps", "1.2 µs"),
        (3 << 30, "bytes", "3 GiB"),
        (7.886, "ratio", "7.89×"),
        (7.886, "x mean partition load", "7.89× mean partition load"),
        (1234.5, "ratio", "1,234×"),
        (0.4213, "share", "42.1%"),
        (0.5, "share of step time", "50.0%"),
        (1234, "count", "1,234"),
        (1234.5, "count", "1,234.50"),
        (12345.678, "IDs/s", "1.235e+04 IDs/s"),
        (7, "steps", "7 steps"),
        ("fused", "text", "fused"),
        (12345, "index", "12345"),
    ],
)
def test_format_value(value, unit, text):
    assert format_value(value, unit) == text


@pytest.mark.parametrize(
    "base, cand, unit, text",
    [
        (1_000_000, 800_000, "ps", "−200 ns (−20.0%)"),
        (0.25, 0.30, "share", "+5.0 pp"),
        (0, 0, "count", "±0"),
        (None, 3, "count", "-"),
    ],
)
def test_format_delta(base, cand, unit, text):
    assert format_delta(base, cand, unit) == text


@pytest.mark.parametrize(
    "name, unit",
    [
        ("step_ps_mean", "ps"),
        ("idle_ps_per_step", "ps"),
        ("hbm_peak_bytes", "bytes"),
        ("tc_share", "share"),
        ("skew_ratio", "ratio"),  # a ratio is ×, as evidence reads it: one reading of names everywhere
        ("max_over_mean", "ratio"),
        ("dropped_ids", "count"),
        ("step_ps_p50", "ps"),  # the unit, then a statistic
        ("bytes_accessed", "bytes"),
        ("bytes_read_count", "count"),
        ("operational_intensity_flop_per_byte", "flop_per_byte"),  # not a share for the "ratio" in "operational"
        ("hbm_bandwidth_bytes_per_s", "bytes_per_s"),
        ("tc_idle_share_waiting_for_input", "share"),
        ("peak_ts_ps", "ts"),
        ("flops", "flop"),
    ],
)
def test_unit_of_reads_the_unit_in_the_name(name, unit):
    assert unit_of(name) == unit


def test_rates_and_intensities_print_with_their_units():
    assert format_value(339e9, unit_of("hbm_bandwidth_bytes_per_s")) == format_bytes(339e9) + "/s"
    assert format_value(246.909, unit_of("operational_intensity_flop_per_byte")) == "247 FLOP/byte"


@pytest.mark.parametrize("v, text", [(None, "-"), (0.0, "0.0%"), (0.000282813, "0.028%"), (0.125, "12.5%")])
def test_format_fine_share_keeps_the_digits_a_small_share_needs(v, text):
    assert format_fine_share(v) == text

"""What every run page shares (ui/pages/common.py): the run header's hardware text."""

from __future__ import annotations


def test_run_header_names_hardware_only_as_far_as_the_trace_says():
    from ui.pages.common import hardware_text

    assert hardware_text("v5p", 4) == "v5p × 4 chips"
    assert hardware_text("CPU", 1) == "CPU × 1 chip"
    assert hardware_text("", 2) == "2 chips"
    assert hardware_text("v6e", None) == "v6e"
    assert hardware_text(None, 0) == "hardware not recorded"  # was "? × ? chips"


def test_devices_other_than_tpu_chips_are_counted_by_their_own_noun():
    from ui.data import chip_name, device_noun, device_prefix
    from ui.pages.common import hardware_text

    assert hardware_text("", 16, "GPU") == "16 GPUs" and hardware_text(None, 1, "CPU") == "1 CPU"
    gpus = {0: "GPU:0", 1: "GPU:1"}
    assert (device_prefix(gpus), device_noun(gpus), chip_name(gpus, 5)) == ("GPU", "GPU", "GPU:5")
    tpus = {0: "TPU:0"}
    assert (device_noun(tpus), chip_name(tpus, 3), chip_name(tpus, 0)) == ("chip", "TPU:3", "TPU:0")
    mixed = {0: "GPU:0", 1: "CPU:1"}
    assert (device_noun(mixed), chip_name(mixed, 2)) == ("device", "device:2")
    assert (device_noun({}), chip_name({}, 2)) == ("chip", "TPU:2")  # no track names a chip: as before

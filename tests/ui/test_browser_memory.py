"""The Memory page in headless Chromium: a GPU capture's device memory from its allocators (the
table, bytes allocated per allocator on a byte axis, fragmentation on its own axis, the largest
allocations live at the peak) and an emulated run's HBM as before, with no allocator section.
Screenshots: test-artifacts/screenshots/memory-allocators-tf2.png and memory-allocators-emulated.png.

Fixtures as tests/ui/test_browser.py (Debian's chromium, the app served by werkzeug on loopback),
over the store of tests/ui/alloc_store.py."""

from __future__ import annotations

import pytest

from tests.ui.alloc_store import build_alloc_store
from tests.ui.browserkit import run_ids, serve, settle, shot


@pytest.fixture(scope="module")
def alloc_server(tmp_path_factory):
    """(url, run ids by name) of a server over the allocator store (tf2, cpu, emulated)."""
    db = build_alloc_store(tmp_path_factory.mktemp("alloc-browser"))
    with serve(db) as (url, app):
        yield url, run_ids(app)


def test_a_gpu_capture_shows_device_memory_by_allocator(alloc_server, page):
    url, ids = alloc_server
    page.goto(f"{url}/memory?run={ids['tf2']}")
    page.wait_for_selector("#memory-allocator-device-bytes .js-plotly-plot .scatterlayer .trace")
    page.wait_for_selector("#memory-allocator-fragmentation .js-plotly-plot .scatterlayer .trace")
    settle(page)
    body = page.inner_text("#memory-body")
    assert "Device memory (allocator)" in body and "No HBM counters" not in body
    assert "GPU_4_bfc · GPU:4" in page.inner_text("#memory-allocators")
    assert "GiB" in page.inner_text("#memory-allocator-device-bytes")  # the byte axis
    assert "%" in page.inner_text("#memory-allocator-fragmentation")  # ratios on an axis of their own
    assert "Other counters" not in body  # the allocator counters are not redrawn there
    assert page.locator("details[open] tbody tr").count() >= 5  # the largest live allocations
    shot(page, "memory-allocators-tf2")


def test_an_emulated_run_keeps_its_hbm_section(alloc_server, page):
    url, ids = alloc_server
    page.goto(f"{url}/memory?run={ids['emulated']}")
    page.wait_for_selector("#memory-hbm .js-plotly-plot")
    settle(page)
    body = page.inner_text("#memory-body")
    assert "HBM over time" in body and "Device memory (allocator)" not in body
    shot(page, "memory-allocators-emulated")

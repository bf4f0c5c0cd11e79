"""The Input page in headless Chromium: the host_bound capture's device time per step (the awaited
input in every step) and its input work by name, the prefetched capture's (input prepared ahead,
nothing awaited), and an emulated run's TensorCore time per step. Screenshots:
test-artifacts/screenshots/input-host-bound.png, input-prefetched.png and input-emulated.png.

Fixtures as tests/ui/test_browser.py (Debian's chromium, the app served by werkzeug on loopback),
over the store of tests/ui/input_store.py."""

from __future__ import annotations

import pytest

from tests.ui.browserkit import run_ids, serve, settle, shot
from tests.ui.input_store import build_input_store


@pytest.fixture(scope="module")
def input_server(tmp_path_factory):
    """(url, run ids by name) of a server over the Input store (host_bound, prefetched, emulated)."""
    db = build_input_store(tmp_path_factory.mktemp("input-browser"))
    with serve(db) as (url, app):
        yield url, run_ids(app)


@pytest.mark.parametrize(
    ("name", "shot_name"), [("host_bound", "input-host-bound"), ("prefetched", "input-prefetched")]
)
def test_a_capture_shows_its_device_time_per_step(input_server, page, name, shot_name):
    url, ids = input_server
    page.goto(f"{url}/input?run={ids[name]}")
    page.wait_for_selector("#input-device .js-plotly-plot .barlayer .trace")
    settle(page)
    chart = page.inner_text("#input-device")
    assert "device awaiting host input" in chart and "counted step" in chart
    assert page.locator("#input-device .barlayer .trace").count() == 4  # busy, awaited, ahead, other idle
    table = page.inner_text("#input-events")
    assert "preprocess_batch" in table and "make_batch" in table
    assert page.locator("#nav-input.active").count() == 1
    assert page.locator("#input-tensorcore").count() == 0
    shot(page, shot_name)


def test_an_emulated_run_shows_the_tensorcores_host_wait(input_server, page):
    url, ids = input_server
    page.goto(f"{url}/input?run={ids['emulated']}")
    page.wait_for_selector("#input-tensorcore .js-plotly-plot .barlayer .trace")
    settle(page)
    assert "TensorCores waiting for host input" in page.inner_text("#input-tensorcore")
    assert "preprocess_input" in page.inner_text("#input-events")
    assert page.locator("#input-device").count() == 0
    shot(page, "input-emulated")


def test_the_run_picker_opens_another_runs_input(input_server, page):
    url, ids = input_server
    page.goto(f"{url}/input?run={ids['host_bound']}")
    page.wait_for_selector("#input-device .js-plotly-plot")
    settle(page)
    page.click("#input-run")
    page.get_by_text(f"emulated (#{ids['emulated']})", exact=True).click()  # the open menu's option
    page.wait_for_function(f"() => location.search === '?run={ids['emulated']}'")
    page.wait_for_selector("#input-tensorcore .js-plotly-plot")
    settle(page)
    assert page.locator("#input-device").count() == 0

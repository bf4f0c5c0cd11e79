"""The Ops page in headless Chromium: an emulated run's and the TPU v6e capture's roofline (points
under the roof, the ridge marked) and op table, and the TF2 GPU capture's plain sentence with no chart.
Screenshots: test-artifacts/screenshots/ops-emulated.png, ops-tpu-v6e.png and ops-tf2.png.

Fixtures as tests/ui/test_browser.py (Debian's chromium, the app served by werkzeug on loopback),
over the store of tests/ui/ops_store.py."""

from __future__ import annotations

import pytest

from tests.ui.browserkit import run_ids, serve, settle, shot
from tests.ui.ops_store import build_ops_store


@pytest.fixture(scope="module")
def ops_server(tmp_path_factory):
    """(url, run ids by name) of a server over the Ops store (emulated, tpu_v6e, tf2)."""
    db = build_ops_store(tmp_path_factory.mktemp("ops-browser"))
    with serve(db) as (url, app):
        yield url, run_ids(app)


@pytest.mark.parametrize(("name", "shot_name"), [("emulated", "ops-emulated"), ("tpu_v6e", "ops-tpu-v6e")])
def test_a_run_with_flops_shows_its_roofline(ops_server, page, name, shot_name):
    url, ids = ops_server
    page.goto(f"{url}/ops?run={ids[name]}")
    page.wait_for_selector("#ops-roofline .js-plotly-plot .scatterlayer .trace")
    settle(page)
    chart = page.inner_text("#ops-roofline")
    assert "arithmetic intensity (FLOP/byte)" in chart and "ridge" in chart and "HBM roof" in chart
    assert page.locator("#ops-roofline .scatterlayer .trace").count() >= 4  # two roof segments, ridge, ops
    assert "FLOP/byte" in page.inner_text("#ops-table")
    assert page.locator("#nav-ops.active").count() == 1
    shot(page, shot_name)


def test_a_gpu_capture_without_flops_says_so(ops_server, page):
    url, ids = ops_server
    page.goto(f"{url}/ops?run={ids['tf2']}")
    page.wait_for_selector("#ops-table")
    settle(page)
    body = page.inner_text("#ops-body")
    assert "This capture records no FLOPs or bytes per op" in body
    assert page.locator("#ops-roofline").count() == 0 and "FLOP/byte" not in body
    shot(page, "ops-tf2")


def test_the_run_picker_opens_another_runs_ops(ops_server, page):
    url, ids = ops_server
    page.goto(f"{url}/ops?run={ids['emulated']}")
    page.wait_for_selector("#ops-roofline .js-plotly-plot")
    settle(page)
    page.click("#ops-run")
    page.get_by_text(f"tf2 (#{ids['tf2']})", exact=True).click()  # the open menu's option
    page.wait_for_function(f"() => location.search === '?run={ids['tf2']}'")
    page.wait_for_selector("#ops-body :text('This capture records no FLOPs')")
    settle(page)
    assert "This capture records no FLOPs or bytes per op" in page.inner_text("#ops-body")
    assert page.locator("#ops-roofline").count() == 0

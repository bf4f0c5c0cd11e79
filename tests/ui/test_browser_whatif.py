"""The what-if views end to end in headless Chromium (as tests/ui/test_browser.py) on a store with
whatif_trials rows: Findings shows the verified fix, Tuning its chart, table and download, Compare
the attribution; no error box, no console error. Screenshots in test-artifacts/screenshots/."""

from __future__ import annotations

import pytest

from tests.ui.browserkit import SHOTS, run_ids, serve, settle, shot
from tests.ui.whatif_store import PREFETCH, with_fixes


@pytest.fixture(scope="module")
def whatif_server(whatif_db):
    """The Dash app on the what-if store, its findings carrying the tests' fixes."""
    from ui import data

    real = data.analysis
    with pytest.MonkeyPatch.context() as mp, serve(whatif_db) as (url, app):
        mp.setattr(data, "analysis", lambda store, run: with_fixes(real(store, run)))
        yield url, run_ids(app)


def no_error(pg) -> None:
    assert pg.locator(".error-box").count() == 0, pg.inner_text(".error-box")


def test_whatif_views(whatif_server, page):  # noqa: F811 - the fixture
    url, ids = whatif_server
    page.goto(f"{url}/findings?run={ids['baseline']}")
    page.wait_for_selector(".finding-fix")
    settle(page)
    no_error(page)
    text = " ".join(page.inner_text("#findings-body").split())
    assert "Verified by simulation: −20.1% (95% CI −20.2% .. −20.1%), 980 µs -> 783 µs: recommended" in text
    assert "not verified yet: scprof analyze baseline --verify" in text
    shot(page, "11-findings-verified")

    page.click("#nav-tuning")
    page.wait_for_selector("#tuning-graph .js-plotly-plot, #tuning-graph.js-plotly-plot")
    settle(page)
    no_error(page)
    assert "5 trials, 2 accepted, 1 failed" in page.inner_text("#tuning-summary")
    assert page.locator("#tuning-trials tbody tr").count() == 5
    legend = page.locator("#tuning-graph .legend").text_content()
    assert "accepted path" in legend and "failed" in legend and "tried" in legend
    assert "mean step time (µs)" in page.locator("#tuning-graph .ytitle").text_content()
    shot(page, "12-tuning")
    with page.expect_download() as dl:
        page.click("#tuning-download")
    assert dl.value.suggested_filename == "baseline-tuned.toml"
    with open(dl.value.path()) as f:
        assert "maximum_parallel_iterations = 4" in f.read()

    page.goto(f"{url}/tuning?run={ids['tuned']}")
    page.wait_for_selector("#tuning-body .empty-state")
    settle(page)
    assert "scprof tune tuned" in page.inner_text("#tuning-body")
    shot(page, "13-tuning-empty")

    page.goto(f"{url}/compare?base={ids['baseline']}&cand={ids['tuned']}")
    page.wait_for_selector("#compare-attribution tbody tr")
    page.wait_for_selector("#compare-verdict-word")
    settle(page)
    no_error(page)
    table = page.inner_text("#compare-attribution")
    assert PREFETCH in table and page.locator("#compare-attribution tbody tr").count() == 2
    shot(page, "14-compare-attribution")
    page.locator("section:has(#compare-attribution)").screenshot(path=str(SHOTS / "15-compare-attribution-table.png"))

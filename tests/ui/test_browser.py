"""End to end in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright): every page
loads with data from two recorded runs and without console errors, the timeline zooms, Compare
shows the verdict, the SQL console returns rows and refuses a write.

Screenshots of each page land in test-artifacts/screenshots/ (not committed) for people to look at.
"""

from __future__ import annotations

import re

import pytest

from tests.ui.browserkit import serve, settle, shot


@pytest.fixture(scope="module")
def served(ui_db):
    with serve(ui_db) as (url, app):
        yield url, app


def test_runs_page_lists_both_runs(server, page):
    page.goto(f"{server}/runs")
    page.wait_for_selector("#runs-table tbody tr")
    settle(page)
    text = page.inner_text("#runs-table")
    assert "baseline" in text and "tuned" in text
    page.fill("#runs-filter", "tuned")
    page.press("#runs-filter", "Enter")
    page.wait_for_url(re.compile(r"filter=tuned"))
    page.wait_for_function("() => document.querySelectorAll('#runs-table tbody tr').length === 1")
    settle(page)
    page.fill("#runs-filter", "")
    page.press("#runs-filter", "Enter")
    page.wait_for_selector("#runs-table tbody tr:nth-child(2)")
    settle(page)
    shot(page, "01-runs")


def test_overview_shows_kpis_breakdown_and_findings(server, page, run_ids):
    page.goto(f"{server}/overview?run={run_ids['baseline']}")
    page.wait_for_selector("#overview-kpis")
    page.wait_for_selector("#overview-analysis .js-plotly-plot")
    settle(page)
    kpis = page.inner_text("#overview-kpis")
    assert "step time mean" in kpis and re.search(r"\d (µs|ms)", kpis)
    assert "Top findings" in page.inner_text("#overview-analysis")
    shot(page, "02-overview")


def test_timeline_zooms_into_exact_events(server, page, run_ids):
    """The canvas trace viewer (ui/assets/trace_*.js): a wheel zoom narrows the window client-side,
    the window lands in the URL, and reopening that URL restores it."""
    page.goto(f"{server}/timeline?run={run_ids['baseline']}")
    page.wait_for_function("() => window.scprofTrace && window.scprofTrace.ready")
    settle(page)
    before = page.evaluate("() => window.scprofTrace.view()")
    shot(page, "03-timeline")
    box = page.locator(".tv-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 60)
    for _ in range(6):
        page.mouse.wheel(0, -240)
    page.wait_for_function("() => window.scprofTrace.idle() && window.scprofTrace.stats.exact_ms !== null")
    after = page.evaluate("() => window.scprofTrace.view()")
    assert after["t1"] - after["t0"] < (before["t1"] - before["t0"]) / 5
    assert page.evaluate("() => window.scprofTrace.stats.exact")  # exact events once the tiles are in
    assert "exact events" in page.inner_text(".tv-status")
    shot(page, "04-timeline-zoomed")
    page.wait_for_url(re.compile(rf"t0={round(after['t0'])}&t1={round(after['t1'])}"))
    # The zoomed window is a deep link: opening the URL again restores it.
    page.goto(page.url)
    page.wait_for_function("() => window.scprofTrace && window.scprofTrace.ready")
    again = page.evaluate("() => window.scprofTrace.view()")
    assert (round(again["t0"]), round(again["t1"])) == (round(after["t0"]), round(after["t1"]))


def test_sparsecore_heatmaps(server, page, run_ids):
    page.goto(f"{server}/sparsecore?run={run_ids['baseline']}")
    page.wait_for_selector("#sc-heatmap .js-plotly-plot, #sc-heatmap.js-plotly-plot, #sc-heatmap")
    page.wait_for_selector("#sc-tables tbody tr")
    settle(page)
    assert "against the compiled limit" in page.inner_text("#sparsecore-body")
    shot(page, "05-sparsecore")
    page.check("#sparsecore-metric input[value='unique_ids']")
    page.wait_for_url(re.compile(r"metric=unique_ids"))
    page.wait_for_function(
        "() => (document.querySelector('#sparsecore-body') || {}).innerText?.includes("
        "'unique IDs per partition per SparseCore')"
    )
    settle(page)


def test_memory_page(server, page, run_ids):
    page.goto(f"{server}/memory?run={run_ids['baseline']}")
    page.wait_for_selector("#memory-hbm")
    settle(page)
    assert "HBM at each chip's peak" in page.inner_text("#memory-body")
    shot(page, "06-memory")


def test_findings_page(server, page, run_ids):
    page.goto(f"{server}/findings?run={run_ids['baseline']}")
    page.wait_for_selector("#findings-counts")
    settle(page)
    assert page.locator(".finding").count() >= 1
    shot(page, "07-findings")


def test_compare_shows_the_verdict(server, page, run_ids):
    page.goto(f"{server}/compare?base={run_ids['baseline']}&cand={run_ids['tuned']}")
    page.wait_for_selector("#compare-verdict-word")
    page.wait_for_selector("#compare-hist")
    settle(page)
    word = page.inner_text("#compare-verdict-word").lower()
    assert word in ("improved", "regressed", "no change", "inconclusive", "not enough steps")
    # the UI store's runs have 3 counted steps: no interval, and the banner says how many it needs
    change = page.inner_text("#compare-change")
    assert ("95% CI" in change) if word != "not enough steps" else ("3 vs 3 counted steps (5 needed each)" in change)
    shot(page, "08-compare")


def test_sql_console_returns_rows_and_refuses_a_write(server, page):
    page.goto(f"{server}/sql")
    page.wait_for_selector("#sql-text")
    settle(page)
    page.fill("#sql-text", "SELECT run_id, name, steps FROM runs ORDER BY run_id")
    page.click("#sql-run")
    page.wait_for_selector("#sql-result tbody tr")
    settle(page)
    assert page.locator("#sql-result tbody tr").count() == 2
    assert "q=SELECT" in page.url
    shot(page, "09-sql")
    with page.expect_download() as dl:
        page.click("#sql-csv")
    with open(dl.value.path()) as f:
        assert f.readline().strip() == "run_id,name,steps"
    page.fill("#sql-text", "DELETE FROM runs")
    page.click("#sql-run")
    page.wait_for_selector(".error-box")
    settle(page)
    assert "only read-only SELECT queries are allowed" in page.inner_text(".error-box")
    shot(page, "10-sql-refused")

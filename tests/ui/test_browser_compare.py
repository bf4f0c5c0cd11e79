"""Compare and Runs end to end in headless Chromium at 1600x1000 (as tests/ui/test_browser.py) on a
mixed store (ok runs, a failed run, real captures): the top bar's Compare link compares the run it
carries, a failed run and an unknown run are named in one line, the page's order, and the Runs
page keeps its links on screen and picks a pair. No console error. Screenshots in
test-artifacts/screenshots/ (and $SCPROF_SHOTS when set)."""

from __future__ import annotations

import re

import pytest

from tests.ui.browserkit import run_ids, serve, settle, shot, watched_page

WIDTH, HEIGHT = 1600, 1000


@pytest.fixture(scope="module")
def mixed_server(mixed_db):
    with serve(mixed_db) as (url, app):
        yield url, run_ids(app)


@pytest.fixture
def wide(browser):
    """A 1600x1000 page that fails the test on any console error or uncaught exception."""
    with watched_page(browser, WIDTH, HEIGHT) as pg:
        yield pg


def top(pg, selector: str) -> float:
    return pg.locator(selector).first.bounding_box()["y"]


def test_compare_ok_runs_in_order_from_the_top_bar(mixed_server, wide):
    url, ids = mixed_server
    wide.goto(f"{url}/overview?run={ids['tuned']}")
    wide.wait_for_selector("#nav-compare")
    settle(wide)
    assert wide.get_attribute("#nav-compare", "href") == f"/compare?run={ids['tuned']}"
    wide.click("#nav-compare")
    wide.wait_for_selector("#compare-verdict-word")
    wide.wait_for_selector("#compare-hist")
    wide.wait_for_selector("#compare-ops")
    settle(wide)
    # the run the link carried is the candidate, against the newest ok run before it
    assert wide.inner_text("#compare-cand").strip().startswith(f"tuned (#{ids['tuned']})")
    assert wide.inner_text("#compare-base").strip().startswith(f"baseline (#{ids['baseline']})")
    assert wide.locator(".error-box").count() == 0
    ys = [
        top(wide, s)
        for s in (
            "#compare-verdict-word",
            "#compare-config",
            "#compare-findings-persisting",
            "#compare-hist",
            "#compare-breakdown",
            "#compare-ops",
        )
    ]
    assert ys == sorted(ys), ys
    assert not wide.locator("#compare-config-derived").is_visible()  # resolved.* rows collapsed
    assert "summed over cores" in wide.inner_text("#compare-ops thead")
    shot(wide, "20-compare-ok")


def test_compare_with_a_failed_run_names_it(mixed_server, wide):
    url, ids = mixed_server
    wide.goto(f"{url}/compare?base={ids['baseline']}&cand=spmem")
    wide.wait_for_selector("#compare-not-comparable")
    wide.wait_for_selector("#compare-findings-new .finding")
    settle(wide)
    assert wide.locator(".error-box").count() == 0
    why = wide.inner_text("#compare-why-not")
    assert f"candidate 'spmem' (run_id {ids['spmem']}) has no steps (the run is failed: spmem_overflow)" in why
    assert "internal error" not in wide.inner_text("main")
    assert top(wide, "#compare-not-comparable") < top(wide, "#compare-config") < top(wide, "#compare-findings-new")
    shot(wide, "21-compare-failed")


def test_compare_with_an_unknown_run_names_it(mixed_server, wide):
    url, _ = mixed_server
    wide.goto(f"{url}/compare?run=42")
    wide.wait_for_selector("#compare-unknown")
    settle(wide)
    assert "candidate: run 42 is not in this store" in wide.inner_text("#compare-unknown")
    assert wide.locator("#compare-verdict-word").count() == 0 and wide.locator("#compare-hist").count() == 0
    assert "run=42" in wide.url  # the URL and the page say the same
    shot(wide, "22-compare-unknown")


def test_runs_page_fits_and_picks_a_pair(mixed_server, wide):
    url, ids = mixed_server
    wide.goto(f"{url}/runs")
    wide.wait_for_selector("#runs-table tbody tr")
    settle(wide)
    # every row's links are on screen at 1,600 px: the table needs no horizontal scroll
    wrap = wide.locator("#runs-table")
    assert wrap.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), wrap.evaluate(
        "e => [e.scrollWidth, e.clientWidth]"
    )
    for link in wide.locator("#runs-table .run-links a").all():
        box = link.bounding_box()
        assert box is not None and box["x"] + box["width"] <= WIDTH
    text = wide.inner_text("#runs-table")
    assert "failure: spmem_overflow" in text and '{"' not in text
    shot(wide, "23-runs")
    wide.click(f"#runs-pick-candidate-{ids['prefetch2']}")
    wide.wait_for_url(re.compile(rf"cand={ids['prefetch2']}"))
    wide.wait_for_selector(f"#runs-table #runs-pick-candidate-{ids['prefetch2']}.on")
    settle(wide)
    wide.click("#runs-compare-link")
    wide.wait_for_url(re.compile(rf"/compare\?base=\d+&cand={ids['prefetch2']}"))
    wide.wait_for_selector("#compare-verdict-word")
    settle(wide)
    assert wide.inner_text("#compare-cand").strip().startswith(f"prefetch2 (#{ids['prefetch2']})")


def test_picking_a_candidate_replaces_the_run_the_link_carried(mixed_server, wide):
    url, ids = mixed_server
    wide.goto(f"{url}/compare?run={ids['tuned']}")
    wide.wait_for_selector("#compare-verdict-word")
    settle(wide)
    wide.click("#compare-cand")
    wide.get_by_role("option", name=f"prefetch2 (#{ids['prefetch2']})").click()
    wide.wait_for_url(re.compile(rf"cand={ids['prefetch2']}"))
    assert "run=" not in wide.url  # the top bar's links now carry the run shown
    wide.wait_for_selector("#compare-verdict-word")
    settle(wide)
    assert wide.get_attribute("#nav-overview", "href") == f"/overview?run={ids['prefetch2']}"

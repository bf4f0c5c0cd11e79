"""In chromium, the pages as Dash Pages serves them (ui/routing.register_pages): every URL opens its
page with its data, / opens the Runs page, a path the UI lacks opens the page saying so, a click
through the top bar renders the next page and carries the run, and bodies left to their own
callbacks are filled."""

from __future__ import annotations

import pytest

from tests.ui.browserkit import requests_of, settle
from ui.state import PAGES

CALLBACK = "/_dash-update-component"


def _query(path: str, ids: dict[str, int]) -> str:
    if path == "/compare":
        return f"?base={ids['baseline']}&cand={ids['tuned']}"
    if path == "/sql":
        return "?q=SELECT%2042%20AS%20answer"
    return "" if path == "/runs" else f"?run={ids['baseline']}"


@pytest.mark.parametrize("path", list(PAGES))
def test_every_url_opens_its_page_with_its_data(served_ui, page, path):
    url, ids = served_ui
    page.goto(f"{url}{path}{_query(path, ids)}")
    page.wait_for_function(
        "(title) => { const h = document.querySelector('#page h2'); return h && h.innerText.trim() === title; }",
        arg=PAGES[path],
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('#page .page-body')].every(b => b.childElementCount > 0)"
    )
    settle(page)
    assert page.title() == "scprof"
    assert page.locator(f"#nav-{PAGES[path].lower()}").get_attribute("class") == "nav-link active"
    assert "internal error" not in page.locator("#page").inner_text()


def test_the_root_is_the_runs_page_and_an_unknown_path_says_so(served_ui, page):
    url, _ = served_ui
    page.goto(url + "/")
    page.wait_for_selector("#runs-body table")
    assert page.locator("#page h2").inner_text() == "Runs"
    page.goto(url + "/no/such/page")
    page.wait_for_selector("#page .empty-state")
    settle(page)
    assert "No page at /no/such/page." in page.locator("#page").inner_text()
    assert page.locator("#nav-runs").count() == 1  # the top bar is there to leave by


def test_a_click_through_the_top_bar_renders_the_next_page(served_ui, page):
    url, ids = served_ui
    page.goto(f"{url}/overview?run={ids['baseline']}")
    page.wait_for_selector("#overview-body .js-plotly-plot .main-svg")
    page.wait_for_function("() => document.querySelector('#overview-analysis').childElementCount > 0")
    settle(page)
    fetched = requests_of(page)
    page.click("#nav-findings")
    page.wait_for_selector("#findings-body .finding-head, #findings-body .empty-state")
    settle(page)
    assert [u for u in fetched if CALLBACK in u]
    assert not [u for u in fetched if u.endswith("/_dash-layout")]  # no reload: the page renders in place
    assert page.url.endswith(f"/findings?run={ids['baseline']}")
    assert page.locator("#page h2").inner_text() == "Findings"


def test_bodies_left_to_their_callbacks_are_filled(served_ui, page, monkeypatch):
    """With no time for any render (RENDER_BUDGET_S 0), a click renders the page's controls and
    every body comes from its own callback: the page is whole all the same."""
    url, ids = served_ui
    page.goto(f"{url}/runs")
    page.wait_for_selector("#runs-body table")
    settle(page)
    monkeypatch.setattr("ui.routing.RENDER_BUDGET_S", 0.0)
    fetched = requests_of(page)
    page.click("#nav-overview")
    page.wait_for_selector("#overview-body .js-plotly-plot .main-svg")
    page.wait_for_function("() => document.querySelector('#overview-analysis').childElementCount > 0")
    settle(page)
    assert len([u for u in fetched if CALLBACK in u]) >= 3  # the page's, then one per body
    assert not page.locator("#page [id$='-pending']").count()

"""In chromium: a page's first view needs no callback (its layout holds it, ui/first_view.py), a
click through the top bar is one callback (the router renders the page, data included), and a
browser sending no Referer gets the page from the router."""

from __future__ import annotations

from tests.ui.browserkit import requests_of, settle

CALLBACK = "/_dash-update-component"


def test_a_first_view_needs_no_callback_and_a_click_needs_one(served_ui, page):
    url, ids = served_ui
    fetched = requests_of(page)
    page.goto(f"{url}/overview?run={ids['baseline']}")
    page.wait_for_selector("#page .page-body >> nth=0")
    settle(page)
    page.wait_for_selector("#overview-body .js-plotly-plot .main-svg")
    assert page.locator("#overview-analysis").inner_text().strip()  # both of the page's bodies
    assert [u for u in fetched if CALLBACK in u] == []
    assert any(u.endswith("/_dash-layout") for u in fetched)

    fetched.clear()
    page.click("#nav-findings")
    page.wait_for_selector("#findings-body .finding-head, #findings-body .empty-state")
    settle(page)
    assert [u for u in fetched if CALLBACK in u] and page.url.endswith(f"/findings?run={ids['baseline']}")
    assert page.locator("#page h2").inner_text() == "Findings"


def test_without_a_referer_the_router_renders_the_page(served_ui, page):
    """A document served with `Referrer-Policy: no-referrer`: the layout cannot name the page."""
    url, ids = served_ui

    def no_referrer(route):
        response = route.fetch()
        route.fulfill(response=response, headers={**response.headers, "referrer-policy": "no-referrer"})

    page.route("**/findings*", no_referrer)
    fetched = requests_of(page)
    page.goto(f"{url}/findings?run={ids['tuned']}")
    page.wait_for_selector("#findings-body .finding-head, #findings-body .empty-state")
    settle(page)
    assert [u for u in fetched if CALLBACK in u]  # the router's (a first view would need none)
    assert "tuned" in page.locator("#page").inner_text()


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
    assert len([u for u in fetched if CALLBACK in u]) >= 3  # the router's, then one per body
    assert not page.locator("#page [id$='-pending']").count()

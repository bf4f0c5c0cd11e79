"""The pages as Dash Pages (ui/routing.register_pages), through its public parts: dash.page_registry
holds every page at its path, and Dash Pages' routing callback answers each URL with its page,
data included (ui/routing.filled_page), / with the Runs page and any other path with the page
saying there is none; a body whose render outlasts the budget is left to its own callback."""

from __future__ import annotations

import json
from typing import Any

import dash
import pytest

from tests.ui.dashkit import route
from ui.state import PAGES


@pytest.fixture(scope="module")
def app(ui_db):
    from ui.app import create_app

    app = create_app(ui_db)
    yield app
    app.scprof_access.close()


@pytest.fixture(autouse=True)
def wait_for_every_render(monkeypatch):
    """Bodies rendered whatever the machine's speed (a render may otherwise be left to its callback)."""
    monkeypatch.setattr("ui.routing.RENDER_BUDGET_S", 120.0)


@pytest.fixture(scope="module")
def run(app) -> int:
    with app.scprof_access.open() as store:
        return store.rows("SELECT min(run_id) AS r FROM runs")[0]["r"]


def _find(node: Any, ident: str) -> dict | None:
    """The component `ident` in a layout as Dash serialises it."""
    if isinstance(node, list):
        return next((f for n in node if (f := _find(n, ident)) is not None), None)
    if isinstance(node, dict) and "props" in node:
        if node["props"].get("id") == ident:
            return node
        return _find(node["props"].get("children"), ident)
    return None


def _text(node: Any) -> str:
    if isinstance(node, list):
        return " ".join(_text(n) for n in node)
    if isinstance(node, dict) and "props" in node:
        return _text(node["props"].get("children"))
    return str(node) if isinstance(node, str | int | float) else ""


def _page(app, pathname: str, search: str) -> Any:
    r = route(app.server.test_client(), pathname, search)
    assert r.status_code == 200
    return r.get_json()["response"]["_pages_content"]["children"]


def _bodies(node: Any) -> list[dict]:
    if isinstance(node, list):
        return [b for n in node for b in _bodies(n)]
    if not isinstance(node, dict) or "props" not in node:
        return []
    own = [node] if "page-body" in str(node["props"].get("className", "")).split() else []
    return own + _bodies(node["props"].get("children"))


def test_every_page_is_registered_at_its_path(app):
    paths = {p["path"]: p for p in dash.page_registry.values()}
    assert set(PAGES) | {"/", "/404"} == set(paths)
    assert {paths[p]["name"] for p in PAGES} == set(PAGES.values())
    assert all(p["title"] == "scprof" for p in paths.values())


def test_the_frame_holds_the_page_container_and_the_top_bar(app):
    layout = app.server.test_client().get("/_dash-layout").get_json()
    for ident in ("nav", "page", "_pages_location", "_pages_content"):
        assert _find(layout, ident) is not None, ident


@pytest.mark.parametrize("path", ["/runs", "/overview", "/timeline", "/sparsecore", "/memory", "/findings", "/tuning"])
def test_each_url_renders_its_page_with_its_data(app, run, path):
    page = _page(app, path, "" if path == "/runs" else f"?run={run}")
    assert page["props"]["children"][0]["props"]["children"] == PAGES[path]  # the page's title
    assert page["props"]["className"] == f"page page-{path[1:]}"
    bodies = _bodies(page)
    assert bodies and all(b["props"].get("children") not in (None, [], "") for b in bodies)


def test_the_page_is_the_one_filled_page_makes(app, run):
    from ui.routing import filled_page

    page, _ = filled_page(app.scprof_access, "/findings", f"?run={run}&sev=warning")
    served = _page(app, "/findings", f"?sev=warning&run={run}")
    assert json.dumps(served, sort_keys=True) == json.dumps(page.to_plotly_json(), sort_keys=True, cls=_Plotly)


class _Plotly(json.JSONEncoder):
    def default(self, o: Any) -> Any:
        return o.to_plotly_json() if hasattr(o, "to_plotly_json") else super().default(o)


def test_compare_has_its_verdict(app):
    with app.scprof_access.open() as store:
        base, cand = (r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id LIMIT 2"))
    page = _page(app, "/compare", f"?base={base}&cand={cand}")
    for ident in ("compare-body", "compare-verdict", "compare-deltas"):
        assert _find(page, ident)["props"].get("children"), ident


def test_the_root_is_the_runs_page(app):
    assert json.dumps(_page(app, "/", ""), sort_keys=True) == json.dumps(_page(app, "/runs", ""), sort_keys=True)


@pytest.mark.parametrize("path", ["/nope", "/overview/1", "/_dash-layout"])
def test_an_unknown_path_gets_the_page_saying_so(app, path):
    assert _text(_page(app, path, "?run=1")) == f"No page at {path}. try /runs"


def test_the_query_is_read_as_the_pages_read_it(app, run):
    """A repeated parameter counts once (its first value), a blank one not at all, an overlong query
    not at all: the page's defaults."""
    first = _find(_page(app, "/overview", f"?run={run}&run=999&steps="), "overview-state")["props"]["data"]
    plain = _find(_page(app, "/overview", f"?run={run}"), "overview-state")["props"]["data"]
    assert first == plain
    default = _find(_page(app, "/findings", f"?run={run}"), "findings-sev")["props"]["value"]
    overlong = _page(app, "/findings", f"?run={run}&sev=info" + "x" * 300_000)
    assert _find(overlong, "findings-sev")["props"]["value"] == default


def test_an_unknown_run_is_named(app):
    assert "no_such_run" in json.dumps(_page(app, "/overview", "?run=no_such_run"))


def test_the_top_bar_follows_the_url(app, run):
    r = app.server.test_client().post(
        "/_dash-update-component",
        json={
            "output": "nav.children",
            "outputs": {"id": "nav", "property": "children"},
            "inputs": [
                {"id": "_pages_location", "property": "pathname", "value": "/findings"},
                {"id": "_pages_location", "property": "search", "value": f"?run={run}&sev=info"},
            ],
            "changedPropIds": ["_pages_location.pathname"],
        },
    )
    links = {c["props"]["id"]: c["props"] for c in r.get_json()["response"]["nav"]["children"]}
    assert links["nav-findings"]["className"] == "nav-link active"
    assert links["nav-overview"]["href"] == f"/overview?run={run}"


def test_a_slow_render_is_left_to_its_callback_and_not_run_twice(app, run, monkeypatch):
    """A page's layout waits RENDER_BUDGET_S for a body; past it the body holds a pending store,
    whose callback returns the render left running (the render function called once)."""
    import threading

    import ui.routing as routing
    from ui import pages

    calls, release = [], threading.Event()
    name, outputs, render = next(r for r in pages.RENDERERS if r[0] == "findings")

    def slow(store, st):
        calls.append(st["run"])
        release.wait(30)
        return render(store, st)

    monkeypatch.setattr(
        pages, "RENDERERS", tuple((n, o, slow if n == "findings" else f) for n, o, f in pages.RENDERERS)
    )
    monkeypatch.setattr(routing, "RENDER_BUDGET_S", 0.05)
    page = _page(app, "/findings", f"?run={run}")
    body = _find(page, "findings-body")
    assert body["props"]["children"]["props"]["id"] == "findings-body-pending"  # a store in the body
    state = _find(page, "findings-state")["props"]["data"]
    release.set()
    r = app.server.test_client().post(
        "/_dash-update-component",
        json={
            "output": "findings-body.children",
            "outputs": {"id": "findings-body", "property": "children"},
            "inputs": [{"id": "findings-body-pending", "property": "data", "value": True}],
            "state": [{"id": "findings-state", "property": "data", "value": state}],
            "changedPropIds": ["findings-body-pending.data"],
        },
    )
    filled = r.get_json()["response"]["findings-body"]["children"]
    monkeypatch.setattr(routing, "RENDER_BUDGET_S", 120.0)
    whole = _find(_page(app, "/findings", f"?run={run}"), "findings-body")
    assert json.dumps(filled, sort_keys=True) == json.dumps(whole["props"]["children"], sort_keys=True)
    assert len(calls) == 2  # once left running and taken by the callback, once for the whole page

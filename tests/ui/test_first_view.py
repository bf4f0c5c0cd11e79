"""A page's first view comes in the layout Dash asks for (ui/first_view.py): the page the
browser's address names, its bodies filled by the same functions as the router's, no callback
needed; without a usable Referer, the bare frame the router then fills."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ui.dashkit import route
from ui.first_view import FirstViews, page_url


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


@pytest.mark.parametrize(
    ("referrer", "expected"),
    [
        ("http://localhost/overview?run=1&steps=0:2", ("/overview", "?run=1&steps=0:2")),
        ("http://localhost/runs", ("/runs", "")),
        ("http://localhost/", ("/", "")),
        ("http://localhost/sql?q=SELECT%201#frag", ("/sql", "?q=SELECT%201")),
        ("http://elsewhere.example/overview?run=1", None),  # another host's page
        ("http://localhost:8050/overview", None),  # another port: another host
        ("http://localhost/_dash-layout", None),  # not a page
        ("http://localhost/../etc/passwd", None),
        ("http://[localhost/overview", None),  # malformed
        ("http://localhost/overview?" + "x" * 300_000, None),  # overlong
        ("", None),
        (None, None),
    ],
)
def test_the_page_a_referrer_names(referrer, expected):
    assert page_url(referrer, "localhost") == expected


def _find(node: Any, ident: str) -> dict | None:
    """The component `ident` in a layout as Dash serialises it."""
    if isinstance(node, list):
        return next((f for n in node if (f := _find(n, ident)) is not None), None)
    if isinstance(node, dict) and "props" in node:
        if node["props"].get("id") == ident:
            return node
        return _find(node["props"].get("children"), ident)
    return None


def _layout(app, referrer: str | None) -> dict:
    headers = {"Referer": referrer} if referrer is not None else {}
    r = app.server.test_client().get("/_dash-layout", headers=headers)
    assert r.status_code == 200
    return r.get_json()


def _route(app, pathname: str, search: str) -> dict:
    r = route(app.server.test_client(), pathname, search)
    assert r.status_code == 200
    return r.get_json()["response"]


@pytest.mark.parametrize("path", ["/runs", "/overview", "/timeline", "/sparsecore", "/memory", "/findings", "/tuning"])
def test_the_first_view_is_what_the_router_shows(app, run, path):
    search = "" if path == "/runs" else f"?run={run}"
    layout = _layout(app, f"http://localhost{path}{search}")
    page, nav, url = _find(layout, "page"), _find(layout, "nav"), _find(layout, "url")
    routed = _route(app, path, search)
    # the same page and navigation, bodies filled: every .page-body has its data
    assert json.dumps(page["props"]["children"], sort_keys=True) == json.dumps(
        routed["page"]["children"], sort_keys=True
    )
    assert nav["props"]["children"] == routed["nav"]["children"]
    bodies = [b for b in _bodies(page)]
    assert bodies and all(b["props"].get("children") not in (None, [], "") for b in bodies)
    # dcc.Location holds the URL as the browser has it: it reports no change, the router is not called
    assert (url["props"]["pathname"], url["props"]["search"]) == (path, search)


def _bodies(node: Any) -> list[dict]:
    if isinstance(node, list):
        return [b for n in node for b in _bodies(n)]
    if not isinstance(node, dict) or "props" not in node:
        return []
    own = [node] if "page-body" in str(node["props"].get("className", "")).split() else []
    return own + _bodies(node["props"].get("children"))


def test_compare_first_view_has_its_verdict(app):
    with app.scprof_access.open() as store:
        base, cand = (r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id LIMIT 2"))
    page = _find(_layout(app, f"http://localhost/compare?base={base}&cand={cand}"), "page")
    for ident in ("compare-body", "compare-verdict", "compare-deltas"):
        assert _find(page, ident)["props"].get("children"), ident


@pytest.mark.parametrize("referrer", [None, "http://elsewhere.example/runs", "http://localhost/nope"])
def test_without_a_usable_referrer_the_frame_is_bare(app, referrer):
    layout = _layout(app, referrer)
    assert _find(layout, "page")["props"].get("children") is None
    assert "pathname" not in _find(layout, "url")["props"]  # dcc.Location reports the URL: the router renders it


def test_an_unknown_run_first_view_names_it(app):
    page = _find(_layout(app, "http://localhost/overview?run=no_such_run"), "page")
    assert "no_such_run" in json.dumps(page)


def test_a_document_request_starts_its_first_view_once(app, run, monkeypatch):
    from ui import first_view

    calls: list[tuple[str, str]] = []
    real = first_view.filled_page

    def counted(access, pathname, search, *asked):
        calls.append((pathname, search))
        return real(access, pathname, search, *asked)

    monkeypatch.setattr(first_view, "filled_page", counted)
    client = app.server.test_client()
    assert client.get(f"/findings?run={run}&sev=warning").status_code == 200
    # the browser's Referer may spell the same query otherwise: the same first view
    r = client.get("/_dash-layout", headers={"Referer": f"http://localhost/findings?sev=warning&run={run}"})
    assert _find(r.get_json(), "findings-body")["props"].get("children")
    assert calls == [("/findings", f"?run={run}&sev=warning")]
    client.get("/_dash-layout", headers={"Referer": f"http://localhost/findings?sev=warning&run={run}"})
    assert len(calls) == 2  # taken once: the next layout is rendered anew


def test_first_views_not_asked_for_go_stale_and_are_bounded(app, run, monkeypatch):
    from ui import first_view

    calls: list[str] = []
    monkeypatch.setattr(first_view, "filled_page", lambda access, p, s, *asked: calls.append(s) or ("page", "nav"))
    views = FirstViews(app.scprof_access, keep=2)
    for i in range(4):
        views.start("/runs", f"?filter={i}")
    views.start("/not-a-page", "")
    views._pool.shutdown(wait=True)
    assert len(calls) == 4 and len(views._views) == 2  # the two newest kept
    views._pool = first_view.ThreadPoolExecutor(max_workers=1)
    assert views.take("/runs", "?filter=3") == ("page", "nav") and len(calls) == 4  # taken, not redone
    monkeypatch.setattr(first_view, "FRESH_S", 0.0)
    assert views.take("/runs", "?filter=2") == ("page", "nav") and len(calls) == 5  # stale: rendered anew


def test_a_slow_render_is_left_to_its_callback_and_not_run_twice(app, run, monkeypatch):
    """The router waits RENDER_BUDGET_S for a body; past it the body holds a pending store, whose
    callback returns the render left running (the render function called once)."""
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
    routed = _route(app, "/findings", f"?run={run}")
    body = _find(routed["page"]["children"], "findings-body")
    assert body["props"]["children"]["props"]["id"] == "findings-body-pending"  # a store in the body
    state = _find(routed["page"]["children"], "findings-state")["props"]["data"]
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
    release.set()
    whole = _find(_route(app, "/findings", f"?run={run}")["page"]["children"], "findings-body")
    assert json.dumps(filled, sort_keys=True) == json.dumps(whole["props"]["children"], sort_keys=True)
    assert len(calls) == 2  # once left running and taken by the callback, once for the whole page


def test_a_first_view_leaves_what_is_not_rendered_when_its_layout_is_asked_for(app, run, monkeypatch):
    import threading

    from ui import pages

    release = threading.Event()
    render = next(r for r in pages.RENDERERS if r[0] == "findings")[2]

    def slow(store, st):
        release.wait(30)
        return render(store, st)

    monkeypatch.setattr(
        pages, "RENDERERS", tuple((n, o, slow if n == "findings" else f) for n, o, f in pages.RENDERERS)
    )
    client = app.server.test_client()
    client.get(f"/findings?run={run}")  # the document: its first view starts
    layout = client.get("/_dash-layout", headers={"Referer": f"http://localhost/findings?run={run}"}).get_json()
    release.set()
    body = _find(layout, "findings-body")
    assert body["props"]["children"]["props"]["id"] == "findings-body-pending"
    assert _find(layout, "url")["props"]["pathname"] == "/findings"  # the page itself is the first view

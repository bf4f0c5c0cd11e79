"""Forged callback requests: any JSON POSTed to /_dash-update-component gets an in-page message, no
change, or a 4xx, never a 500 (docs/security.md "The web UI"). Every callback the app registers is
tried, each input in turn as the one that changed, with values of the wrong type and size."""

from __future__ import annotations

import json
import logging

import pytest

from tests.ui.dashkit import route
from ui.app import create_app

BAD_VALUES = [["a", "b"], "x" * 100_000, {"a": 1}, None, 12345, 1e308, True, [[1], {"b": 2}], -(2**70)]


@pytest.fixture(scope="module")
def client(ui_db):
    logging.disable(logging.CRITICAL)  # the app logs each ignored input
    app = create_app(ui_db)
    yield app.server.test_client()
    app.scprof_access.close()
    logging.disable(logging.NOTSET)


def _spec(text: str) -> dict:
    """An output/input id string from /_dash-dependencies as {id, property}."""
    ident, prop = text.rsplit(".", 1)
    return {"id": json.loads(ident) if ident.startswith("{") else ident, "property": prop}


def _arg(dep: dict, value) -> dict | list:
    if isinstance(dep["id"], dict):  # a pattern-matching input (ALL): one matching component
        ident = {k: (0 if v == ["ALL"] else v) for k, v in dep["id"].items()}
        return [{"id": ident, "property": dep["property"], "value": value}]
    return {"id": dep["id"], "property": dep["property"], "value": value}


def _deps(raw: list[dict]) -> list[dict]:
    return [{"id": json.loads(d["id"]) if d["id"].startswith("{") else d["id"], "property": d["property"]} for d in raw]


def _body(callback: dict, value, changed: int) -> dict:
    outputs = callback["output"].strip(".").split("...")
    inputs, state = _deps(callback["inputs"]), _deps(callback["state"])
    trigger = inputs[changed]
    trigger_id = json.dumps(dict(trigger["id"], index=0)) if isinstance(trigger["id"], dict) else trigger["id"]
    return {
        "output": callback["output"],
        "outputs": [_spec(o) for o in outputs] if len(outputs) > 1 else _spec(outputs[0]),
        "inputs": [_arg(d, value) for d in inputs],
        "state": [_arg(d, value) for d in state],
        "changedPropIds": [f"{trigger_id}.{trigger['property']}"],
    }


def test_every_callback_survives_forged_inputs(client):
    callbacks = client.get("/_dash-dependencies").get_json()
    assert len(callbacks) >= 10  # routing, URL writers
    failures = []
    for callback in callbacks:
        for changed in range(len(callback["inputs"])):
            for value in BAD_VALUES:
                r = client.post("/_dash-update-component", json=_body(callback, value, changed))
                if r.status_code >= 500 or b"Traceback" in r.data:
                    failures.append((callback["output"][:60], changed, repr(value)[:30], r.status_code))
                elif r.status_code == 200:
                    json.loads(r.data)  # a well-formed answer (an in-page message or a new URL)
    assert failures == []


def test_a_forged_query_in_the_url_is_an_in_page_message_not_an_error(client):
    r = route(client, "/sql", "?q=UPDATE%20EXTENSIONS&rows=many")
    assert r.status_code == 200
    assert "only read-only SELECT queries are allowed" in r.get_data(as_text=True)


@pytest.mark.parametrize(
    "payload",
    [
        b"{}",
        b"[]",
        b'{"output": "nope.children", "outputs": {"id": "nope", "property": "children"}, "inputs": []}',
        b'{"output": {"a": 1}, "outputs": 7, "inputs": "x"}',
        b'{"output": "page.children...nav.children..", "outputs": [], "inputs": [{"id": {"type": "sql-example"}}]}',
    ],
)
def test_requests_dash_cannot_dispatch_are_4xx(client, payload):
    r = client.post("/_dash-update-component", data=payload, content_type="application/json")
    assert 400 <= r.status_code < 500


def test_oversized_callback_requests_are_refused(client):
    body = {"output": "url.search", "inputs": [{"id": "sql-text", "property": "value", "value": "x" * 3_000_000}]}
    assert client.post("/_dash-update-component", json=body).status_code == 413


WRONG_BUT_WELL_TYPED = [  # URL queries naming what the store does not have
    "?run=999999&steps=0:2",
    "?run=1&steps=5:-3",
    f"?run=-1&steps={-(2**62)}:{2**62}",
    "?base=1&cand=99",
    f"?base=-5&cand={2**62}",
    "?run=1&steps=0:2&t0=1000000000000000000&t1=5&chips=99,-1",
    "?run=1&steps=0:2&tables=nope&metric=nope&sev=x",
]


@pytest.mark.parametrize("search", WRONG_BUT_WELL_TYPED)
def test_urls_naming_what_is_not_there_render_without_internal_errors(client, search):
    from ui.state import PAGES

    for pathname in PAGES:
        r = route(client, pathname, search)
        assert r.status_code == 200 and "internal error" not in r.get_data(as_text=True), pathname
        assert "page-body" in r.get_data(as_text=True) or "empty-state" in r.get_data(as_text=True), pathname

"""Dash's requests as the browser sends them, through the Flask test client, and walks over the
component trees the pages return."""

from __future__ import annotations

from typing import Any


def route(client: Any, pathname: str, search: str) -> Any:
    """Dash Pages' answer for a URL (POST /_dash-update-component: the page for `_pages_content`),
    as the browser asks for it when the URL changes."""
    location = "_pages_location"
    body = {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
        "inputs": [
            {"id": location, "property": "pathname", "value": pathname},
            {"id": location, "property": "search", "value": search},
        ],
        "state": [{"id": location, "property": "pathname", "value": pathname}],
        "changedPropIds": [f"{location}.search"],
    }
    return client.post("/_dash-update-component", json=body)


def walk(component):
    """Every component of a Dash tree, depth first."""
    if isinstance(component, list | tuple):
        for c in component:
            yield from walk(c)
        return
    if component is None or isinstance(component, str | int | float):
        return
    yield component
    yield from walk(getattr(component, "children", None))


def with_class(tree, name: str) -> list:
    return [c for c in walk(tree) if name in (getattr(c, "className", None) or "").split()]


def find_id(tree, id_):
    return next(c for c in walk(tree) if getattr(c, "id", None) == id_)

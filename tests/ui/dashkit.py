"""Dash's requests as the browser sends them, through the Flask test client, and walks over the
component trees the pages return."""

from __future__ import annotations

from typing import Any


def route(client: Any, pathname: str, search: str) -> Any:
    """The router's answer for a URL (POST /_dash-update-component), as the browser asks for it
    when the URL changes."""
    body = {
        "output": "..page.children...nav.children..",
        "outputs": [{"id": "page", "property": "children"}, {"id": "nav", "property": "children"}],
        "inputs": [
            {"id": "url", "property": "pathname", "value": pathname},
            {"id": "url", "property": "search", "value": search},
        ],
        "changedPropIds": ["url.search"],
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

"""Dash's requests as the browser sends them, through the Flask test client."""

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

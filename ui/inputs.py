"""Callback inputs are untrusted: anyone who can reach the server can POST any JSON to
/_dash-update-component. This module checks them before a callback uses them.

Page state (a dcc.Store's data) is reduced to flat JSON scalars; controls' values are checked
against what their control can send; anything else is no change of state (no_update), and a
request Dash itself cannot dispatch (unknown ids, a malformed body) is answered 400, never 500.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

from dash import no_update
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

log = logging.getLogger("scprof.ui")

MAX_TEXT_CHARS = 200_000  # a query text (100,000 characters at most) fits with room to spare
MAX_LIST_ITEMS = 10_000
MAX_BODY_BYTES = 2 * 2**20  # callback requests larger than this get 413
DISPATCH_PATH = "/_dash-update-component"

# A control's URL key -> what its control can send.
_LISTS = {"chips", "sev", "tables"}
_TEXTS = {"filter", "sort", "metric"}
_RUNS = {"run", "base", "cand"}


def is_scalar(v: Any) -> bool:
    """A JSON scalar of sane size: None, bool, finite number, or text up to MAX_TEXT_CHARS."""
    if v is None or isinstance(v, bool):
        return True
    if isinstance(v, int):
        return abs(v) < 2**63
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str) and len(v) <= MAX_TEXT_CHARS


def is_scalar_list(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= MAX_LIST_ITEMS and all(is_scalar(x) for x in v)


def text(v: Any) -> str | None:
    """`v` if it is text of sane size, else None (a URL's pathname or search)."""
    return v if isinstance(v, str) and len(v) <= MAX_TEXT_CHARS else None


def clean_state(data: Any) -> dict[str, Any]:
    """A page's state with only text keys and scalar or list-of-scalar values (others dropped)."""
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and (is_scalar(v) or is_scalar_list(v))}


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63


def _ints(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= MAX_LIST_ITEMS and all(_int(x) for x in v)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= MAX_LIST_ITEMS and all(isinstance(x, str) for x in v)


# URL keys a checkbox writes: "1" when ticked, absent otherwise.
FLAGS = ("desc", "trials")

# What a page's state (ui/pages/common.py state_store) holds under each key; other values are dropped.
_STATE_RULES: dict[str, Callable[[Any], bool]] = {
    **dict.fromkeys(("run", "base", "cand", "t0", "t1"), lambda v: v is None or _int(v)),
    "steps": lambda v: _ints(v) and len(v) == 2,
    "chips": lambda v: v is None or _ints(v),
    **dict.fromkeys(("tables", "sev"), lambda v: v is None or _texts(v)),
    **dict.fromkeys(("metric", "q", "filter", "sort", "desc", "trials"), lambda v: isinstance(v, str)),
    "rows": lambda v: _int(v) or isinstance(v, str),
}
# The keys a page's render functions cannot do without.
STATE_NEEDS = {
    **dict.fromkeys(("overview", "timeline", "sparsecore", "memory"), ("run", "steps")),
    "ops": ("run",),
    "input": ("run",),
    "findings": ("run",),
    "tuning": ("run",),
    "compare": ("base", "cand"),
}


def page_state(data: Any, needs: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """A page's state with each value of the type its page writes (others dropped); None when a
    key in `needs` is missing, so the callback can say the state is malformed."""
    st = {k: v for k, v in clean_state(data).items() if k not in _STATE_RULES or _STATE_RULES[k](v)}
    return st if all(st.get(k) is not None for k in needs) else None


def control_value_ok(key: str, value: Any) -> bool:
    """Whether `value` is something the control writing URL key `key` can send."""
    if key in _LISTS:
        return value is None or is_scalar_list(value)
    if key == "steps":
        return value is None or (is_scalar_list(value) and len(value) == 2 and all(_number(x) for x in value))
    if key in FLAGS:
        return value is None or isinstance(value, bool) or is_scalar_list(value)
    if key in _RUNS:
        return value is None or (is_scalar(value) and not isinstance(value, bool | float))
    if key in _TEXTS:
        return value is None or (isinstance(value, str) and len(value) <= MAX_TEXT_CHARS)
    return False


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < 2**53


def url_callback(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A callback that writes the URL: inputs that break it are no change (logged), never an error."""

    @functools.wraps(fn)
    def inner(*args: Any) -> Any:
        try:
            return fn(*args)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as e:
            log.warning("callback %s ignored a malformed input: %s: %s", fn.__name__, type(e).__name__, e)
            return no_update

    return inner


def guard_dispatch(server: Flask) -> None:
    """Cap callback request sizes, and answer 400 (not 500) to a callback request Dash cannot dispatch."""
    server.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES

    @server.errorhandler(Exception)
    def _failed(e: Exception) -> Any:
        if isinstance(e, HTTPException):
            return e
        if request.path == DISPATCH_PATH:
            log.warning("malformed callback request: %s: %s", type(e).__name__, e)
            return Response("bad callback request\n", status=400, mimetype="text/plain")
        log.error("request %s failed: %s: %s", request.path, type(e).__name__, e, exc_info=e)
        return Response("internal error (see the server's log)\n", status=500, mimetype="text/plain")

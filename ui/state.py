"""Page state in the URL: every page is a deep link (run, steps, zoom window, tables, ...).

The URL's query string is the single source of truth: a control's change writes the
query, the page is rendered from the query. Steps are `A:B`, half-open as on the
command line (`--steps A:B`); times (`t0`, `t1`) are picoseconds.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

PAGES = {
    "/runs": "Runs",
    "/overview": "Overview",
    "/timeline": "Timeline",
    "/sparsecore": "SparseCore",
    "/memory": "Memory",
    "/ops": "Ops",
    "/input": "Input",
    "/findings": "Findings",
    "/tuning": "Tuning",
    "/compare": "Compare",
    "/sql": "SQL",
}
CARRIED = ("run", "base", "cand")  # parameters the navigation keeps from page to page


def parse(search: str | None) -> dict[str, str]:
    """The query string as {name: first value}."""
    return {k: v[0] for k, v in parse_qs((search or "").lstrip("?"), keep_blank_values=False).items()}


def encode(state: dict[str, Any]) -> str:
    """A query string from a state dict (None/empty left out, lists joined with commas)."""
    q = {
        k: (",".join(map(str, v)) if isinstance(v, list | tuple) else v)
        for k, v in state.items()
        if v not in (None, "", [], ())
    }
    return "?" + urlencode(q) if q else ""


def with_params(search: str | None, **changes: Any) -> str:
    """`search` with some parameters changed (None removes one)."""
    state: dict[str, Any] = parse(search)
    for k, v in changes.items():
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return encode(state)


def steps_param(text: str | None) -> tuple[int, int] | None:
    """`A:B` (half-open) as an inclusive (A, B-1); None when absent or malformed."""
    if not text:
        return None
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        return None
    return (a, b - 1) if b > a else None


def steps_text(steps: tuple[int, int] | list[int] | None) -> str | None:
    """An inclusive (lo, hi) as the half-open `lo:hi+1`."""
    return None if not steps else f"{int(steps[0])}:{int(steps[1]) + 1}"


def int_param(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text not in (None, "") else default
    except ValueError:
        return default


def int_list(text: str | None) -> list[int] | None:
    """`0,2,3` as [0, 2, 3]; None when absent (meaning: the page's default)."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        return None


def str_list(text: str | None) -> list[str]:
    return [x for x in (text or "").split(",") if x]

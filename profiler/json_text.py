"""JSON text from untrusted files (trace headers, an XSpace's `/host:scprof` facts), checked to be
what the store's JSON columns accept before it is inserted (DuckDB refuses NaN, Infinity and
lone UTF-16 surrogates, which Python's parser lets through)."""

from __future__ import annotations

import json

from profiler.errors import TraceFormatError

_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "true/false",
    type(None): "null",
}


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def check_json(where: str, field: str, text: str, want: type = dict, error: type = TraceFormatError):
    """Parse `text` (field `field` of `where`); it must be a JSON `want`. Raises `error`, one line."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")  # 1e999, lone surrogates
    except (ValueError, RecursionError, UnicodeEncodeError) as e:  # JSONDecodeError is a ValueError
        raise error(f"{where}: {field} is not valid JSON ({str(e)[:80]})") from None
    if not isinstance(value, want):
        raise error(f"{where}: {field} must be a JSON {_JSON_TYPE[want]}, got {_JSON_TYPE.get(type(value))}")
    return value

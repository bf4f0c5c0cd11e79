"""Human formatting at the edge: units, tables, CSV and JSON output of Arrow tables.

Everything printed for people passes store-derived text (run, table and op names, finding
text, error messages quoting them) through `escape_control`, so a name holding a newline or
a terminal escape sequence can neither forge output lines nor drive the terminal.
"""

from __future__ import annotations

import csv
import io
import json
import math

import pyarrow as pa


def _control_escapes() -> dict[int, str]:
    """Code point -> visible escape, for every character a terminal would act on."""
    table = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}  # C0, DEL, C1
    table |= {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    # line and paragraph separators, and the bidirectional overrides that reorder what is shown
    table |= {c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
    return table


_CONTROL_ESCAPES = _control_escapes()


def escape_control(text: object) -> str:
    """`str(text)` with control characters shown as escapes (`\\n`, `\\x1b`), so it prints on one line."""
    return str(text).translate(_CONTROL_ESCAPES)


def escape_lines(text: str) -> str:
    """Multi-line output made safe: each line's control characters escaped, line breaks kept.

    A backstop for whole outputs; values that may hold a newline must go through
    `escape_control` before they are joined into lines.
    """
    return "\n".join(escape_control(line) for line in text.split("\n"))


def format_ps(ps: float | int | None) -> str:
    """Picoseconds in the largest unit that keeps a number >= 1: 1.50 ms, 320 ns."""
    if ps is None or (isinstance(ps, float) and math.isnan(ps)):
        return "-"
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if abs(ps) >= scale:
            return f"{ps / scale:.3g} {unit}"
    return f"{ps:.0f} ps"


def format_bytes(n: float | int | None) -> str:
    """Bytes with binary prefixes: 1.5 GiB."""
    if n is None:
        return "-"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table (cells' control characters escaped: one row, one line)."""
    header = [escape_control(h) for h in header]
    rows = [[escape_control(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def format_cell(v: object) -> str:
    """One value of a SQL result as text: NULL, 6 significant digits for floats."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _json_value(v: object) -> object:
    """JSON has no NaN or infinity: they become null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _csv_value(v: object) -> object:
    """A CSV field: NULL as empty, text with its control characters escaped (see `render`)."""
    if v is None:
        return ""
    return v if isinstance(v, int | float) else escape_control(v)


def render(table: pa.Table, fmt: str) -> str:
    """An Arrow table as table, csv or json text (ending in a newline).

    json keeps every value exact (json.dumps escapes control characters itself). csv and
    table escape control characters in text (`\\n`, `\\x1b`): one row is one line, and a
    value cannot drive the terminal; --format json is the lossless one.
    """
    rows = table.to_pylist()
    if fmt == "json":
        return json.dumps([{k: _json_value(v) for k, v in r.items()} for r in rows], default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([escape_control(c) for c in table.column_names])
        w.writerows([[_csv_value(r[c]) for c in table.column_names] for r in rows])
        return buf.getvalue()
    body = [[format_cell(r[c]) for c in table.column_names] for r in rows]
    return text_table(table.column_names, body) + f"\n({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def runs_table(table: pa.Table) -> str:
    """The `scprof runs` listing with human units."""
    rows = []
    for r in table.to_pylist():
        rows.append([
            str(r["run_id"]), r["name"], r["source"], r["status"], r["hardware"], str(r["steps"]),
            f"{r['events']:,}", format_ps(r["span_ps"]), format_ps(r["mean_step_ps"]), r["ingested"],
        ])  # fmt: skip
    header = ["id", "name", "source", "status", "hardware", "steps", "events", "span", "mean step", "ingested"]
    return text_table(header, rows)

"""The CLI's output of Arrow tables: table, CSV and JSON text, and the runs listing.

Units and escaping come from `profiler.units` (one definition for the CLI and the UI).
"""

from __future__ import annotations

import csv
import io
import json
import math

import pyarrow as pa

from profiler.units import escape_control, format_cell, format_ps, text_table


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
        rows.append(
            [
                str(r["run_id"]),
                r["name"],
                r["source"],
                r["status"],
                r["hardware"],
                str(r["steps"]),
                f"{r['events']:,}",
                format_ps(r["span_ps"]),
                format_ps(r["mean_step_ps"]),
                r["ingested"],
            ]
        )
    header = ["id", "name", "source", "status", "hardware", "steps", "events", "span", "mean step", "ingested"]
    return text_table(header, rows)

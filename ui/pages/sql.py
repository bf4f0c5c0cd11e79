"""The SQL console page: one read-only query against the store, its first rows shown and all of
them in a CSV download; for the questions no page answers."""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
from dash import dcc, html

from profiler import sqltree
from profiler.sql_guard import QueryError, run_query
from profiler.store import Store
from profiler.units import format_cell
from ui import render, state
from ui.downloads import SQL_MAX_ROWS, SQL_PAGE_MAX_BYTES, SQL_TIMEOUT_S
from ui.pages.common import body, controls, state_store

SQL_SHOWN_ROWS, SQL_SHOWN_CHARS = 500, 1_000  # rows shown, characters shown of a cell (all in the CSV)

# The console's examples: text shown to users and run as typed when picked (each one SELECT, $-free).
# The console's examples, by button label: profiler/sql/ui/console.sql's example_* queries (users run them as their own SQL).
SQL_EXAMPLES = {b.doc: b.sql for b in sqltree.blocks(["ui.console"], "query") if b.name.startswith("example_")}


def layout_sql(store: Store | None, st: dict[str, str]) -> Any:
    q = st.get("q", "")
    rows = state.int_param(st.get("rows"), 1000) or 1000
    return html.Div(
        [
            html.Div(
                [html.Span("Examples: ", className="muted")]
                + [
                    html.Button(name, id={"type": "sql-example", "index": i}, className="button small", n_clicks=0)
                    for i, name in enumerate(SQL_EXAMPLES)
                ],
                className="toolbar",
            ),
            html.Div(
                [
                    dcc.Textarea(
                        id="sql-text",
                        value=q,
                        className="sql-input",
                        placeholder="SELECT ... (one read-only statement; "
                        "tables and views: runs, slices, counter_samples, step_markers, sc_partition_stats, event_args …)",
                    ),
                    schema_browser(store),
                ],
                className="sql-editor",
            ),
            controls(
                html.Button("Run query", id="sql-run", className="button", n_clicks=0, title="Ctrl+Enter (⌘+Enter)"),
                html.Label(
                    [
                        "row cap",
                        dcc.Input(id="sql-rows", type="number", min=1, max=SQL_MAX_ROWS, value=rows, debounce=True),
                    ],
                    className="control",
                ),
                html.Span(
                    f"Ctrl+Enter runs it · read-only; time limit {SQL_TIMEOUT_S:g} s; times are picoseconds "
                    "(schema: the browser beside the query, docs/schema.md)",
                    className="muted",
                ),
            ),
            state_store("sql", {"q": q, "rows": rows}),
            body("sql"),
        ]
    )


def render_sql(store: Store, st: dict[str, Any]) -> Any:
    q = str(st.get("q") or "").strip()
    if not q:
        return render.empty("Type a query above, or pick an example.")
    cap = max(1, min(state.int_param(str(st.get("rows") or ""), 1000) or 1000, SQL_MAX_ROWS))
    try:
        result = run_query(store, q, max_rows=cap, timeout_s=SQL_TIMEOUT_S, max_bytes=SQL_PAGE_MAX_BYTES)
    except QueryError as e:  # DuckDB's text with its line breaks: the caret under what it points at
        return html.Div(
            [html.Strong("Error"), html.Pre(e.detail, className="sql-error", id="sql-error")],
            className="error-box",
            role="alert",
        )
    t, clip = result.table, lambda v: v if len(v) <= SQL_SHOWN_CHARS else v[:SQL_SHOWN_CHARS] + " …"
    columns = [c.slice(0, SQL_SHOWN_ROWS).to_pylist() for c in t.columns]  # by position: names may repeat
    numeric = [_is_number(f.type) for f in t.schema]
    cells = [
        [None if v is None else number_text(v) if n else clip(format_cell(v)) for v, n in zip(r, numeric, strict=True)]
        for r in zip(*columns, strict=True)
    ]
    capped = {"rows": f"capped at {cap:,}; raise the row cap", "bytes": f"capped at {SQL_PAGE_MAX_BYTES // 2**20} MiB"}
    info = f"{t.num_rows:,} row(s)" + (f" ({capped[result.capped_by]} or add LIMIT)" if result.capped_by else "")
    if t.num_rows > SQL_SHOWN_ROWS:
        info += f"; showing the first {SQL_SHOWN_ROWS:,} (all in the CSV)"
    return html.Div(
        [
            html.Div(
                [
                    html.Span(info, id="sql-info", className="status"),
                    " ",
                    html.A(
                        "Download CSV",
                        href=render.href("/download/sql.csv", q=q, rows=cap),
                        className="button small",
                        id="sql-csv",
                    ),
                ],
                className="toolbar",
            ),
            html.Div(
                render.data_table(t.column_names, numeric, cells, format_cell(None), id="sql-result"),
                className="table-wrap",
            ),
        ]
    )


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def number_text(v: Any) -> str:
    """A number of a result for reading: thousands separators, floats to 6 significant digits
    (the CSV keeps every digit)."""
    if isinstance(v, int):
        return f"{v:,}"
    f = float(v)
    if not math.isfinite(f):
        return str(f)
    if f == 0 or 1e-4 <= abs(f) < 1e15:
        digits = max(0, 6 - 1 - math.floor(math.log10(abs(f)))) if f else 0
        return f"{f:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{f:,.0f}"
    return f"{f:.6g}"


def schema(store: Store) -> list[dict[str, Any]]:
    """The store's tables and views (the standard library's among them) with their columns, types
    and documentation, from DuckDB's catalog (the COMMENTs of profiler/schema.py): tables first."""
    columns: dict[str, list[dict[str, Any]]] = {}
    for c in sqltree.query(store.con, "ui.console.schema_columns").to_pylist():
        columns.setdefault(c["name"], []).append(c)
    seen: dict[str, dict[str, Any]] = {}
    for r in sqltree.query(store.con, "ui.console.schema_objects").to_pylist():
        seen.setdefault(r["name"], {**r, "columns": columns.get(r["name"], [])})
    return sorted(seen.values(), key=lambda r: (r["kind"] != "table", render.natural_key(r["name"])))


def schema_browser(store: Store | None) -> Any:
    """The tables and views, each folded with its columns; a click on a name inserts it into the
    query (ui/assets/sql_console.js)."""
    if store is None:
        return None
    items = []
    for r in schema(store):
        # A table's columns travel as data (name, type, comment) and become its list when it is
        # first unfolded (sql_console.js): as Dash components (~0.5 ms each for the renderer to
        # mount, on 2 cores), their hundreds took 200 ms of the page's first view.
        columns = [[c["column_name"], c["data_type"], c["comment"] or ""] for c in r["columns"]]
        summary = html.Summary(
            html.Span(r["name"], className="schema-name", **{"data-insert": r["name"]}),
            title=r["comment"] or "",
            **{"data-about": f" {r['kind']} · {len(r['columns'])} columns"},
        )
        items.append(html.Details(summary, className="schema-item", **{"data-columns": json.dumps(columns)}))
    return html.Div(
        [html.Div("Schema (click a name to insert it)", className="schema-title"), *items],
        id="sql-schema",
        className="schema-browser",
    )

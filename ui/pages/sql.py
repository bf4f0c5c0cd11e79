"""The SQL console page: one read-only query against the store, its first rows shown and all of
them in a CSV download; for the questions no page answers."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from profiler.sql_guard import QueryError, run_query
from profiler.store import Store
from profiler.units import format_cell
from ui import queries as Q
from ui import render as R
from ui import state as S
from ui.downloads import SQL_MAX_ROWS, SQL_PAGE_MAX_BYTES, SQL_TIMEOUT_S
from ui.pages.common import body, controls, state_store

SQL_SHOWN_ROWS, SQL_SHOWN_CHARS = 500, 1_000  # rows shown, characters shown of a cell (all in the CSV)


def layout_sql(store: Store | None, st: dict[str, str]) -> Any:
    q = st.get("q", "")
    rows = S.int_param(st.get("rows"), 1000) or 1000
    return html.Div(
        [
            html.Div(
                [html.Span("Examples: ", className="muted")]
                + [
                    html.Button(name, id={"type": "sql-example", "index": i}, className="button small", n_clicks=0)
                    for i, name in enumerate(Q.SQL_EXAMPLES)
                ],
                className="toolbar",
            ),
            dcc.Textarea(
                id="sql-text",
                value=q,
                className="sql-input",
                placeholder="SELECT ... (one read-only statement; "
                "tables and views: runs, slices, counter_samples, step_markers, sc_partition_stats, event_args …)",
            ),
            controls(
                html.Button("Run query", id="sql-run", className="button", n_clicks=0),
                html.Label(
                    [
                        "row cap",
                        dcc.Input(id="sql-rows", type="number", min=1, max=SQL_MAX_ROWS, value=rows, debounce=True),
                    ],
                    className="control",
                ),
                html.Span(
                    f"read-only; time limit {SQL_TIMEOUT_S:g} s; times are picoseconds (schema: docs/schema.md)",
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
        return R.empty("Type a query above, or pick an example.")
    cap = max(1, min(S.int_param(str(st.get("rows") or ""), 1000) or 1000, SQL_MAX_ROWS))
    try:
        result = run_query(store, q, max_rows=cap, timeout_s=SQL_TIMEOUT_S, max_bytes=SQL_PAGE_MAX_BYTES)
    except QueryError as e:
        return R.error(str(e))
    t, clip = result.table, lambda v: v if len(v) <= SQL_SHOWN_CHARS else v[:SQL_SHOWN_CHARS] + " …"
    columns = [c.slice(0, SQL_SHOWN_ROWS).to_pylist() for c in t.columns]  # by position: names may repeat
    head = html.Tr([html.Th(c) for c in t.column_names])
    body_rows = [html.Tr([html.Td(clip(format_cell(v))) for v in r]) for r in zip(*columns, strict=True)]
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
                        href=R.href("/download/sql.csv", q=q, rows=cap),
                        className="button small",
                        id="sql-csv",
                    ),
                ],
                className="toolbar",
            ),
            html.Div(
                html.Table([html.Thead(head), html.Tbody(body_rows)], className="data", id="sql-result"),
                className="table-wrap",
            ),
        ]
    )

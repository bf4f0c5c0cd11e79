"""Small rendering helpers shared by the pages: units, tables, KPI tiles, findings, states.

Findings are rendered from their fields alone (rule, severity, title, metric, value,
unit, recommendation, evidence, entities, confidence, evidence_sql), so a new
analyzer's findings appear without UI changes.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any
from urllib.parse import urlencode

import plotly.graph_objects as go
import plotly.io as pio
from dash import dcc, html

from analyzers.findings import Finding
from profiler.units import MISSING, format_value
from ui.evidence import evidence_table, format_evidence

FONT_FAMILY = "Arial, 'Liberation Sans', Helvetica, sans-serif"  # the figures' font
FONT_PX = 12
GRAPH_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
SEVERITY_COLORS = {"critical": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}
CATEGORY_COLORS = {
    "tc_forward": "#1e88e5",
    "tc_backward": "#1565c0",
    "tc_collective": "#5e35b1",
    "tc_other": "#90caf9",
    "sc_forward": "#43a047",
    "sc_backward": "#2e7d32",
    "sc_collective": "#00897b",
    "sc_other": "#a5d6a7",
    "device_compute": "#3949ab",
    "device_collective": "#8e24aa",
    "device_memcpy": "#26a69a",
    "host_to_device": "#fb8c00",
    "host_preprocess": "#f4511e",
    "host_launch": "#ffb300",
    "host_other": "#ffcc80",
    "idle": "#bdbdbd",
}
BASE_COLOR, CAND_COLOR = "#78909c", "#e65100"
LONG_TEXT = 100  # table cells longer than this are cut (full text on hover)


def href(path: str, **params: Any) -> str:
    """A page link with query parameters (None values left out)."""
    q = {
        k: (",".join(map(str, v)) if isinstance(v, list | tuple) else v)
        for k, v in params.items()
        if v not in (None, "", [])
    }
    return path + ("?" + urlencode(q) if q else "")


def table(
    rows: list[dict[str, Any]],
    columns: list[tuple[str, str, str]],
    id: str | None = None,
    max_rows: int = 500,
    class_name: str = "data",
    shown_rows: int | None = None,
) -> html.Div:
    """An HTML table of `rows`; columns are (key, header, unit) with unit as for format_value, 'text'
    (cut at LONG_TEXT characters, whole on hover), 'wrap' (long text whole, wrapped within the
    column) or 'link' (a component). Rows after the first `shown_rows` have the class "more-row"
    (hidden while a toggle before the table is closed, style.css). Without a link column its cells
    travel as data (data_table): the Overview's and Compare's tables were 110 and 300 components."""
    shown = rows[:max_rows]
    if any(unit == "link" for _, _, unit in columns):
        body = [html.Tr([_cell(r.get(key), unit) for key, _, unit in columns]) for r in shown]
        for tr in body[shown_rows:] if shown_rows is not None else []:
            tr.className = "more-row"
        head = html.Tr([html.Th(h) for _, h, _ in columns])
        tab: Any = html.Table([html.Thead(head), html.Tbody(body)], className=class_name)
    else:
        texts = [[_text(r.get(key), unit) for key, _, unit in columns] for r in shown]
        units = [unit for _, _, unit in columns]
        tab = data_table(
            [h for _, h, _ in columns],
            [u not in ("text", "wrap") for u in units],
            texts,
            MISSING,
            class_name=class_name,
            wrap=[u == "wrap" for u in units],
            cut=LONG_TEXT,
            more_after=shown_rows,
        )
    children: list[Any] = [tab]
    if len(rows) > max_rows:
        children.append(html.P(f"showing {max_rows:,} of {len(rows):,} rows", className="muted"))
    return html.Div(children, id=id, className="table-wrap") if id else html.Div(children, className="table-wrap")


def _text(v: Any, unit: str) -> str:
    """A cell's text: text as written (other values as JSON), up to the 4,000 characters a cut
    cell shows on hover; a figure formatted in its unit."""
    if unit in ("text", "wrap"):
        return MISSING if v is None else (v if isinstance(v, str) else json.dumps(v, default=str))[:4000]
    return format_value(v, unit)


def _cell(v: Any, unit: str) -> html.Td:
    """A cell as a component (a table with a link column)."""
    if unit == "link":
        return html.Td(v)
    text = _text(v, unit)
    if unit == "wrap":
        return html.Td(text, className="wrap")
    if unit == "text":
        return html.Td(text[:LONG_TEXT] + "…", title=text) if len(text) > LONG_TEXT else html.Td(text)
    return html.Td(text, className="num")


def data_table(
    columns: list[str],
    numeric: list[bool],
    rows: list[list[str | None]],
    null_text: str,
    class_name: str = "data",
    wrap: list[bool] | None = None,
    cut: int | None = None,
    more_after: int | None = None,
    **attrs: Any,
) -> html.Table:
    """A table whose cells travel as data (texts as formatted here; None for a null cell, shown as
    `null_text`), given its head and body in the browser (ui/assets/data_views.js): one component
    for the whole table where a component per cell took Dash's renderer ~0.25 ms each. Number
    columns (`numeric`) are right-aligned, `wrap` columns wrap their text; other text longer than
    `cut` characters is cut (whole on hover); rows after the first `more_after` get the class
    "more-row"."""
    spec: dict[str, Any] = {"columns": columns, "num": numeric, "rows": rows, "null": null_text}
    if wrap and any(wrap):
        spec["wrap"] = wrap
    if cut:
        spec["cut"] = cut
    if more_after is not None:
        spec["more_after"] = more_after
    return html.Table(className=class_name, **{"data-table": json.dumps(spec, ensure_ascii=False)}, **attrs)


def kpis(cards: list[dict[str, str]], **attrs: Any) -> html.Div:
    """A grid of figure cards, each {"label", "value", "detail", "source" (optional: the figure's
    path in `scprof analyze --json`, shown on hover)}, that travel as data and are built in the
    browser (ui/assets/data_views.js) as `kpi` cards (label, value, scope): the Overview's 47
    cards were 94 components for Dash's renderer to mount, ~0.5 ms each."""
    return html.Div(className="kpis", **{"data-kpis": json.dumps(cards, ensure_ascii=False)}, **attrs)


def empty(message: str, hint: str | None = None) -> html.Div:
    """An empty state: what is missing and how to get it."""
    return html.Div([html.P(message), html.Code(hint) if hint else None], className="empty-state")


def error(message: str) -> html.Div:
    return html.Div([html.Strong("Error: "), message], className="error-box", role="alert")


def note(message: str) -> html.Div:
    return html.Div(message, className="note")


def plain(text: Any) -> str:
    """Text from the data (run, op, track, counter names) for Plotly, which reads <b>, <a href>, <br>
    and %{...} in names, labels and hover text: shown as written, never as markup."""
    return escape(str(text), quote=False).replace("%", "&#37;")


def graph(fig: go.Figure, id: str | None = None, height: int | None = None) -> dcc.Graph:
    """A figure as a component; its trace names (legends) shown as written (`plain`)."""
    for trace in fig.data:
        if isinstance(getattr(trace, "name", None), str):
            trace.name = plain(trace.name)
    if height:
        fig.update_layout(height=height)
    kwargs = {"id": id} if id else {}
    return dcc.Graph(figure=fig, config=GRAPH_CONFIG, **kwargs)


def _template() -> dict[str, Any]:
    """plotly_white cut to the 2-D cartesian traces the pages draw: the same look, without its
    geo, polar, ternary, 3-D and map parts, which every figure would otherwise copy and send
    (4.7 of its 7.2 KB)."""
    full = pio.templates["plotly_white"].to_plotly_json()
    cut = ("geo", "polar", "ternary", "scene", "mapbox", "map", "shapedefaults", "annotationdefaults")
    layout = {k: v for k, v in full["layout"].items() if k not in cut}
    # Tick labels are drawn where they fall (the axes' automargin makes room for them): Plotly's
    # default for numeric axes ("hide past div") measures every tick label in the browser to hide
    # those past the graph's edge, a forced layout per label (~100 ms of the Overview's first view).
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**layout[axis], "ticklabeloverflow": "allow"}
    return {
        "layout": layout,
        "data": {k: v for k, v in full["data"].items() if k in ("bar", "scatter", "heatmap", "histogram")},
    }


TEMPLATE = _template()
# The UI's figures take it as plotly.py's default template, validated once here: given to each
# figure (`template=`), it is validated and copied again, 7-10 ms a figure, 0.7 ms this way. So
# the UI's process (which makes no other figures) draws every plotly figure in the UI's style.
pio.templates["scprof"] = go.layout.Template(TEMPLATE)
pio.templates.default = "scprof"


def figure(title: str = "", **layout: Any) -> go.Figure:
    """A figure in the UI's style (the default template, above)."""
    fig = go.Figure(
        layout=dict(
            title=title or None,
            margin=dict(l=60, r=20, t=40 if title else 10, b=40),
            legend=dict(orientation="h", y=-0.2),
            font=dict(size=FONT_PX, family=FONT_FAMILY),
        )
    )
    if layout:
        fig.update_layout(**layout)
    return fig


def prime_figures() -> None:
    """Build and serialize one figure of each trace type the pages draw, once, before the server
    answers: plotly's validators load on first use (~100 ms), which a first page view would wait for."""
    fig = figure(barmode="stack", xaxis_title="x", yaxis_title="y")
    fig.add_trace(go.Bar(x=[1], y=[1], name="b", marker_color="#000", text=["b"], textposition="inside"))
    fig.add_trace(go.Bar(x=[1], y=["b"], orientation="h", insidetextanchor="middle", hovertemplate="b"))
    fig.add_trace(
        go.Scatter(x=[1], y=[1], mode="lines+markers", line=dict(color="#000"), marker=dict(size=4), hovertemplate="s")
    )
    fig.add_trace(go.Heatmap(z=[[1]], x=[1], y=["h"], colorscale="Blues", colorbar=dict(title="h")))
    fig.add_trace(go.Histogram(x=[1], nbinsx=1))
    integer_axis(fig, [1])
    fig.add_vline(x=1, line_dash="dash", annotation_text="v")  # Memory's capacity lines: shapes, annotations
    fig.add_hline(y=1, line_dash="dot")
    graph(fig, height=100).to_plotly_json()
    fig.to_json()


def section(title: str, *children: Any, help_text: str | None = None) -> html.Section:
    return html.Section(
        [html.H3(title), html.P(help_text, className="muted") if help_text else None, *children], className="card"
    )


# Words of a finding's rule or metric that send "show in ..." to the Memory or the SparseCore page.
MEMORY_WORDS = {"hbm", "memory", "oom", "spmem", "heap"}  # an HBM stack is "hbm_stack"
SPARSECORE_WORDS = {"id", "ids", "partition", "partitions", "minibatch", "minibatches", "skew", "limit", "limits"}


def finding_link(f: Finding, run_id: int) -> tuple[str, str]:
    """(label, href) of the page and window that show a finding's evidence, from its entities."""
    ent = f.entities or {}
    steps = ent.get("steps") or []
    step_param = f"{min(steps)}:{max(steps) + 1}" if steps and all(isinstance(s, int) for s in steps) else None
    chips = [c for c in ent.get("chips") or [] if isinstance(c, int)]
    words = set(re.split(r"[^a-z0-9]+", f"{f.rule} {f.metric}".lower()))  # whole words: idle_gaps is no "id"
    if words & MEMORY_WORDS:
        return "Memory", href("/memory", run=run_id, steps=step_param, chips=chips)
    if ent.get("tables") or ent.get("scs") or words & SPARSECORE_WORDS:
        return "SparseCore", href("/sparsecore", run=run_id, steps=step_param, tables=ent.get("tables"))
    return "Timeline", href("/timeline", run=run_id, steps=step_param, chips=chips, hl=finding_hl(f))


# Rules about one category of work: the category whose events "show in Timeline" highlights.
RULE_CATEGORIES = {"host_bound": "host_preprocess", "exposed_sc_all_to_all": "sc_collective"}
HOST_CATEGORIES = ("host_preprocess", "host_to_device", "compile")  # on host tracks (no chip)


def finding_hl(f: Finding) -> str | None:
    """The trace viewer's highlight of a finding (/api/trace/highlight's `hl`): `key:value` terms
    joined by `;` for its tables, chips and category (its `categories` entity, else the rule's
    category in RULE_CATEGORIES); chips are left out for a host category (host events have none).
    None when the finding names none of them."""
    ent = f.entities or {}
    cats = [c for c in ent.get("categories") or [] if isinstance(c, str)]
    if not cats and f.rule in RULE_CATEGORIES:
        cats = [RULE_CATEGORIES[f.rule]]
    chips = [c for c in ent.get("chips") or [] if isinstance(c, int)]
    if cats and all(c in HOST_CATEGORIES for c in cats):
        chips = []
    terms = (
        [f"table:{t}" for t in ent.get("tables") or [] if isinstance(t, str) and ";" not in t]
        + [f"chip:{c}" for c in chips]
        + [f"category:{c}" for c in cats]
    )
    return ";".join(terms) or None


def finding_card(
    f: Finding, run_id: int, compact: bool = False, extra: Any = None, start_ps: int | float = 0
) -> html.Div:
    """One finding: severity, title, headline figure, advice (then `extra`, e.g. its verified fix);
    evidence (timestamps from the run's start, `start_ps`) and entities unless compact."""
    label, link = finding_link(f, run_id)
    head = html.Div(
        [
            html.Span(f.severity, className=f"badge sev-{f.severity}"),
            html.Span(f.title, className="finding-title"),
        ],
        className="finding-head",
    )
    figure_line = html.Div(
        [
            html.Span(f"{f.metric} = {format_value(f.value, f.unit)}", className="mono"),
            html.Span(f" · confidence {f.confidence} · rule {f.rule}", className="muted"),
        ]
    )
    parts: list[Any] = [head, figure_line, html.P(["→ ", f.recommendation], className="recommendation"), extra]
    if not compact:
        if f.evidence:
            parts.append(
                html.Details(
                    [
                        html.Summary("evidence"),
                        evidence_table(f.evidence, start_ps),
                    ],
                    open=True,
                )
            )
        if f.entities:
            parts.append(
                html.Div(
                    ["affected: ", "; ".join(f"{k}: {_short_list(v)}" for k, v in f.entities.items())],
                    className="muted",
                )
            )
        if f.evidence_sql:
            parts.append(
                html.Details(
                    [
                        html.Summary("evidence query"),
                        html.Pre(f.evidence_sql, className="sql"),
                        dcc.Link("open in SQL console", href=href("/sql", q=_first_statement(f.evidence_sql))),
                    ]
                )
            )
    parts.append(dcc.Link(f"show in {label} →", href=link, className="finding-link"))
    return html.Div(parts, className=f"finding sev-border-{f.severity}")


def _evidence_value(key: str, v: Any) -> str:
    return format_evidence(key, v)


def _short_list(v: Any) -> str:
    if isinstance(v, list):
        s = ", ".join(map(str, v[:12]))
        return s + (f" … ({len(v)})" if len(v) > 12 else "")
    return str(v)


def _first_statement(sql_text: str) -> str:
    lines = [ln for ln in sql_text.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    return "\n".join(lines).rstrip(";")


def generic(value: Any, depth: int = 0) -> Any:
    """Any JSON-like value as readable components: scalars, key/value tables, row tables."""
    if isinstance(value, dict):
        if all(not isinstance(v, dict | list) for v in value.values()):
            return html.Table(
                [
                    html.Tr([html.Td(str(k)), html.Td(_evidence_value(str(k), v), className="num")])
                    for k, v in value.items()
                ],
                className="kv",
            )
        return html.Div([html.Div([html.H4(str(k)), generic(v, depth + 1)]) for k, v in value.items()])
    if isinstance(value, list):
        if not value:
            return html.Span("none", className="muted")
        if all(isinstance(v, dict) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            flat = [
                {k: (json.dumps(v.get(k)) if isinstance(v.get(k), dict | list) else v.get(k)) for k in keys}
                for v in value
            ]
            return table(flat, [(k, k, "text") for k in keys], max_rows=200)
        return html.Span(_short_list(value))
    return html.Span(_evidence_value("", value) if value is not None else MISSING)


def natural_key(name: Any) -> tuple:
    """Sort key of a name with numbers in it, by their value: t0, t1, t2, t10 (not t0, t1, t10, t2)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in re.split(r"(\d+)", str(name)) if p)


# More steps than this and a bar per step is under 2 px wide in a half-page graph (a long run's
# 11,682 steps drew nothing one could see): a per-step series is then drawn as a filled line.
MAX_STEP_BARS = 300


def step_series(steps: Any, values: Any, stack: str | None = None, **trace: Any) -> go.Bar | go.Scatter:
    """A per-step series: a bar per step while each can be seen, else a line filled down to the
    series under it (`stack`: those of one stack are summed, as stacked bars are) or to zero."""
    if len(steps) <= MAX_STEP_BARS:
        return go.Bar(x=steps, y=values, **trace)
    color = trace.pop("marker_color", None)
    return go.Scatter(
        x=steps,
        y=values,
        mode="lines",
        line=dict(width=0.5, color=color),
        fillcolor=color,
        stackgroup=stack,
        fill=None if stack else "tozeroy",
        **trace,
    )


def integer_axis(fig: go.Figure, values: Any, axis: str = "xaxis", max_ticks: int = 12) -> go.Figure:
    """Whole-number ticks on an axis of steps (or trials, or counts of steps): a tick every 1, 2,
    5, 10, 20, ... units, the smallest that gives at most `max_ticks` ticks over `values`' span
    (Plotly's own choice puts ticks at 0.5 on a few steps)."""
    vals = [float(v) for v in values if v is not None]
    span = (max(vals) - min(vals)) if vals else 0.0
    dtick, mult = 1, 0
    while span / dtick > max_ticks:
        mult += 1
        dtick = (1, 2, 5)[mult % 3] * 10 ** (mult // 3)
    fig.update_layout({axis: dict(tickmode="linear", tick0=0, dtick=dtick, tickformat="d")})
    return fig


# Display units for a time axis: (name, picoseconds per unit), largest first.
TIME_UNITS = (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3))


def time_unit(span_ps: float) -> tuple[str, float]:
    """The unit that shows a span of `span_ps` with a few digits before the point (a time axis's)."""
    for name, scale in TIME_UNITS:
        if span_ps >= 2 * scale:
            return name, scale
    return "ns", 1e3

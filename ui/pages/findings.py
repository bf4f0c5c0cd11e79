"""The Findings page: the analyzers' findings for a run by severity, what they could not check
and which analyzers ran; the list of problems to fix, each with its evidence."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from analyzers.findings import SEVERITIES, Finding, group_findings
from analyzers.registry import ANALYZERS
from profiler.store import Store
from profiler.units import evidence_label, format_evidence, format_value
from ui import data, render, state, whatif_data
from ui.pages.common import page_run, run_page


def layout_findings(store: Store, st: dict[str, str]) -> Any:
    run = page_run(store, st)
    sev = [s for s in state.str_list(st.get("sev")) if s in SEVERITIES] or list(SEVERITIES)
    severity = html.Label(
        ["severity", dcc.Checklist(id="findings-sev", options=list(SEVERITIES), value=sev, inline=True)],
        className="control",
    )
    return run_page("findings", store, run, {"run": run, "sev": sev}, severity)


def render_findings(store: Store, st: dict[str, Any]) -> Any:
    run = st["run"]
    report = data.analysis(store, run)
    sev = st.get("sev") or list(SEVERITIES)
    shown = [f for f in report.findings if f.severity in sev]
    counts = {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES}
    parts: list[Any] = [
        html.P(" · ".join(f"{n} {s}" for s, n in counts.items()), className="status", id="findings-counts")
    ]
    if shown:
        verified = whatif_data.verified_fixes(store, run) if any(f.fix for f in shown) else {}
        info = data.run_info(store, run)
        name, start_ps = info["name"], info.get("first_ps") or 0
        for group in group_findings(shown):
            lead = group[0]
            extra = fix_block(lead, run, name, verified)
            if len(group) == 1:
                parts.append(render.finding_card(lead, run, extra=extra, start_ps=start_ps))
            else:
                parts.append(group_card(group, run, extra=extra, start_ps=start_ps))
    else:
        parts.append(
            render.empty(
                "No findings"
                + (
                    " of the chosen severities."
                    if report.findings
                    else ": the analyzers found nothing to flag in this run."
                )
            )
        )
    notes = [(name, n) for name, a in report.analyses.items() for n in a.notes]
    if notes:
        parts.append(
            render.section(
                "What the analyzers could not check", html.Ul([html.Li(f"{name}: {n}") for name, n in notes])
            )
        )
    parts.append(
        render.section("Analyzers run", html.Ul([html.Li([html.B(m.NAME), f" — {m.QUESTION}"]) for m in ANALYZERS]))
    )
    return html.Div(parts)


def fix_block(f: Any, run: int, run_name: str, verified: dict) -> Any:
    """A finding's fix and what its simulation showed (`scprof analyze --verify`'s stored trial), or
    how to verify it; None for a finding without a fix."""
    if not f.fix:
        return None
    row = whatif_data.verification_of(f, verified)
    lines: list[Any] = [html.Div(whatif_data.fix_text(f.fix), className="mono fix-set")]
    if row is None:
        lines.append(
            html.Div(["not verified yet: ", html.Code(whatif_data.verify_command(run_name))], className="muted")
        )
    else:
        tone = "good" if row["accepted"] else "bad"
        text: list[Any] = [html.Span(whatif_data.verified_text(row), className=f"verified {tone}")]
        if row["trial_run_id"] is not None:
            text += [
                " · ",
                dcc.Link("compare the trial →", href=render.href("/compare", base=run, cand=row["trial_run_id"])),
            ]
        lines.append(html.Div(text))
    return html.Div(lines, className="finding-fix")


SHOWN_ROWS = 5  # rows of a group's table shown before "N more"
ENTITY_HEADERS = {"tables": "table", "chips": "chip", "scs": "SparseCore", "steps": "steps"}


def group_card(group: list[Finding], run: int, extra: Any = None, start_ps: int | float = 0) -> html.Div:
    """One card for a rule's repeated findings: the most severe one's title, advice and fix, then a
    compact table of every affected entity with its headline value and evidence, most severe first."""
    lead = group[0]
    counts = {s: sum(f.severity == s for f in group) for s in SEVERITIES}
    values = [f.value for f in group if isinstance(f.value, int | float)]
    span = (
        f" · {lead.metric} from {format_value(min(values), lead.unit)} to {format_value(max(values), lead.unit)}"
        if values
        else ""
    )
    label, link = render.finding_link(lead, run)
    tables = sorted({t for f in group for t in (f.entities or {}).get("tables") or []}, key=render.natural_key)
    if label == "SparseCore" and tables:
        link = render.href("/sparsecore", run=run, tables=tables)
    head = html.Div(
        [
            html.Span(lead.severity, className=f"badge sev-{lead.severity}"),
            html.Span(lead.title, className="finding-title"),
        ],
        className="finding-head",
    )
    summary = html.Div(
        [
            html.Span(
                f"{len(group)} findings of this rule: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n),
                className="group-count",
            ),
            html.Span(f"{span} · rule {lead.rule}", className="muted"),
        ]
    )
    rows, columns = _group_rows(group, start_ps)
    # One table under one header; its rows after the first SHOWN_ROWS are hidden while the
    # "N more" toggle before it is closed (style.css; drawn below the table).
    table = render.table(rows, columns, class_name="data group-table", shown_rows=SHOWN_ROWS)
    table_parts: list[Any] = [table]
    if len(rows) > SHOWN_ROWS:
        more = [
            html.Span(f"{len(rows) - SHOWN_ROWS} more", className="when-closed"),
            html.Span(f"show the first {SHOWN_ROWS} only", className="when-open"),
        ]
        table_parts.insert(0, html.Details([html.Summary(more)], className="group-more"))
    parts: list[Any] = [
        head,
        summary,
        html.P(["→ ", lead.recommendation], className="recommendation"),
        extra,
        html.Div(table_parts, className="finding-group"),
    ]
    if lead.evidence_sql:
        parts.append(
            html.Details(
                [
                    html.Summary("evidence query (of the first row)"),
                    html.Pre(lead.evidence_sql, className="sql"),
                    dcc.Link(
                        "open in SQL console", href=render.href("/sql", q=render._first_statement(lead.evidence_sql))
                    ),
                ]
            )
        )
    parts.append(dcc.Link(f"show in {label} →", href=link, className="finding-link"))
    return html.Div(parts, className=f"finding finding-grouped sev-border-{lead.severity}")


def _group_rows(group: list[Finding], start_ps: int | float) -> tuple[list[dict[str, Any]], list[tuple]]:
    """(rows, render.table columns): severity, the entities, the headline value and scalar evidence."""
    entity_keys = list(dict.fromkeys(k for f in group for k in (f.entities or {})))
    evidence_keys = list(
        dict.fromkeys(k for f in group for k, v in (f.evidence or {}).items() if not isinstance(v, dict | list))
    )
    lead = group[0]
    columns = [("severity", "severity", "text")]
    columns += [(f"e:{k}", ENTITY_HEADERS.get(k, evidence_label(k)), "text") for k in entity_keys]
    plain_unit = lead.unit not in ("ps", "bytes") and "share" not in lead.unit  # the unit in the header
    header = evidence_label(lead.metric) + (f" ({lead.unit})" if plain_unit and lead.unit else "")
    columns += [("value", header, "text")]
    columns += [(f"v:{k}", evidence_label(k), "text") for k in evidence_keys]
    rows = []
    for f in group:
        value = format_value(f.value, f.unit)
        if plain_unit and isinstance(f.value, int | float):
            value = format_evidence("", f.value)
        row: dict[str, Any] = {"severity": f.severity, "value": value}
        for k in entity_keys:
            row[f"e:{k}"] = render._short_list((f.entities or {}).get(k, ""))
        for k in evidence_keys:
            row[f"v:{k}"] = format_evidence(k, (f.evidence or {}).get(k), start_ps)
        rows.append(row)
    return rows, columns

"""The Findings page: the analyzers' findings for a run by severity, what they could not check
and which analyzers ran; the list of problems to fix, each with its evidence."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from analyzers.findings import SEVERITIES
from analyzers.registry import ANALYZERS
from profiler.store import Store
from ui import data as D
from ui import render as R
from ui import state as S
from ui.pages.common import _no_runs, body, controls, pick_run, run_dropdown, run_header, state_store


def layout_findings(store: Store, st: dict[str, str]) -> Any:
    run = pick_run(store, st)
    if run is None:
        return _no_runs()
    sev = [s for s in S.str_list(st.get("sev")) if s in SEVERITIES] or list(SEVERITIES)
    return html.Div(
        [
            controls(
                run_dropdown("findings-run", store, run),
                html.Label(
                    ["severity", dcc.Checklist(id="findings-sev", options=list(SEVERITIES), value=sev, inline=True)],
                    className="control",
                ),
            ),
            run_header(store, run),
            state_store("findings", {"run": run, "sev": sev}),
            body("findings"),
        ]
    )


def render_findings(store: Store, st: dict[str, Any]) -> Any:
    run = st["run"]
    report = D.analysis(store, run)
    sev = st.get("sev") or list(SEVERITIES)
    shown = [f for f in report.findings if f.severity in sev]
    counts = {s: sum(f.severity == s for f in report.findings) for s in SEVERITIES}
    parts: list[Any] = [
        html.P(" · ".join(f"{n} {s}" for s, n in counts.items()), className="status", id="findings-counts")
    ]
    if shown:
        parts += [R.finding_card(f, run) for f in shown]
    else:
        parts.append(
            R.empty(
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
            R.section("What the analyzers could not check", html.Ul([html.Li(f"{name}: {n}") for name, n in notes]))
        )
    parts.append(
        R.section("Analyzers run", html.Ul([html.Li([html.B(m.NAME), f" — {m.QUESTION}"]) for m in ANALYZERS]))
    )
    return html.Div(parts)

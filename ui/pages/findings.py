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
from ui import whatif_data as W
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
        verified = W.verified_fixes(store, run) if any(f.fix for f in shown) else {}
        name = D.run_info(store, run)["name"]
        parts += [R.finding_card(f, run, extra=fix_block(f, run, name, verified)) for f in shown]
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


def fix_block(f: Any, run: int, run_name: str, verified: dict) -> Any:
    """A finding's fix and what its simulation showed (`scprof analyze --verify`'s stored trial), or
    how to verify it; None for a finding without a fix."""
    if not f.fix:
        return None
    row = W.verification_of(f, verified)
    lines: list[Any] = [html.Div(W.fix_text(f.fix), className="mono fix-set")]
    if row is None:
        lines.append(html.Div(["not verified yet: ", html.Code(W.verify_command(run_name))], className="muted"))
    else:
        tone = "good" if row["accepted"] else "bad"
        text: list[Any] = [html.Span(W.verified_text(row), className=f"verified {tone}")]
        if row["trial_run_id"] is not None:
            text += [
                " · ",
                dcc.Link("compare the trial →", href=R.href("/compare", base=run, cand=row["trial_run_id"])),
            ]
        lines.append(html.Div(text))
    return html.Div(lines, className="finding-fix")

"""The Runs page: every run in the store with its hardware, steps, mean step time and status,
filtered and sorted; where a user starts, to open a run's pages or pick two runs to compare."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from profiler.stdlib import COUNTED_RULE
from profiler.store import Store
from ui import data as D
from ui import render as R
from ui.pages.common import _no_runs, body, controls, run_dropdown, state_store


def layout_runs(store: Store, st: dict[str, str]) -> Any:
    opts = D.run_options(store)
    if not opts:
        return _no_runs()
    ids = [o["value"] for o in opts]
    base = D.resolve(store, st.get("base")) or (ids[-2] if len(ids) > 1 else ids[0])
    cand = D.resolve(store, st.get("cand")) or ids[-1]
    sort_opts = [{"label": k.replace("_ps", "").replace("_", " "), "value": k} for k in D.RUN_SORT_KEYS]
    return html.Div(
        [
            controls(
                html.Label(
                    [
                        "filter",
                        dcc.Input(
                            id="runs-filter",
                            value=st.get("filter", ""),
                            debounce=True,
                            placeholder="name, source, status, tags…",
                            type="text",
                        ),
                    ],
                    className="control",
                ),
                html.Label(
                    [
                        "sort by",
                        dcc.Dropdown(
                            id="runs-sort", options=sort_opts, value=st.get("sort", "run_id"), clearable=False
                        ),
                    ],
                    className="control",
                ),
                dcc.Checklist(
                    id="runs-desc",
                    options=[{"label": "descending", "value": "desc"}],
                    value=["desc"] if st.get("desc") == "1" else [],
                    className="control",
                ),
            ),
            controls(
                run_dropdown("runs-base", store, base, "baseline"),
                run_dropdown("runs-cand", store, cand, "candidate"),
                dcc.Link(
                    "Compare →",
                    href=R.href("/compare", base=base, cand=cand),
                    id="runs-compare-link",
                    className="button",
                ),
            ),
            state_store("runs", {**st, "base": base, "cand": cand}),
            body("runs"),
        ]
    )


def render_runs(store: Store, st: dict[str, Any]) -> Any:
    rows = D.runs(store, st.get("filter", ""), st.get("sort", "run_id"), st.get("desc") == "1")
    if not rows and not st.get("filter"):
        return _no_runs()
    if not rows:
        return R.empty(f"No run matches the filter {st.get('filter')!r}.")
    for r in rows:
        rid = r["run_id"]
        r["name_link"] = dcc.Link(r["name"], href=R.href("/overview", run=rid))
        r["pages"] = html.Span(
            [
                dcc.Link("timeline", href=R.href("/timeline", run=rid)),
                " · ",
                dcc.Link("findings", href=R.href("/findings", run=rid)),
                " · ",
                dcc.Link("compare", href=R.href("/compare", base=st.get("base"), cand=rid)),
            ]
        )
    cols = [
        ("run_id", "id", "count"),
        ("name_link", "name", "link"),
        ("source", "source", "text"),
        ("hardware", "hardware", "text"),
        ("steps", "steps", "count"),
        ("events", "events", "count"),
        ("mean_step_ps", "mean step time (counted steps)", "ps"),
        ("span_ps", "span", "ps"),
        ("status_text", "status", "text"),
        ("tags", "tags", "text"),
        ("ingested", "ingested", "text"),
        ("pages", "open", "link"),
    ]
    note = f"{len(rows)} run(s). Mean step time: over each run's counted steps ({COUNTED_RULE})."
    return html.Div([R.table(rows, cols, id="runs-table"), html.P(note, className="muted")])

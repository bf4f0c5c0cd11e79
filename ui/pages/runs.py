"""The Runs page: every run in the store with its hardware, steps, mean step time and status,
filtered and sorted; where a user starts, to open a run's pages or pick two runs to compare."""

from __future__ import annotations

import json
from typing import Any

from dash import dcc, html

from profiler.stdlib import COUNTED_RULE
from profiler.store import Store
from ui import compare_data, data, render
from ui.pages.common import _no_runs, body, controls, run_dropdown, state_store


def layout_runs(store: Store, st: dict[str, str]) -> Any:
    opts = data.run_options(store)
    if not opts:
        return _no_runs()
    base, cand = pick_pair(store, st)
    sort_opts = [{"label": k.replace("_ps", "").replace("_", " "), "value": k} for k in data.RUN_SORT_KEYS]
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
                dcc.Checklist(
                    id="runs-trials",
                    options=[{"label": f"what-if trials ({data.trials_count(store)})", "value": "trials"}],
                    value=["trials"] if st.get("trials") == "1" else [],
                    className="control",
                ),
            ),
            controls(
                run_dropdown("runs-base", store, base, "baseline"),
                run_dropdown("runs-cand", store, cand, "candidate"),
                dcc.Link(
                    "Compare →",
                    href=render.href("/compare", base=base, cand=cand),
                    id="runs-compare-link",
                    className="button",
                ),
            ),
            state_store("runs", {**st, "base": base, "cand": cand}),
            body("runs"),
        ]
    )


def pick_pair(store: Store, st: dict[str, Any]) -> tuple[int | None, int | None]:
    """The baseline and candidate the URL picks, each else its default (compare_data: never a failed
    run or one without steps while another exists)."""
    rows = compare_data.run_list(store)
    cand = data.resolve(store, st.get("cand")) or compare_data.default_candidate(rows)
    base = data.resolve(store, st.get("base")) or compare_data.default_baseline(rows, cand)
    return base, cand


def tag_chips(tags: Any) -> html.Div | None:
    """A run's tags as `key: value` chips (long values cut, whole on hover)."""
    if isinstance(tags, str):
        try:
            tags = json.loads(tags)
        except ValueError:
            return html.Div(tags[:40], className="tag-chips") if tags else None
    if not isinstance(tags, dict) or not tags:
        return None
    chips = []
    for k, v in tags.items():
        text = f"{k}: {v if isinstance(v, str) else json.dumps(v)}"
        chips.append(html.Span(text if len(text) <= 40 else text[:39] + "…", title=text[:2000], className="tag-chip"))
    return html.Div(chips, className="tag-chips")


def render_runs(store: Store, st: dict[str, Any]) -> Any:
    trials = st.get("trials") == "1"
    rows = data.runs(store, st.get("filter", ""), st.get("sort", "run_id"), st.get("desc") == "1", trials)
    if not rows and not st.get("filter"):
        return _no_runs()
    if not rows:
        return render.empty(f"No run matches the filter {st.get('filter')!r}.")
    base, cand = st.get("base"), st.get("cand")
    keep = {k: st.get(k) for k in ("filter", "sort", "desc", "trials") if st.get(k)}
    for r in rows:
        rid = r["run_id"]
        r["name_link"] = dcc.Link(r["name"], href=render.href("/overview", run=rid))
        r["pages"] = html.Span(
            [
                dcc.Link("timeline", href=render.href("/timeline", run=rid)),
                " · ",
                dcc.Link("findings", href=render.href("/findings", run=rid)),
                " · ",
                dcc.Link("compare", href=render.href("/compare", run=rid), title="this run against its baseline"),
            ],
            className="run-links",
        )
        r["pick"] = html.Span(
            [
                _pick("baseline", rid, rid == base, render.href("/runs", **keep, base=rid, cand=cand)),
                _pick("candidate", rid, rid == cand, render.href("/runs", **keep, base=base, cand=rid)),
            ],
            className="run-pick",
        )
        r["tag_chips"] = tag_chips(r["tags"])
    cols = [
        ("run_id", "id", "count"),
        ("name_link", "name", "link"),
        ("pages", "open", "link"),
        ("pick", "compare as", "link"),
        ("status_text", "status", "text"),
        ("hardware", "hardware", "text"),
        ("steps", "steps", "count"),
        ("mean_step_ps", "mean step time (counted steps)", "ps"),
        ("events", "events", "count"),
        ("span_ps", "span", "ps"),
        ("source", "source", "text"),
        ("tag_chips", "tags", "link"),
        ("ingested", "ingested", "text"),
    ]
    hidden = 0 if trials else data.trials_count(store)
    note = (
        f"{len(rows)} run(s)"
        + (f", and {hidden} what-if trial(s) not listed (tick 'what-if trials' to list them)" if hidden else "")
        + f". Mean step time: over each run's counted steps ({COUNTED_RULE}). "
        "Pick a baseline and a candidate in 'compare as' (or above), then Compare."
    )
    return html.Div(
        [render.table(rows, cols, id="runs-table", class_name="data runs"), html.P(note, className="muted")]
    )


def _pick(role: str, run: int, on: bool, href: str) -> Any:
    """A row's "baseline" / "candidate" pick: a link that makes the run that side of the pair."""
    if on:
        return html.Span(f"✓ {role}", className=f"pick on pick-{role}", id=f"runs-pick-{role}-{run}")
    return dcc.Link(role, href=href, className=f"pick pick-{role}", id=f"runs-pick-{role}-{run}")

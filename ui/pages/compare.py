"""The Compare page: a baseline and a candidate run side by side (step-time distributions,
SparseCore and memory, from SQL) under the verdict of `scprof compare` with its breakdown, findings,
per-op and per-table deltas and config diff; to tell whether a change helped."""

from __future__ import annotations

import json
import shlex
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html

from analyzers.compare import verdict_text
from analyzers.findings import Finding
from analyzers.rules.breakdown import step_stats
from analyzers.time_split import CATEGORIES
from profiler.store import Store
from profiler.units import MISSING, ci_text, format_delta, format_value, signed_pct, unit_of
from ui import compare_data, data, render, whatif_data
from ui.pages.common import NO_RUNS, _no_runs, body, controls, run_dropdown, state_store
from ui.pages.compare_sides import side_by_side_memory, side_by_side_sc
from ui.render import time_unit


def layout_compare(store: Store, st: dict[str, str]) -> Any:
    """Controls for the pair the URL names (`base`/`cand`, or `run` as the candidate: the top bar's
    link) with sensible defaults (compare_data.compare_pair); a run the store lacks is named."""
    opts = data.run_options(store)
    if not opts:
        return _no_runs()
    pair = compare_data.compare_pair(store, st)
    base, cand = pair["base"], pair["cand"]
    swap = (
        dcc.Link("⇄ swap", href=render.href("/compare", base=cand, cand=base), className="button small")
        if base is not None and cand is not None
        else None
    )
    head = controls(
        run_dropdown("compare-base", store, base, "baseline"),
        run_dropdown("compare-cand", store, cand, "candidate"),
        swap,
    )
    state = state_store("compare", {"base": base, "cand": cand})
    if pair["unknown"]:
        return html.Div(
            [
                head,
                state,
                html.Div(
                    [html.P(u, className="unknown-run") for u in pair["unknown"]]
                    + [html.P(["Pick runs above, or see ", dcc.Link("the runs in this store", href="/runs"), "."])],
                    className="empty-state",  # as on every run page (ui/pages/common.py unknown_run)
                    role="status",
                    id="compare-unknown",
                ),
            ]
        )
    if base is None or cand is None:
        return html.Div([head, state, render.empty("One run in this store: record another to compare.", NO_RUNS[1])])
    return html.Div([head, state, body("compare", "verdict"), body("compare"), body("compare", "deltas")])


def render_compare(store: Store, st: dict[str, Any]) -> Any:
    """The SQL side of Compare (fast on any run size): step-time distributions from the step
    markers, SparseCore and memory side by side."""
    base, cand = st["base"], st["cand"]
    if base == cand:
        return render.note("Baseline and candidate are the same run: pick two different runs above.")
    bi, ci = data.run_info(store, base), data.run_info(store, cand)
    parts: list[Any] = []
    b_all = data.step_times(store, base, data.clamp_steps(data.step_bounds(store, base), None))
    c_all = data.step_times(store, cand, data.clamp_steps(data.step_bounds(store, cand), None))
    # the counted steps, as every summary (and the verdict) covers them
    bst, cst = ({"step_ps": s["step_ps"][s["counted"]]} for s in (b_all, c_all))
    if len(bst["step_ps"]) and len(cst["step_ps"]):
        unit, scale = time_unit(float(max(bst["step_ps"].max(), cst["step_ps"].max())))
        fig = render.figure(barmode="overlay", xaxis_title=f"step time ({unit})", yaxis_title="steps")
        for name, s, color in (
            (f"baseline: {bi['name']}", bst, render.BASE_COLOR),
            (f"candidate: {ci['name']}", cst, render.CAND_COLOR),
        ):
            fig.add_trace(
                go.Histogram(
                    x=s["step_ps"] / scale,
                    name=name,
                    opacity=0.6,
                    marker_color=color,
                    nbinsx=40,
                    bingroup="step_time",  # one set of bins for both runs, so each run's bars have width
                    hovertemplate=f"%{{x}} {unit}: %{{y}} steps<extra>{name}</extra>",
                )
            )
        render.integer_axis(fig, [0, len(bst["step_ps"]), len(cst["step_ps"])], axis="yaxis")  # counts of steps
        bs, cs = (
            {**step_stats(s["step_ps"]), "step_ps_min": s["step_ps"].min(), "step_ps_max": s["step_ps"].max()}
            for s in (bst, cst)
        )
        rows = []
        for label in ("mean", "p50", "p90", "min", "max"):
            b, c = float(bs[f"step_ps_{label}"]), float(cs[f"step_ps_{label}"])
            rows.append({"stat": label, "base": b, "cand": c, "delta": format_delta(b, c, "ps")})
        parts.append(
            html.Div(
                [
                    render.section("Step-time distributions", render.graph(fig, id="compare-hist", height=300)),
                    render.section(
                        "Step time",
                        render.table(
                            rows,
                            [
                                ("stat", "", "text"),
                                ("base", bi["name"], "ps"),
                                ("cand", ci["name"], "ps"),
                                ("delta", "change", "text"),
                            ],
                        ),
                        help_text=f"{bi['name']}: {data.steps_covered(b_all)}; {ci['name']}: {data.steps_covered(c_all)}.",
                    ),
                ],
                className="grid2",
            )
        )
    else:
        lacking = [
            compare_data.no_steps_text(info, role)
            for info, role, st_ in ((bi, "baseline", bst), (ci, "candidate", cst))
            if not len(st_["step_ps"])
        ]
        parts.append(render.empty(f"No step-time distributions: {'; '.join(lacking)}.", None))
    if data.has_sparsecores(store, base) or data.has_sparsecores(store, cand):
        parts.append(side_by_side_sc(store, base, cand, bi, ci))
    parts.append(side_by_side_memory(store, base, cand, bi, ci))
    return html.Div(parts)


def attribution_section(store: Store, base: int, cand: int, bname: str, cname: str) -> Any:
    """Each changed key's share of the gain (`scprof compare --attribute`'s stored trials), or how
    to compute it."""
    a = whatif_data.attribution(store, base, cand)
    if a is None or a["gain_ps"] is None:
        return render.section(
            "What each change contributed",
            html.P(
                [
                    "Not computed for this pair: ",
                    html.Code(f"scprof compare {shlex.quote(bname)} {shlex.quote(cname)} --attribute"),
                    " simulates each changed key alone and left out, and stores its share of the gain.",
                ],
                className="muted",
                id="compare-attribution-hint",
            ),
        )
    cand_config = whatif_data.flat_config(data.run_info(store, cand)["config"])
    rows = [
        {
            **r,
            "value": cand_config.get(r["key"], r["value"]),  # the trials' value may name a shipped copy
            "alone": signed_pct(r["alone_change"]) if r["alone_change"] is not None else None,
            "alone_ci": ci_text(r["alone_ci_low"], r["alone_ci_high"]),
        }
        for r in a["changes"]
    ]
    gain = a["gain_ps"]
    interaction = a["interaction_ps"]
    help_text = (
        f"Step time {format_delta(a['base_step_time_ps'], a['cand_step_time_ps'], 'ps')} from baseline to candidate (the gain). A key's effect alone "
        "is the baseline with only that key changed; left out, the candidate without it; its contribution is "
        "the mean of the two and its share that over the gain."
        + (
            f" Interaction (the gain the effects alone do not explain): {format_value(interaction, 'ps')}."
            if interaction is not None and len(rows) > 1
            else ""
        )
    )
    return render.section(
        "What each change contributed (scprof compare --attribute)",
        render.table(
            rows,
            [
                ("key", "key", "text"),
                ("value", cname, "text"),
                ("alone_gain_ps", "gain alone", "ps"),
                ("alone", "change alone", "text"),
                ("alone_ci", "95% interval", "text"),
                ("left_out_gain_ps", "cost left out", "ps"),
                ("contribution_ps", "contribution", "ps"),
                ("share", "share of the gain", "share"),
            ],
            id="compare-attribution",
        )
        if rows
        else render.empty("No user-set key differs between the two runs: nothing to attribute."),
        help_text=help_text if gain else None,
    )


def render_compare_verdict(store: Store, st: dict[str, Any]) -> tuple[Any, Any]:
    """Compare's analysis in two parts: above the step-time distributions, the verdict of `scprof
    compare` (or, for a pair it refuses, one line naming the run and why), the user's changes (the
    config keys they set, then what each contributed) and the findings resolved / new / persisting
    with both sides' figures; below them the breakdown, per-op and per-table deltas (analyzers/
    compare.py, cached). A pair without steps still shows its config diff and findings."""
    base, cand = st["base"], st["cand"]
    if base == cand:
        return html.Div(), html.Div()
    bi, ci = data.run_info(store, base), data.run_info(store, cand)
    bn, cn = bi["name"], ci["name"]
    c, error = data.compare(store, base, cand)  # CompareError's words for a run without steps
    top: list[Any] = []
    if c is None:
        top.append(_not_comparable(error or "comparison unavailable", bi, ci))
    else:
        top.append(_verdict_banner(c, bn, cn))
    diff = c["config_diff"] if c is not None else compare_data.config_diff_of_pair(store, base, cand)
    top.append(_config_diff(diff, store, base, cand, bn, cn))
    if c is not None:
        top.append(attribution_section(store, base, cand, bn, cn))
    findings = c["findings"] if c is not None else compare_data.findings_of_pair(store, base, cand)
    top.append(_findings(findings, base, cand, bn, cn))
    if c is None:
        return html.Div(top), html.Div()
    rest: list[Any] = [_breakdown_deltas(c.get("breakdown") or [], bn, cn)]
    ops = c.get("ops") or []
    if ops:
        rest.append(_op_deltas(ops, store, base, cand, bn, cn))
    tables = c.get("tables") or []
    if tables:
        for r in tables:
            r["delta"] = format_delta(r.get("base_ps_per_step"), r.get("cand_ps_per_step"), "ps")
        rest.append(
            render.section(
                "Per-table deltas (SparseCore time per counted step, summed over the run's SparseCores)",
                render.table(
                    tables,
                    [
                        ("table_name", "table", "text"),
                        ("base_ops_per_step", f"ops/step {bn}", "count"),
                        ("cand_ops_per_step", f"ops/step {cn}", "count"),
                        ("base_ps_per_step", f"time/step {bn}", "ps"),
                        ("cand_ps_per_step", f"time/step {cn}", "ps"),
                        ("delta", "change", "text"),
                    ],
                    max_rows=25,
                ),
            )
        )
    known = {"base", "cand", "step_time", "breakdown", "findings", "ops", "tables", "config_diff", "notes"}
    extra = {k: v for k, v in c.items() if k not in known}
    if extra:
        rest.append(
            html.Details([html.Summary("Further figures of `scprof compare`"), render.generic(extra)], className="card")
        )
    return html.Div(top), html.Div(rest)


def _not_comparable(why: str, bi: dict[str, Any], ci: dict[str, Any]) -> html.Div:
    """One line naming the run that cannot be compared and why (CompareError's words), then each
    failed run's error as it recorded it."""
    details = [
        html.Div(f"{role} {info['name']!r}: {info['tags'].get('error')}", className="muted")
        for role, info in (("baseline", bi), ("candidate", ci))
        if isinstance(info.get("tags"), dict) and info["tags"].get("error")
    ]
    return html.Div(
        [
            html.Div(f"candidate {ci['name']} vs baseline {bi['name']}", className="muted"),
            html.Div("no step-time verdict", className="verdict-word"),
            html.Div(why, id="compare-why-not"),
            *details,
            html.Div("The config diff and the findings below still compare.", className="muted"),
        ],
        className="verdict neutral",
        id="compare-not-comparable",
    )


def _config_diff(diff: list[dict[str, Any]], store: Store, base: int, cand: int, bn: str, cn: str) -> Any:
    """The config diff: the keys the user set first, labels, then what the emulator derived from
    them (resolved.*) collapsed with their count."""
    missing = [n for r, n in ((base, bn), (cand, cn)) if not compare_data.has_config(store, r)]
    cols = [("key", "key", "text"), ("base", bn, "text"), ("cand", cn, "text")]
    if missing:
        note = render.note(
            f"No config recorded for {' and '.join(repr(n) for n in missing)} (a captured run): "
            "every key of the other run's config differs."
        )
    else:
        note = None
    parts = compare_data.split_config_diff(diff)
    user, labels, derived = parts["user"], parts["labels"], parts["derived"]
    children: list[Any] = [note]
    if user:
        children.append(render.table(user, cols, id="compare-config"))
    elif not missing:
        children.append(render.empty("No key you set differs between the two configs.", None))
    if labels:
        children.append(render.table(labels, cols, id="compare-config-labels", class_name="data muted"))
    if derived:
        children.append(
            html.Details(
                [
                    html.Summary(f"{len(derived)} derived keys differ (resolved by the emulator from the keys above)"),
                    derived_text(derived, bn, cn),
                ],
                id="compare-config-derived-details",
            )
        )
    title = f"Your changes (config diff: {len(user)} keys you set differ"
    title += f", {len(derived)} derived)" if derived else ")"
    return render.section(title, *children)


def derived_text(rows: list[dict[str, Any]], bn: str, cn: str) -> html.Pre:
    """The derived keys as text, one component, a line per key: `key  base → cand` (values as in
    render.table, cut at render.LONG_TEXT characters). A table of them was hundreds of Dash components, which
    the renderer re-checks on every update (docs/benchmarks.md, UI in the browser)."""

    def text(v: Any) -> str:
        t = MISSING if v is None else v if isinstance(v, str) else json.dumps(v, default=str)
        return t[: render.LONG_TEXT] + "…" if len(t) > render.LONG_TEXT else t

    width = max(len(str(r["key"])) for r in [{"key": "key"}, *rows])
    lines = [f"{'key':<{width}}  {bn} → {cn}"]
    lines += [f"{str(r['key']):<{width}}  {text(r['base'])} → {text(r['cand'])}" for r in rows]
    return html.Pre("\n".join(lines), id="compare-config-derived", className="config-derived")


def _findings(fd: dict[str, list[dict[str, Any]]], base: int, cand: int, bn: str, cn: str) -> Any:
    cols = []
    for title, key, tone in (("Resolved", "resolved", "good"), ("New", "new", "bad")):
        items = fd.get(key, [])
        run = base if key == "resolved" else cand
        cols.append(
            html.Div(
                [
                    html.H4(f"{title} ({len(items)})", className=tone),
                    *([_finding_from_dict(f, run) for f in items] or [html.P("none", className="muted")]),
                ],
                id=f"compare-findings-{key}",
            )
        )
    persisting = fd.get("persisting", [])
    cols.append(
        html.Div(
            [
                html.H4(f"Persisting ({len(persisting)})"),
                *([_persisting(p, cand, bn, cn) for p in persisting] or [html.P("none", className="muted")]),
            ],
            id="compare-findings-persisting",
        )
    )
    return render.section(
        "Findings",
        html.Div(cols, className="grid3"),
        help_text="Matched by rule and affected tables: resolved = only in the baseline, new = only in "
        f"the candidate, persisting = in both ({bn} → {cn} for each figure).",
    )


def _persisting(p: dict[str, Any], cand: int, bn: str, cn: str) -> Any:
    """A finding in both runs: the candidate's card with each figure's baseline → candidate value."""
    b, c = p.get("base") or {}, p.get("cand") or {}
    rows = []
    if b.get("metric") == c.get("metric"):
        rows.append((c.get("metric"), b.get("value"), c.get("value"), c.get("unit") or ""))
    be, ce = b.get("evidence") or {}, c.get("evidence") or {}
    for k in dict.fromkeys([*be, *ce]):
        vb, vc = be.get(k), ce.get(k)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (vb, vc))
        if numbers and vb != vc and unit_of(k) != "ts":  # a time in each run's own clock: not a change
            rows.append((k, vb, vc, unit_of(k)))
    table = html.Table(
        [html.Tr([html.Th("figure"), html.Th(bn), html.Th(cn)])]
        + [
            html.Tr(
                [
                    html.Td(k),
                    html.Td(format_value(vb, u), className="num"),
                    html.Td(format_value(vc, u), className="num"),
                ]
            )
            for k, vb, vc, u in rows
        ],
        className="kv persisting-values",
    )
    return _finding_from_dict(c, cand, extra=table)


def _op_deltas(ops: list[dict[str, Any]], store: Store, base: int, cand: int, bn: str, cn: str) -> Any:
    """Per-op time per counted step, summed over the cores of the op's kind (said in the header and
    per row), so an op's sum may exceed a step's time."""
    bc, cc = compare_data.op_cores(store, base), compare_data.op_cores(store, cand)
    for r in ops:
        k = r.get("track_kind")
        nb, nc = bc.get(k), cc.get(k)
        n = str(nb or nc) if nb == nc or not (nb and nc) else f"{nb} / {nc}"
        r["core"] = f"{k} (sum of {n} {compare_data.CORE_WORDS.get(k, 'cores')})"
        r["delta"] = format_delta(r.get("base_ps_per_step"), r.get("cand_ps_per_step"), "ps")
        r["ci"] = ci_text(r.get("ci_low"), r.get("ci_high"))
    return render.section(
        f"Per-op deltas (time per counted step, summed over all cores of the op's kind; {len(ops)} ops, "
        "largest changes first)",
        render.table(
            ops,
            [
                ("core", "cores (summed)", "text"),
                ("name", "op", "text"),
                ("base_events_per_step", f"ops/step {bn}", "count"),
                ("cand_events_per_step", f"ops/step {cn}", "count"),
                ("base_ps_per_step", f"time per step, summed over cores: {bn}", "ps"),
                ("cand_ps_per_step", f"time per step, summed over cores: {cn}", "ps"),
                ("delta", "change", "text"),
                ("ci", "95% interval", "text"),
                ("change", "", "text"),
            ],
            id="compare-ops",
            max_rows=25,
        ),
        help_text=f"An op's time on every core of its kind added up per counted step ({bn}: {compare_data.cores_text(bc)}; "
        f"{cn}: {compare_data.cores_text(cc)}), so it can exceed the step time; the breakdown above is per chip.",
    )


def _finding_from_dict(d: dict[str, Any], run: int, extra: Any = None) -> Any:
    try:
        return render.finding_card(Finding(**d), run, compact=True, extra=extra)
    except (TypeError, ValueError):
        return render.generic(d)


def _verdict_banner(c: dict[str, Any], base_name: str, cand_name: str) -> html.Div:
    stc = c.get("step_time") or {}
    verdict = str(stc.get("verdict") or c.get("verdict") or "unknown")
    tone = {"improved": "good", "regressed": "bad"}.get(verdict, "neutral")
    lines: list[Any] = []
    if "change" in stc:
        text = verdict_text(
            verdict,
            stc["change"],
            stc.get("ci_low"),
            stc.get("ci_high"),
            stc.get("base_steps"),
            stc.get("cand_steps"),
            bool(stc.get("paired")),
        )
        lines.append(
            html.Div(
                [
                    html.B(
                        f"mean step time {format_value(stc.get('base_mean_ps'), 'ps')} → {format_value(stc.get('cand_mean_ps'), 'ps')}"
                    ),
                    f"; {text.split(': ', 1)[1]}"
                    + (f"; {stc['method']}" if stc.get("method") and stc.get("ci_low") is not None else ""),
                ],
                id="compare-change",
            )
        )
    lines += [html.Div(n, className="muted") for n in c.get("notes") or []]
    return html.Div(
        [
            html.Div(f"candidate {cand_name} vs baseline {base_name} (scprof compare)", className="muted"),
            html.Div(verdict, className="verdict-word", id="compare-verdict-word"),
            *lines,
        ],
        className=f"verdict {tone}",
    )


def _breakdown_deltas(rows: list[dict[str, Any]], bname: str, cname: str) -> Any:
    if not rows:
        return render.note("No step-time breakdown for one of the runs.")
    order = {c: i for i, c in enumerate(CATEGORIES)}
    rows = sorted(rows, key=lambda r: order.get(r["category"], 99))
    unit, scale = time_unit(max(sum(r["base_ps"] or 0 for r in rows), sum(r["cand_ps"] or 0 for r in rows), 1))
    fig = render.figure(barmode="stack", yaxis_title=f"time per step ({unit})")
    for r in rows:
        k = r["category"]
        fig.add_trace(
            go.Bar(
                x=[render.plain(bname), render.plain(cname)],
                y=[(r["base_ps"] or 0) / scale, (r["cand_ps"] or 0) / scale],
                name=k,
                marker_color=render.CATEGORY_COLORS.get(k),
                hovertemplate=f"{k}<br>%{{x}}: %{{y:.4g}} {unit}<extra></extra>",
            )
        )
    for r in rows:
        r["change"] = format_delta(r["base_ps"], r["cand_ps"], "ps")
    return render.section(
        "Step-time breakdown (mean per counted step per chip)",
        html.Div(
            [
                render.graph(fig, id="compare-breakdown", height=320),
                render.table(
                    rows,
                    [
                        ("category", "category", "text"),
                        ("base_ps", bname, "ps"),
                        ("cand_ps", cname, "ps"),
                        ("change", "change (per step per chip)", "text"),
                    ],
                    id="compare-breakdown-table",
                ),
            ],
            className="grid2",
        ),
    )

"""Compare's side-by-side sections of what only some runs record: SparseCore time per table and partition,
and device memory (HBM at each run's peak by contributor, else the allocators' peaks), from SQL and the
analyzers' figures (ui/pages/compare.py lays them out)."""

from __future__ import annotations

from typing import Any

from dash import html

from analyzers.compare import memory_delta
from profiler.store import Store
from profiler.units import format_delta, format_value
from ui import data, render
from ui.pages.memory import runs_peak_figure


def side_by_side_sc(store: Store, base: int, cand: int, bi: dict, ci: dict) -> Any:
    cells = []
    for run, info in ((base, bi), (cand, ci)):
        bounds = data.clamp_steps(data.step_bounds(store, run), None)
        kp = {k.label: k for k in data.overview_kpis(store, run, bounds)}
        summary = data.sparsecore(store, run, bounds, [])
        rows = summary.get("tables", []) if not summary["empty"] else []
        cells.append(
            html.Div(
                [
                    html.H4(info["name"]),
                    render.kpis(
                        [
                            {"label": lbl, "value": format_value(kp[lbl].value, kp[lbl].unit), "detail": kp[lbl].detail}
                            for lbl in ("SC minibatches per step", "dropped IDs")
                            if lbl in kp
                        ]
                    ),
                    render.table(
                        rows,
                        [
                            ("table_name", "table", "text"),
                            ("max_ids", "max IDs", "count"),
                            ("max_ids_per_partition", "limit", "count"),
                            ("minibatches_per_step", "minibatches/step", "count"),
                            ("skew", "skew", "count"),
                        ],
                    )
                    if rows
                    else render.note("no partition statistics"),
                ]
            )
        )
    return render.section("SparseCore side by side", html.Div(cells, className="grid2"))


def side_by_side_memory(store: Store, base: int, cand: int, bi: dict, ci: dict) -> Any:
    """Each run's HBM at its peak by contributor (the Memory page's chart and colours), and the
    contributors' bytes side by side with the change."""
    bp, cp = data.hbm_peak(store, base), data.hbm_peak(store, cand)
    sides = [(f"{role}: {info['name']}", p) for role, info, p in (("baseline", bi, bp), ("candidate", ci, cp)) if p]
    words = {run: data.memory_word(store, run) for run in (base, cand)}  # HBM on a TPU, else device memory
    if not sides:
        word = words[base] if words[base] == words[cand] else "memory"
        return _allocator_peaks(store, base, cand, bi, ci, word) or render.section(
            "Memory side by side", render.note(f"Neither run records {word} counters or allocator events.")
        )
    caps = {info.get("hbm_bytes") for info, p in ((bi, bp), (ci, cp)) if p and info.get("hbm_bytes")}
    names = list(dict.fromkeys(c for _, p in sides for c, v in p["parts"].items() if v))

    def part(peak: dict[str, Any] | None, name: str) -> float | None:
        return peak["parts"].get(name, 0.0) if peak else None

    rows = [{"what": n.split(": ", 1)[-1], "base": part(bp, n), "cand": part(cp, n)} for n in names]
    rows.append({"what": "peak (the highest chip)", "base": bp and bp["peak"], "cand": cp and cp["peak"]})
    rows.append({"what": "capacity per chip", "base": bi.get("hbm_bytes"), "cand": ci.get("hbm_bytes")})
    for r in rows:
        r["change"] = format_delta(r["base"], r["cand"], "bytes")
    figure = runs_peak_figure(sides, caps.pop() if len(caps) == 1 else None)
    return render.section(
        "Memory side by side (HBM at each run's peak)",
        html.Div(
            [
                html.Div(
                    [render.graph(figure, id="compare-memory", height=230)]
                    + [
                        render.note(f"{i['name']} records no {words[run]} counters.")
                        for run, i, p in ((base, bi, bp), (cand, ci, cp))
                        if not p
                    ]
                ),
                render.table(
                    rows,
                    [
                        ("what", "HBM", "text"),
                        ("base", bi["name"], "bytes"),
                        ("cand", ci["name"], "bytes"),
                        ("change", "change", "text"),
                    ],
                    id="compare-memory-table",
                ),
            ],
            className="grid2",
        ),
        help_text="Per chip: each run at the moment of its highest total (the store's hbm_peaks), the same "
        "contributors and colours as the Memory page.",
    )


def _allocator_peaks(store: Store, base: int, cand: int, bi: dict, ci: dict, word: str) -> Any:
    """Without memory counters on either side, each run's allocators' device peak (`scprof compare`'s memory
    line: analyzers.compare.memory_delta), None when neither run has allocator events."""
    m = memory_delta(store, data.analysis(store, base), data.analysis(store, cand))
    if m["base"]["bytes"] is None and m["cand"]["bytes"] is None:
        return None
    row = {"what": f"{word} peak (allocators)", "base": m["base"]["bytes"], "cand": m["cand"]["bytes"]}
    row["change"] = format_delta(row["base"], row["cand"], "bytes")
    return render.section(
        f"Memory side by side ({word} allocators' peaks)",
        render.table(
            [row],
            [
                ("what", word, "text"),
                ("base", bi["name"], "bytes"),
                ("cand", ci["name"], "bytes"),
                ("change", "change", "text"),
            ],
            id="compare-memory-table",
        ),
        help_text="Neither run records memory counters: each run's highest device allocator's bytes allocated "
        "over the whole capture (the Memory page's device memory section; `scprof compare`'s memory line).",
    )

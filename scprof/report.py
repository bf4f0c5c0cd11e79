"""Text rendering of analyses and comparisons for the terminal (`scprof analyze`, `scprof compare`)."""

from __future__ import annotations

import shlex
from typing import Any

from analyzers.compare import Comparison
from analyzers.findings import Finding, fix_text, group_findings
from analyzers.registry import RunReport
from analyzers.rules.allocations import allocator_rows
from profiler.units import (
    ci_text,
    escape_control,
    evidence_items,
    format_bytes,
    format_delta,
    format_evidence,
    format_fine_share,
    format_ps,
    format_value,
    text_table,
)

SEVERITY_MARK = {"critical": "[CRITICAL]", "warning": "[WARNING]", "info": "[info]"}


EVIDENCE_SEP = " · "  # between a finding's evidence items on its `evidence` line


def evidence_line(evidence: dict[str, Any], start_ps: int | float = 0) -> str:
    """A finding's evidence on one line: "label: value" items as the UI's evidence table shows
    them (profiler/units.py's labels and formatting; timestamps from the run's start `start_ps`)."""
    return EVIDENCE_SEP.join(f"{label}: {text}" for _, label, text in evidence_items(evidence, start_ps))


def finding_lines(f: Finding, indent: str = "  ", start_ps: int | float = 0) -> list[str]:
    """A finding as terminal lines; names in it (tables, ops, runs) cannot break or style a line."""
    lines = [f"{SEVERITY_MARK[f.severity]} {f.title}"]
    lines.append(f"{indent}{f.metric}: {format_value(f.value, f.unit)}  (confidence: {f.confidence})")
    if f.entities:
        ents = "; ".join(
            f"{k}: {', '.join(map(str, v[:12]))}{' ...' if len(v) > 12 else ''}" for k, v in f.entities.items() if v
        )
        if ents:
            lines.append(f"{indent}affects  {ents}")
    if evidence := evidence_line(f.evidence or {}, start_ps):
        lines.append(f"{indent}evidence {evidence}")
    lines.append(f"{indent}fix      {f.recommendation}")
    if f.fix:
        lines.append(f"{indent}change   {fix_text(f.fix)}")
    if f.verified:
        v = f.verified
        lines.append(f"{indent}verified {'recommended' if v['recommended'] else 'not recommended'}: {v['reason']}")
    return [escape_control(line) for line in lines]


def step_lines(f: dict[str, Any]) -> list[str]:
    """The step time and the wall-time split of the counted steps (the breakdown's figures `f`),
    as `analyze` and `record` print them."""
    if not f or f.get("step_ps_mean") is None:
        return []
    out = [
        f"step time  mean {format_ps(f['step_ps_mean'])}  p50 {format_ps(f['step_ps_p50'])}  "
        f"p90 {format_ps(f['step_ps_p90'])}  {f['covers']}"
    ]
    if f.get("share"):
        shares = sorted(f["share"].items(), key=lambda kv: -kv[1])
        out.append("time split " + "  ".join(f"{k} {v:.1%}" for k, v in shares if v >= 0.001))
    return out


def render_recorded(name: str, doc: dict[str, Any]) -> str:
    """What `scprof record` prints of the run it stored (answers.recorded_doc): the stored
    analysis's figures, in the words `analyze` uses."""
    out = [escape_control(f"recorded {name!r}: {doc['events']:,} events stored")]
    out += step_lines(doc)
    if doc["minibatches_per_step_mean"] is not None:
        out.append(f"minibatches per step  mean {doc['minibatches_per_step_mean']:.2f} (every stack)")
    if doc["dropped_ids"] is not None:
        out.append(f"dropped IDs  {doc['dropped_ids']:,}")
    if doc["findings"]:
        n = doc["findings"]
        out.append(
            escape_control(f"{n} finding{'s' if n != 1 else ''}; see them with: scprof analyze {shlex.quote(name)}")
        )
    return "\n".join(out)


def render_report(report: RunReport) -> str:
    """`scprof analyze` output."""
    run = report.run
    out = [escape_control(f"run {run['name']!r} (run_id {run['run_id']}, {run['source']}, {run['status']})")]
    figs = report.analyses.get("breakdown")
    out += step_lines(figs.figures if figs else {})
    ops = report.analyses.get("ops")
    device_ops = [r for r in (ops.figures.get("top", []) if ops else []) if not r["host_work"]]
    if device_ops:  # each op's share of its kind's device self time
        top = device_ops[:5]
        kinds = {r["track_kind"] for r in top}
        out.append(
            "top ops    "
            + "  ".join(
                f"{escape_control(r['name'])} {r['share']:.1%}" + (f" of {r['track_kind']}" if len(kinds) > 1 else "")
                for r in top
            )
            + (f"  (share of {top[0]['track_kind']} self time)" if len(kinds) == 1 else "")
        )
    out += memory_lines(report)
    out.append("")
    if not report.findings:
        lacking = sum(1 for a in report.analyses.values() if a.notes)
        out.append(
            "No problems found: every analyzer ran and none flagged this run."
            if not lacking
            else f"No problems found by the analyzers that had their data; {lacking} of {len(report.analyses)} "
            "lacked some (listed below)."
        )
    else:
        groups = group_findings(report.findings)
        n = len(report.findings)
        out.append(
            f"{n} finding{'s' if n != 1 else ''}"
            + (f" of {len(groups)} kinds" if len(groups) < n else "")
            + ", most severe first"
            + (" (each kind's first shown; --json lists every one)" if len(groups) < n else "")
            + ":"
        )
        start_ps = run.get("first_ps") or 0
        for group in groups:
            out.append("")
            out += finding_lines(group[0], start_ps=start_ps)
            if len(group) > 1:
                out.append(escape_control(f"  {more_like_this(group)}"))
    notes = [escape_control(f"{name}: {n}") for name, a in report.analyses.items() for n in a.notes]
    if notes:
        out += ["", "Not analysed (data the run lacks):"] + [f"  - {n}" for n in notes]
    return "\n".join(out)


LIVE_SHOWN = 5  # largest allocations live at the peak listed (the analyzer keeps more: --json)


def memory_lines(report: RunReport) -> list[str]:
    """The memory profile from the allocators' events (the allocations analyzer's stored figures,
    as the Memory page's device memory section shows them): the device peak with its allocator and
    time, each allocator's peak, allocations and fragmentation at its peak, and the largest
    allocations live at the peak; [] for a run without allocator events."""
    rows = allocator_rows(report.analyses.get("allocations"))
    peak = report.analyses["allocations"].figures.get("device_peak_bytes") if rows else None
    if not rows:
        return []
    start_ps = report.run.get("first_ps") or 0
    hosts = len({a["host"] for a in rows})

    def label(a: dict[str, Any]) -> str:
        return a["allocator"] + (f" on {a['host']}" if hosts > 1 and a["host"] else "")

    out = ["", "device memory (allocators' events; the Memory page):"]
    top = rows[0] if peak is not None else None  # device allocators first, the highest peak first
    if top is not None:
        out.append(
            f"  peak  {format_bytes(peak)} ({peak:,} B) allocated by {label(top)}, "
            f"{format_evidence('peak_ts_ps', top['peak_ts_ps'], start_ps)}; "
            f"{top['live_at_peak']:,} allocations live then hold {format_bytes(top['live_at_peak_bytes'])}, "
            f"{format_bytes(top['unattributed_at_peak_bytes'])} was held since before the capture"
        )
    table = text_table(
        [
            "allocator",
            "kind",
            "peak allocated",
            "at (from the run's start)",
            "allocations",
            "frees",
            "fragmentation at peak",
        ],
        [
            [
                label(a),
                str(a["device_kind"]),
                format_value(a["peak_bytes"], "bytes"),
                format_ps(a["peak_ts_ps"] - start_ps) if a["peak_ts_ps"] is not None else format_ps(None),
                format_value(a["allocations"], "count"),
                format_value(a["deallocations"], "count"),
                format_fine_share(a["fragmentation_at_peak_ratio"]),
            ]
            for a in rows
        ],
    )
    out += ["  " + line for line in table.split("\n")]
    if top is not None and top.get("largest_live"):
        live = top["largest_live"][:LIVE_SHOWN]
        out.append("  largest allocations live at that peak:")
        out += [
            f"    {format_bytes(x['bytes']):>10}  {x.get('tf_op') or '-'}"
            + (f"  {x['shape']}" if x.get("shape") else "")
            for x in live
        ]
    return [escape_control(line) for line in out]


def more_like_this(group: list[Finding], shown: int = 12) -> str:
    """The line that stands for a group's findings after its first (group_findings), as the UI's
    group card: how many, what they affect that differs and the span of their headline figure."""
    lead, rest = group[0], group[1:]
    parts = []
    for key in dict.fromkeys(k for f in rest for k in f.entities or {}):
        lead_values = set(map(str, (lead.entities or {}).get(key) or []))
        values = [v for v in dict.fromkeys(str(v) for f in rest for v in (f.entities or {}).get(key) or [])]
        if values and set(values) != lead_values:
            parts.append(f"{key} {', '.join(values[:shown])}{', …' if len(values) > shown else ''}")
    values = [f.value for f in rest if isinstance(f.value, int | float) and f.value == f.value]
    if values:
        lo, hi = format_value(min(values), lead.unit), format_value(max(values), lead.unit)
        parts.append(f"{lead.metric} from {lo} to {hi}" if hi != lo else f"{lead.metric} {lo}")
    return f"{len(rest)} more like this: " + "; ".join(parts) if parts else f"{len(rest)} more like this"


def render_comparison(c: Comparison) -> str:
    """`scprof compare` output."""
    st = c.step_time
    out = [
        escape_control(
            f"{c.base['name']!r} (run_id {c.base['run_id']}) -> {c.cand['name']!r} (run_id {c.cand['run_id']})"
        ),
        f"verdict: {st.text()}",
        f"mean step time {format_ps(st.base_mean_ps)} -> {format_ps(st.cand_mean_ps)}"
        + (" (paired by step: same input data)" if st.paired else ""),
        "",
        "Step time by category (mean per counted step and chip):",
        text_table(
            ["category", "base", "cand", "delta"],
            [
                [r["category"], format_ps(r["base_ps"]), format_ps(r["cand_ps"]), _signed_ps(r["delta_ps"])]
                for r in c.breakdown
            ],
        ),
        "",
    ]
    out += _memory_line(c.memory)
    for kind in ("resolved", "new", "persisting"):
        items = c.findings[kind]
        out.append(f"Findings {kind}: {len(items)}")
        for f in items:
            title = f["cand"]["title"] if kind == "persisting" else f["title"]
            out.append(escape_control(f"  - {title}"))
    out.append("")
    if c.ops:
        out.append("Largest per-op changes (time per step):")
        out.append(
            text_table(
                ["core", "op", "base", "cand", "delta", "95% interval", "change"],
                [
                    [
                        r["track_kind"],
                        r["name"],
                        format_ps(r["base_ps_per_step"]),
                        format_ps(r["cand_ps_per_step"]),
                        _signed_ps(r["delta_ps_per_step"]),
                        ci_text(r.get("ci_low"), r.get("ci_high")),
                        r["change"],
                    ]
                    for r in c.ops[:10]
                ],
            )
        )
        out.append("")
    if c.tables:
        out.append("SparseCore time per table (per step):")
        out.append(
            text_table(
                ["table", "ops base", "ops cand", "base", "cand", "delta"],
                [
                    [
                        str(r["table_name"]),
                        _num(r["base_ops_per_step"]),
                        _num(r["cand_ops_per_step"]),
                        format_ps(r["base_ps_per_step"]),
                        format_ps(r["cand_ps_per_step"]),
                        _signed_ps(r["delta_ps_per_step"]),
                    ]
                    for r in c.tables[:10]
                ],
            )
        )
        out.append("")
    if c.config_diff:
        # keys the user set first; values the producer derived from them (resolved.*) after
        ordered = sorted(c.config_diff, key=lambda d: d["key"].startswith("resolved."))
        out.append(f"Configuration differences ({len(c.config_diff)}):")
        for d in ordered[:12]:
            out.append(escape_control(f"  {d['key']}: {_short(d['base'])} -> {_short(d['cand'])}"))
        if len(ordered) > 12:
            out.append(f"  ... and {len(ordered) - 12} more (--json shows all)")
    out += [escape_control(f"note: {n}") for n in c.notes]
    return "\n".join(out)


MEMORY_SOURCE = {"memory.hbm_peak_bytes": "counters", "allocations.device_peak_bytes": "allocators"}


def _memory_line(m: dict[str, Any]) -> list[str]:
    """Both runs' device memory peaks (Comparison.memory), with the change where they are one quantity."""
    b, c = m.get("base") or {}, m.get("cand") or {}
    if b.get("bytes") is None and c.get("bytes") is None:
        return []
    word = b["word"] if b.get("word") == c.get("word") else "memory"
    if m.get("delta_bytes") is not None:
        return [
            f"{word} peak ({MEMORY_SOURCE[b['figure']]}): {format_bytes(b['bytes'])} -> {format_bytes(c['bytes'])},"
            f" {format_delta(b['bytes'], c['bytes'], 'bytes')}",
            "",
        ]
    side = [
        f"{format_bytes(x['bytes'])} ({MEMORY_SOURCE[x['figure']]})" if x.get("bytes") is not None else "not recorded"
        for x in (b, c)
    ]
    return [f"{word} peak: {side[0]} -> {side[1]} (not one quantity: no change given)", ""]


def _signed_ps(v: float | None) -> str:
    if v is None:
        return "-"
    return ("+" if v > 0 else "\u2212" if v < 0 else "") + format_ps(abs(v))  # a true minus, as signed_pct


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."

"""Async work as async: how much of each async op's window (a copy, a collective, from its start
to its done) the core's compute hides, and how much is exposed (the store's async_spans view).

A window is hidden when compute covers at least 90% of it, exposed at 10% or less, partial
between (XProf's analyze_async_overlap thresholds). Windows are spans of their own kind: not
op time, not device busy time (op_tracks in profiler/sql/stdlib/ops.sql leaves the `Async XLA Ops` line out).
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding

NAME = "async_overlap"
QUESTION = "Do async copies and collectives overlap compute, or does the device wait for them?"

HIDDEN, EXPOSED = 0.9, 0.1  # covered share at or above: hidden; at or below: exposed
EXPOSED_SHARE = 0.5  # exposed time above this share of the async windows' time is a finding
TOP = 20

SUMMARY_SQL = f"""
SELECT {{keys}} count(*) AS count, sum(dur_ps)::BIGINT AS span_ps, sum(exposed_ps)::BIGINT AS exposed_ps,
       count(*) FILTER (WHERE hidden_ps >= {HIDDEN} * dur_ps) AS hidden,
       count(*) FILTER (WHERE hidden_ps > {EXPOSED} * dur_ps AND hidden_ps < {HIDDEN} * dur_ps) AS partial,
       count(*) FILTER (WHERE hidden_ps <= {EXPOSED} * dur_ps) AS exposed
FROM async_spans WHERE run_id = ? {{group}}"""


def analyze(ctx: RunContext) -> Analysis:
    result = Analysis(NAME)
    total = {"count": 0}
    if _has_async_ops(ctx):  # else async_spans is empty: its compute islands are not worth building
        (total,) = ctx.store.rows(SUMMARY_SQL.format(keys="", group=""), [ctx.run_id])
    if not total["count"]:
        result.notes.append("no async ops (an `Async XLA Ops` line, or <op>-start / <op>-done pairs)")
        return result
    by_plane = ctx.store.query(
        SUMMARY_SQL.format(keys="plane, source,", group="GROUP BY ALL ORDER BY plane"), [ctx.run_id]
    )
    by_op = ctx.store.rows(SUMMARY_SQL.format(keys="op,", group="GROUP BY ALL ORDER BY exposed_ps DESC"), [ctx.run_id])
    result.tables = {
        "async_by_plane": by_plane,
        "top_exposed": ctx.store.query(
            f"SELECT plane, name, op, source, start_ps, dur_ps, exposed_ps FROM async_spans WHERE run_id = ? "
            f"ORDER BY exposed_ps DESC, start_ps LIMIT {TOP}",
            [ctx.run_id],
        ),
    }
    share = total["exposed_ps"] / total["span_ps"] if total["span_ps"] else 0.0
    result.figures = {**total, "exposed_share": share, "by_op": {r.pop("op"): r for r in by_op}}
    if share > EXPOSED_SHARE:
        result.findings.append(
            Finding(
                rule="exposed_async",
                severity="warning",
                title=f"Async ops are exposed: no compute overlaps {share:.0%} of their {total['count']} windows' time",
                metric="exposed_share",
                value=share,
                unit="share of the async windows' time",
                recommendation=(
                    "The core has nothing to compute while these copies or collectives run: start them earlier (XLA's "
                    "latency-hiding scheduler, more independent work between start and done), overlap them with the "
                    "next step's compute, or move less data (smaller copies, fewer host offloads)."
                ),
                evidence={k: total[k] for k in ("count", "span_ps", "exposed_ps", "hidden", "partial", "exposed")},
                evidence_sql=f"SELECT * FROM async_spans WHERE run_id = {ctx.run_id} ORDER BY exposed_ps DESC",
            )
        )
    return result


def _has_async_ops(ctx: RunContext) -> bool:
    """Whether the run has an `Async XLA Ops` line or an op named like an async start or done."""
    return bool(
        ctx.store.rows(
            """SELECT EXISTS (SELECT 1 FROM tracks WHERE run_id = $run AND line = 'Async XLA Ops')
                  OR EXISTS (SELECT 1 FROM strings WHERE run_id = $run
                             AND regexp_matches(value, '^.+-(start|done)(\\.[0-9]+)?$')) AS has""",
            {"run": ctx.run_id},
        )[0]["has"]
    )

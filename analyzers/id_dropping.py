"""ID dropping: with allow_id_dropping, IDs past the limits are silently discarded.

Dropped counts come from the partition statistics; the share is taken against
all IDs the table's SparseCore forward ops processed plus those dropped.
"""

from __future__ import annotations

from analyzers import minibatching
from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, sql_literal

NAME = "id_dropping"
QUESTION = "Are embedding IDs silently dropped because they exceed the compiled limits?"

CRITICAL_SHARE = 0.01  # more than 1% of IDs dropped


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.query("id_dropping")
    result = Analysis(NAME, tables={"dropped_by_step": table})
    if table.num_rows == 0:  # no dropped-ID counts at all: "0 dropped" would claim what was never measured
        result.notes.append("the run has no SparseCore partition statistics with dropped-ID counts "
                            "(sc_partition_stats.dropped_ids)")  # fmt: skip
        return result
    totals = ctx.store.rows(
        f"""WITH d AS (SELECT table_name, sum(dropped_ids)::BIGINT AS dropped, count(DISTINCT step) AS steps,
                              count(DISTINCT step) FILTER (WHERE dropped_ids > 0) AS steps_dropping,
                              max(max_ids_per_partition) AS max_ids_per_partition,
                              max(max_ids_kept) AS max_ids_kept
                       FROM t GROUP BY table_name),
                 k AS (SELECT table_name, sum(ids)::BIGINT AS kept FROM {ctx.temp("op_events")}
                       WHERE category = 'sc_forward' AND table_name IS NOT NULL GROUP BY table_name)
            SELECT d.*, k.kept FROM d LEFT JOIN k USING (table_name) ORDER BY dropped DESC""",
        t=table,
    )
    # the run's total: the store's step_minibatches view, as every other place reads it
    result.figures = {"dropped_ids": minibatching.step_totals(ctx)["dropped_ids"]}
    for r in totals:
        if not r["dropped"]:
            continue
        kept = r["kept"]
        share = r["dropped"] / (kept + r["dropped"]) if kept is not None else None
        result.findings.append(
            Finding(
                rule="id_dropping",
                severity="critical" if share is None or share > CRITICAL_SHARE else "warning",
                title=(
                    f"Table {r['table_name']}: {r['dropped']:,} IDs dropped in {r['steps_dropping']} of {r['steps']} steps"
                    + (f" ({share:.2%} of its IDs)" if share is not None else "")
                ),
                metric="dropped_share" if share is not None else "dropped_ids",
                value=share if share is not None else r["dropped"],
                unit="share of IDs" if share is not None else "IDs",
                recommendation=(
                    f"Dropped IDs train nothing. Raise max_ids_per_partition / max_unique_ids_per_partition for "
                    f"{r['table_name']} to the observed maximum (or let scprof derive a limits file with "
                    "--set flags.xla_sparse_core_estimate_max_ids=true), and keep allow_id_dropping=false "
                    "while tuning so overflows are errors, not silent losses."
                ),
                evidence={
                    "dropped_ids": r["dropped"],
                    "kept_ids": kept,
                    "max_ids_per_partition": r["max_ids_per_partition"],
                },
                entities={"tables": [r["table_name"]]},
                confidence="high" if share is not None else "medium",
                evidence_sql=(
                    "-- dropped IDs per step and partition\n"
                    f"SELECT step, chip, sc, ids, dropped_ids, max_ids_per_partition FROM sc_partition_stats "
                    f"WHERE run_id = {ctx.run_id} AND table_name = {sql_literal(r['table_name'])} AND dropped_ids > 0 "
                    "ORDER BY step, chip, sc"
                ),
            )  # fmt: skip
        )
    return result

"""SparseCore load skew: a few partitions receive far more IDs than the rest.

Mod sharding (`id % num_sparsecores`) spreads uniform IDs evenly, but hot IDs
land on the partitions their values map to. Per step and table: max/mean of the
partition loads and their coefficient of variation; the hot partitions, and how
persistently the same partition is the hottest across steps.
"""

from __future__ import annotations

from analyzers.context import RunContext
from analyzers.findings import Analysis, Finding, make_fix, sql_literal

NAME = "skew"
QUESTION = "Are some SparseCore partitions overloaded by hot IDs while others idle?"

MAX_OVER_MEAN = 1.5  # the hottest partition carries 1.5x the mean load or more


def analyze(ctx: RunContext) -> Analysis:
    loads = ctx.query("partition_load")
    result = Analysis(NAME, tables={"partition_load": loads})
    if loads.num_rows == 0:
        result.notes.append("the run has no SparseCore partition statistics (sc_partition_stats)")
        return result
    per_table = ctx.store.rows(
        """WITH s AS (SELECT step, table_name, max(ids) / nullif(avg(ids), 0) AS max_over_mean,
                             stddev_pop(ids) / nullif(avg(ids), 0) AS cv, arg_max(chip * 1000 + sc, ids) AS hot
                      FROM t GROUP BY step, table_name)
           SELECT table_name, avg(max_over_mean) AS max_over_mean, max(max_over_mean) AS worst_max_over_mean,
                  avg(cv) AS cv, mode(hot) AS hot, count(*) FILTER (WHERE hot = (SELECT mode(hot) FROM s s2
                      WHERE s2.table_name = s.table_name)) / count(*) AS persistence, count(*) AS steps
           FROM s GROUP BY table_name ORDER BY max_over_mean DESC""",
        t=loads,
    )
    result.figures = {
        "tables": {r["table_name"]: {"max_over_mean": r["max_over_mean"], "cv": r["cv"]} for r in per_table}
    }
    sc_config = ctx.config.get("sparsecore") or {}
    # the emulator's ID shuffle (sparsecore.shuffle_ids): each table's IDs shifted to other
    # partitions, so different tables' hot rows stop sharing a SparseCore; only where it is off
    fix = make_fix(set={"sparsecore.shuffle_ids": True}) if sc_config.get("shuffle_ids") is False else None
    for r in per_table:
        if r["max_over_mean"] is None or r["max_over_mean"] < MAX_OVER_MEAN:
            continue
        chip, sc = divmod(int(r["hot"]), 1000)
        result.findings.append(
            Finding(
                rule="sc_load_skew",
                severity="critical" if r["max_over_mean"] >= 2.5 else "warning",
                title=(
                    f"Table {r['table_name']}: the hottest SparseCore partition gets {r['max_over_mean']:.1f}x "
                    f"the mean load (chip {chip}, SparseCore {sc} hottest in {r['persistence']:.0%} of steps)"
                ),
                metric="max_over_mean_ids",
                value=r["max_over_mean"],
                unit="x mean partition load",
                recommendation=(
                    "Spread hot IDs: shuffle or rotate the ID space of the table (for stacked tables, shift each "
                    "table's IDs before stacking, step 8 of the limit procedure) so hot rows do not share a "
                    "SparseCore; then re-derive the limits, which the hottest partition currently sets for all."
                    + (" In the emulator: sparsecore.shuffle_ids=true." if fix else "")
                ),
                evidence={
                    "cv": r["cv"],
                    "worst_max_over_mean": r["worst_max_over_mean"],
                    "persistence": r["persistence"],
                    "steps": r["steps"],
                },
                entities={"tables": [r["table_name"]], "chips": [chip], "scs": [sc]},
                evidence_sql=(
                    "-- partition loads of the table per step\n"
                    f"SELECT step, chip, sc, ids, unique_ids FROM sc_partition_stats WHERE run_id = {ctx.run_id} "
                    f"AND table_name = {sql_literal(r['table_name'])} ORDER BY step, ids DESC"
                ),
                fix=fix,
            )  # fmt: skip
        )
    return result

"""Flows: which event's work feeds which, per step and chip, found from the data alone. The rule is
profiler/sql/ingest/flows.sql (flows; host_flows adds the host -> device flows), read by the UI's
trace viewer (ui/trace_details.py: flows_of_step). Their rows: dir (an index into FLOW_KINDS), step,
chip, src and dst (event ids).

FLOWS_SQL is the Perfetto export's copy of `flows` (exporters/perfetto/flows.py fills its
`{event_filter}` with the export's step range), until the export reads the tree's query; a test
(tests/profiler/test_flows_sql.py) keeps the two the same.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from profiler import sqltree

FLOW_KINDS = ("sc_fwd->tc_fwd", "tc_bwd->sc_bwd", "host->device")  # by dir

# Lines between whose events flows are drawn.
TC_OPS_LINE, SC_OPS_LINE = "XLA Ops", "Sparse Core Ops"

# The Perfetto export's copy of ingest.flows.flows (its filter a placeholder):
# flows, one per direction, step and chip, between the ops lines' events:
#   forward:  the last SparseCore op of step i on chip c that starts before the
#             first TensorCore op of step i on chip c  ->  that TensorCore op;
#   backward: the last TensorCore op of step i on chip c  ->  the first SparseCore
#             op of step i on chip c that starts at or after its end.
# Ties go to the lower event_id; a flow is kept only if its origin starts in an
# earlier nanosecond than its end (Perfetto draws arrows forward in time).
# (start_ps, event_id) orders are packed into one HUGEINT key (k_asc, k_desc: event_id descending):
# DuckDB's arg_min/arg_max compare those much faster than a struct; SparseCore ops are joined and
# aggregated once for both directions.
FLOWS_SQL = """
WITH ops AS NOT MATERIALIZED (  -- scanned twice rather than held in memory
  SELECT e.event_id, e.step, t.chip, t.kind = 'tensorcore' AS tc, e.start_ps, e.start_ps + e.dur_ps AS end_ps,
         (e.start_ps::HUGEINT << 64) + (e.event_id::HUGEINT + 9223372036854775808) AS k_asc,
         (e.start_ps::HUGEINT << 64) + (9223372036854775807 - e.event_id::HUGEINT) AS k_desc
  FROM events e JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
  WHERE e.run_id = $run AND {event_filter} AND e.step IS NOT NULL AND t.chip >= 0
    AND ((t.kind = 'tensorcore' AND t.line = $tc_line)
         OR (t.kind IN ('sparsecore', 'sc_tile') AND t.line = $sc_line))
),
tc AS (
  SELECT step, chip, arg_min(event_id, k_asc) AS first_id, min(start_ps) AS first_start,
         arg_max(event_id, k_desc) AS last_id, max(start_ps) AS last_start, arg_max(end_ps, k_desc) AS last_end
  FROM ops WHERE tc GROUP BY step, chip
),
sc AS (
  SELECT o.step, o.chip,
         arg_max(o.event_id, o.k_desc) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src,
         max(o.start_ps) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src_start,
         arg_min(o.event_id, o.k_asc) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst,
         min(o.start_ps) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst_start,
         any_value(t.first_id) AS fwd_dst, any_value(t.first_start) AS fwd_dst_start,
         any_value(t.last_id) AS bwd_src, any_value(t.last_start) AS bwd_src_start
  FROM ops o JOIN tc t ON o.step = t.step AND o.chip = t.chip
  WHERE NOT o.tc AND (o.start_ps < t.first_start OR o.start_ps >= t.last_end)
  GROUP BY o.step, o.chip
)
SELECT dir, step, chip, src, dst FROM (
  SELECT 0 AS dir, step, chip, fwd_src AS src, fwd_dst AS dst, fwd_src_start AS src_start, fwd_dst_start AS dst_start
  FROM sc WHERE fwd_src IS NOT NULL
  UNION ALL
  SELECT 1, step, chip, bwd_src, bwd_dst, bwd_src_start, bwd_dst_start FROM sc WHERE bwd_dst IS NOT NULL)
WHERE src_start // 1000 < dst_start // 1000
ORDER BY step, chip, dir
"""


def flows_of_step(con: Any, run_id: int, step: int) -> pa.Table:
    """Every flow of one step of a run (ingest.flows' flows, then host_flows): dir, step, chip, src, dst."""
    params = {"run": run_id, "all_steps": False, "step_lo": step, "step_hi": step + 1, "sc_line": SC_OPS_LINE}
    parts = [
        sqltree.query(con, "ingest.flows.flows", tc_line=TC_OPS_LINE, **params),
        sqltree.query(con, "ingest.flows.host_flows", **params),
    ]
    return pa.concat_tables([p.cast(parts[0].schema) for p in parts])

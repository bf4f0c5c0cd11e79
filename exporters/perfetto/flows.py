"""Flows: arrows from each step's SparseCore forward to the TensorCore forward, and from the TensorCore
backward to the SparseCore backward, per chip, found from the data alone (FLOWS_SQL).

They show which SparseCore work feeds which TensorCore work; the C encoder puts their ids on the
events at either end.
"""

from __future__ import annotations

import numpy as np

from exporters.perfetto.context import ExportContext

# Lines between whose events flows are drawn.
TC_OPS_LINE, SC_OPS_LINE = "XLA Ops", "Sparse Core Ops"

# Flows, one per direction, step and chip, between the ops lines' events:
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
SELECT src, dst FROM (
  SELECT 0 AS dir, step, chip, fwd_src AS src, fwd_dst AS dst, fwd_src_start AS src_start, fwd_dst_start AS dst_start
  FROM sc WHERE fwd_src IS NOT NULL
  UNION ALL
  SELECT 1, step, chip, bwd_src, bwd_dst, bwd_src_start, bwd_dst_start FROM sc WHERE bwd_dst IS NOT NULL)
WHERE src_start // 1000 < dst_start // 1000
ORDER BY step, chip, dir
"""


class Flows:
    """The run's flows as the C encoder looks them up: (event id, flow id) pairs sorted by event id for
    origins and for ends, and a bitmap over the event ids that have one (from `lo`)."""

    def __init__(self, ex: ExportContext):
        t = ex.q(ex.sql(FLOWS_SQL), {"tc_line": TC_OPS_LINE, "sc_line": SC_OPS_LINE})
        src = t.column("src").to_numpy().astype(np.int64)
        dst = t.column("dst").to_numpy().astype(np.int64)
        fid = np.arange(1, len(src) + 1, dtype=np.uint64)
        # one outgoing and one terminating flow per event at most (keep the first)
        _, keep_s = np.unique(src, return_index=True)
        _, keep_d = np.unique(dst, return_index=True)
        keep = np.intersect1d(keep_s, keep_d)
        src, dst, fid = src[keep], dst[keep], fid[keep]
        o = np.argsort(src)
        self.src, self.src_id = src[o], fid[o]
        o = np.argsort(dst)
        self.dst, self.dst_id = dst[o], fid[o]
        ex.stats.flows = len(src)
        # events with a flow, as a bitmap over their ids (1 bit per id in the flows' range): the C
        # encoder looks a row's flows up only where its bit is set
        ends = np.concatenate([src, dst])
        self.lo = int(ends.min()) if len(ends) else 0
        mask = np.zeros(int(ends.max()) - self.lo + 1 if len(ends) else 0, bool)
        mask[ends - self.lo] = True
        self.bits = np.packbits(mask, bitorder="little")

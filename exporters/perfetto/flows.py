"""Flows: arrows from each step's SparseCore forward to the TensorCore forward, and from the TensorCore
backward to the SparseCore backward, per chip, found from the data alone (the one rule, ingest.flows.flows in
profiler/sql/ingest/flows.sql, shared with the UI's trace viewer: profiler/flows.py).

They show which SparseCore work feeds which TensorCore work; the C encoder puts their ids on the
events at either end.
"""

from __future__ import annotations

import numpy as np

from exporters.perfetto.context import ExportContext
from profiler import sqltree
from profiler.flows import SC_OPS_LINE, TC_OPS_LINE

__all__ = ["SC_OPS_LINE", "TC_OPS_LINE", "Flows"]


class Flows:
    """The run's flows as the C encoder looks them up: (event id, flow id) pairs sorted by event id for
    origins and for ends, and a bitmap over the event ids that have one (from `lo`)."""

    def __init__(self, ex: ExportContext):
        # flows join the ops of one step: the export's events without a step (kept by --steps' span) have none
        f = ex.filter
        t = sqltree.query(
            ex.con,
            "ingest.flows.flows",
            run=f["run"],
            all_steps=f["all_steps"],
            step_lo=f["step_a"],
            step_hi=f["step_b"],
            tc_line=TC_OPS_LINE,
            sc_line=SC_OPS_LINE,
        )
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

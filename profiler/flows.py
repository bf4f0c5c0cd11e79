"""Flows: which event's work feeds which, per step and chip, found from the data alone. The rule is
profiler/sql/ingest/flows.sql (flows; host_flows adds the host -> device flows), read by the UI's
trace viewer (ui/trace_details.py: flows_of_step). Their rows: dir (an index into FLOW_KINDS), step,
chip, src and dst (event ids).
The Perfetto export (exporters/perfetto/flows.py) runs the same `flows` query.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from profiler import sqltree

FLOW_KINDS = ("sc_fwd->tc_fwd", "tc_bwd->sc_bwd", "host->device")  # by dir

# Lines between whose events flows are drawn.
TC_OPS_LINE, SC_OPS_LINE = "XLA Ops", "Sparse Core Ops"


def flows_of_step(con: Any, run_id: int, step: int) -> pa.Table:
    """Every flow of one step of a run (ingest.flows' flows, then host_flows): dir, step, chip, src, dst."""
    params = {"run": run_id, "all_steps": False, "step_lo": step, "step_hi": step + 1, "sc_line": SC_OPS_LINE}
    parts = [
        sqltree.query(con, "ingest.flows.flows", tc_line=TC_OPS_LINE, **params),
        sqltree.query(con, "ingest.flows.host_flows", **params),
    ]
    return pa.concat_tables([p.cast(parts[0].schema) for p in parts])

"""The timeline's hover names every typed field of an event (the list of profiler/trace_fields.py)."""

from __future__ import annotations

import numpy as np

from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_fields import TYPED_FIELDS
from profiler.trace_to_store import ingest_trace
from ui.pages.timeline_page import _event_hover
from ui.timeline import _exact_events, run_tracks

# An event with these typed fields set, and what their hover lines read (by hand); any other
# typed field gets a value too and must have its line.
VALUES = {"step": 3, "table": "tbl_a", "sc": 2, "minibatch": 1, "ids": 12_345, "unique_ids": 6_789,
          "dropped_ids": 7, "bytes": 3 << 20, "flops": 1_000_000, "category": "sc_forward"}  # fmt: skip
SHOWN = {"step": "3", "table": "tbl_a", "sc": "2", "minibatch": "1", "ids": "12,345", "unique_ids": "6,789",
         "dropped_ids": "7", "bytes": "3 MiB", "flops": "1 MFLOP", "category": "sc_forward"}  # fmt: skip


def test_hover_shows_every_typed_field(tmp_path):
    values = {f.name: VALUES.get(f.name, "s" if f.is_string else 5) for f in TYPED_FIELDS}
    path = tmp_path / "t.sctrace"
    with Recorder(str(path), run_name="hover") as rec:
        tr = rec.track("/device:TPU:0", "XLA Ops", kind="tensorcore", chip=0, core=0)
        cols = {k: [v] if isinstance(v, str) else np.array([v], np.int64) for k, v in values.items()}
        cols["step"] = cols["step"].astype(np.int32)
        rec.emit(track=[tr], name=["fusion.1"], start_ps=[1_000], dur_ps=[5_000], **cols)
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        run = ingest_trace(store, str(path)).run_id
        (event,) = _exact_events(store, run, run_tracks(store, run), 0, 10_000, 10, 5_000)
    lines = _event_hover(event).split("<br>")
    assert [line.split(": ")[0] for line in lines[2:]] == [f.name for f in TYPED_FIELDS]
    assert {k: v for k, v in (line.split(": ") for line in lines[2:]) if k in SHOWN} == SHOWN

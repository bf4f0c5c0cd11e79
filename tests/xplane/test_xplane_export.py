"""Export -> import round trip: a run comes back with its events, arguments, steps and counters."""

from __future__ import annotations

import numpy as np
import pytest

from exporters.xspace import export_run
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_traces
from profiler.xspace import xplane_pb2 as xp
from scprof.cli import main

COMPARE = [
    "SELECT events, steps, first_ps, last_ps, generation, num_chips, sparsecores_per_chip, tiles_per_sparsecore, "
    "hbm_bytes, tc_peak_flops, name, uuid, config, tags FROM runs",
    "SELECT plane, line, name, start_ps, dur_ps, step, table_name, sc, minibatch, ids, unique_ids, dropped_ids, "
    "bytes, flops, category FROM slices ORDER BY ALL",
    "SELECT s.plane, s.name, s.start_ps, a.key, a.int_value, a.double_value, a.string_value "
    "FROM event_args a JOIN slices s USING (run_id, event_id) ORDER BY ALL",
    "SELECT plane, counter, unit, ts_ps, value FROM counter_samples ORDER BY ALL",
    "SELECT plane, step, start_ps, dur_ps FROM step_markers ORDER BY ALL",
    "SELECT plane, line, kind, chip, core, tile, unit FROM tracks ORDER BY ALL",
]


def _snapshot(db: str) -> list:
    with Store.open(db, read_only=True) as st:
        return [st.rows(q) for q in COMPARE]


def _with_args(path: str) -> None:
    """A small trace exercising generic int/double/string arguments next to the synthetic shape."""
    with Recorder(
        path,
        run_name="args",
        hardware={"generation": "v6e", "num_chips": 1},
        start_time_unix_ns=1_700_000_000_000_000_000,
    ) as rec:
        tc = rec.track("/device:TPU:0", "XLA Ops", kind="tensorcore", chip=0, core=0)
        st = rec.track("/device:TPU:0", "Steps", kind="tensorcore", chip=0, core=0)
        sc = rec.track("/device:TPU:0 SparseCore 1", "Sparse Core Ops", kind="sparsecore", chip=0, core=1)
        hbm = rec.track("/device:TPU:0", "HBM heap", kind="counter", chip=0, unit="bytes")
        rec.emit(
            track=[tc, tc, sc],
            name=["fusion", "fusion", "gather"],
            start_ps=[10, 500, 20],
            dur_ps=[100, 0, 30],
            step=[0, 1, 1],
            flops=[5, 6, 0],
            bytes=[7, 7, 9],
            table=["", "", "t0"],
            category=["tc_forward", "tc_forward", "sc_forward"],
            args={"note": ["a", "b", "c"], "ratio": [0.5, 1.5, 2.5], "count": [1, 2, 3]},
        )
        rec.steps(track=[st, st], step=[0, 1], start_ps=[0, 400], dur_ps=[400, 400])
        rec.counters(track=[hbm, hbm], ts_ps=[0, 450], value=[1e6, 2e6])


@pytest.mark.parametrize("make", ["synthetic", "args"])
def test_round_trip(tmp_path, make):
    trace = str(tmp_path / "run.sctrace")
    if make == "synthetic":
        write_synthetic_trace(trace, 5000)
    else:
        _with_args(trace)
    a, b, out = str(tmp_path / "a.duckdb"), str(tmp_path / "b.duckdb"), str(tmp_path / "run.xplane.pb")
    with Store.open(a) as st:
        (r,) = ingest_traces(st, [trace])
    assert main(["export", "xspace", str(r.run_id), "-o", out, "--db", a, "--check"]) == 0
    with Store.open(b) as st:
        ingest_traces(st, [out])
    with Store.open(b, read_only=True) as st:
        assert st.rows("SELECT source FROM runs")[0]["source"] == "xplane"
    before, after = _snapshot(a), _snapshot(b)
    for q, x, y in zip(COMPARE, before, after, strict=True):
        assert x == y, q


def test_export_follows_xprof_conventions(tmp_path):
    trace, db, out = str(tmp_path / "run.sctrace"), str(tmp_path / "a.duckdb"), str(tmp_path / "x.xplane.pb")
    write_synthetic_trace(trace, 3000, chips=2, scs=2)
    with Store.open(db) as st:
        (r,) = ingest_traces(st, [trace])
        steps = st.rows("SELECT count(DISTINCT step) n FROM steps")[0]["n"]
        export_run(st, r.run_id, out, None, False)
    with open(out, "rb") as f:
        space = xp.XSpace.FromString(f.read())
    assert list(space.hostnames) == ["scprof"]
    planes = {p.name: p for p in space.planes}
    assert {"/device:TPU:0", "/device:TPU:1", "/device:TPU:0 SparseCore 1"} <= set(planes)
    tc = planes["/device:TPU:0"]
    names = {k: v.name for k, v in tc.stat_metadata.items()}
    pstats = {names[s.metadata_id]: s for s in tc.stats}
    assert pstats["device_type_string"].str_value == "TPU v5p"
    assert {ln.name for ln in tc.lines} >= {"Steps", "XLA Ops"}
    steps_line = next(ln for ln in tc.lines if ln.name == "Steps")
    assert len(steps_line.events) == steps
    for line in tc.lines:
        if line.name == "_counters_":
            continue
        offsets = [e.offset_ps for e in line.events]
        assert offsets == sorted(offsets)
        for e in line.events:  # group_id on every event of a step
            assert "group_id" in {names[s.metadata_id] for s in e.stats}
    ops = next(ln for ln in tc.lines if ln.name == "XLA Ops")
    md = tc.event_metadata[ops.events[0].metadata_id]
    assert {"flops"} <= {names[s.metadata_id] for s in md.stats}
    sc = planes["/device:TPU:0 SparseCore 1"]
    assert [ln.name for ln in sc.lines] == ["Sparse Core Ops", "Sparse Core Steps"] or {ln.name for ln in sc.lines} >= {
        "Sparse Core Ops"
    }
    assert np.all([ln.timestamp_ns == 0 for p in space.planes for ln in p.lines])

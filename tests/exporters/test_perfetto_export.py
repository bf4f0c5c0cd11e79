"""Round trips: a run exported to Perfetto and re-read with the official classes gives back the run."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from perfetto_helpers import assert_round_trip, ingest_file, make_store

from exporters.perfetto import write_trace
from exporters.perfetto.validate import read_trace, validate_file
from profiler import sqltree
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("synthetic")
    trace = os.path.join(tmp, "s.sctrace")
    write_synthetic_trace(trace, 6000, chips=2, scs=2)
    return ingest_file(tmp, trace)


def export(db: str, out: str, steps=None, **kw):
    with Store.open(db, read_only=True) as store:
        return write_trace(store, 1, out, steps, **kw)


def test_synthetic_round_trip(synthetic_db, tmp_path):
    out = str(tmp_path / "s.pftrace")
    stats = export(synthetic_db, out)
    assert stats.events == 5940 and stats.flows > 0
    rb = assert_round_trip(synthetic_db, out)
    # layout: chips as processes, XProf planes below, lines below those
    paths = {tuple(rb.path(u)) for u in rb.tracks}
    assert ("Chip 0", "/device:TPU:0 SparseCore 1", "Sparse Core Ops") in paths
    assert ("Chip 1", "/device:TPU:1", "XLA Ops") in paths
    assert ("Chip 0", "/device:TPU:0", "HBM heap") in paths
    heap = next(d for d in rb.tracks.values() if d.name == "HBM heap")
    assert heap.counter.unit == heap.counter.UNIT_SIZE_BYTES


def test_small_windows_and_chunks_give_the_same_trace(synthetic_db, tmp_path):
    out = str(tmp_path / "small.pftrace")
    export(synthetic_db, out, window_rows=700, chunk_rows=97)
    assert_round_trip(synthetic_db, out)
    big = str(tmp_path / "big.pftrace")
    export(synthetic_db, big)
    with open(out, "rb") as a, open(big, "rb") as b:
        assert a.read() == b.read()


def test_steps_filter(synthetic_db, tmp_path):
    out = str(tmp_path / "steps.pftrace")
    stats = export(synthetic_db, out, steps=(2, 4))
    rb = assert_round_trip(synthetic_db, out, steps=(2, 4))
    assert {s.args["step"] for s in rb.slices} == {2, 3}
    assert stats.markers == 2 * 2


def test_interning_and_sequence(synthetic_db, tmp_path):
    """One trusted sequence; the first packet clears state and interns names, categories, annotation names."""
    from exporters.perfetto.validate import iter_packets

    out = str(tmp_path / "s.pftrace")
    export(synthetic_db, out)
    packets = iter(iter_packets(out))
    first = next(packets)
    assert first.sequence_flags == 3 and first.first_packet_on_sequence
    names = {e.name for e in first.interned_data.event_names}
    assert {"SparseDenseMatmulOp", "fusion.1"} <= names
    assert {"sparsecore", "tensorcore", "step"} <= {c.name for c in first.interned_data.event_categories}
    assert "unique_ids" in {a.name for a in first.interned_data.debug_annotation_names}
    assert first.trace_packet_defaults.track_event_defaults.track_uuid > 0
    seqs = {p.trusted_packet_sequence_id for p in packets}
    assert seqs == {1}
    for p in iter_packets(out):
        te = p.track_event
        if p.HasField("track_event") and te.type == te.TYPE_SLICE_BEGIN and 7 not in te.category_iids:
            assert not te.HasField("name") and te.name_iid > 0  # event names by iid (step markers inline)


def test_flows_follow_the_documented_rule(synthetic_db, tmp_path):
    out = str(tmp_path / "s.pftrace")
    export(synthetic_db, out)
    rb = read_trace(out)
    by_flow: dict[int, list] = {}
    for s in rb.slices:
        for f in s.flow_out:
            by_flow.setdefault(f, [None, None])[0] = s
        for f in s.flow_in:
            by_flow.setdefault(f, [None, None])[1] = s
    got = {
        (src.args["step"], rb.path(src.track_uuid)[0], src.ts, src.name, dst.ts, dst.name)
        for src, dst in by_flow.values()
    }
    # the rule computed independently, in Python over the store's rows
    with Store.open(synthetic_db, read_only=True) as store:
        rows = store.rows("SELECT * FROM slices WHERE run_id = 1 AND line IN ('XLA Ops', 'Sparse Core Ops')")
    want = set()
    for step in {r["step"] for r in rows}:
        for chip in {r["chip"] for r in rows}:
            mine = [r for r in rows if r["step"] == step and r["chip"] == chip]
            tc = sorted(
                (r for r in mine if r["track_kind"] == "tensorcore"), key=lambda r: (r["start_ps"], r["event_id"])
            )
            sc = [r for r in mine if r["track_kind"] == "sparsecore"]
            before = [r for r in sc if r["start_ps"] < tc[0]["start_ps"]]
            src = max(before, key=lambda r: (r["start_ps"], -r["event_id"]))
            want.add(
                (step, f"Chip {chip}", src["start_ps"] // 1000, src["name"], tc[0]["start_ps"] // 1000, tc[0]["name"])
            )
            # the synthetic run has no SparseCore op after its TensorCore ops: no backward flow
            assert not [r for r in sc if r["start_ps"] >= tc[-1]["start_ps"] + tc[-1]["dur_ps"]]
    assert got == want
    assert "arg_max" in sqltree.get("ingest.flows.flows").sql  # the rule lives in one documented query


def test_overlapping_events_go_to_sibling_lanes(tmp_path):
    def record(rec):
        t = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", 0, 0)
        # A [0,10) ns; B [5,15) overlaps A; C [6,8) nests in A; D [10,12) follows A; E [7,17) overlaps
        # both A and B; F = B again nests in B
        rec.emit(
            track=[t] * 6,
            name=["A", "B", "C", "D", "E", "F"],
            start_ps=[0, 5000, 6000, 10000, 7000, 5000],
            dur_ps=[10000, 10000, 2000, 2000, 10000, 10000],
            step=[0] * 6,
        )

    db = make_store(str(tmp_path), record)
    out = str(tmp_path / "o.pftrace")
    stats = export(db, out)
    rb = assert_round_trip(db, out)
    assert stats.lanes == 2  # B and E each need a lane of their own
    lanes = [d for d in rb.tracks.values() if d.name == "XLA Ops"]
    assert len(lanes) == 3 and len({d.parent_uuid for d in lanes}) == 1
    by_name = {s.name: s.track_uuid for s in rb.slices}
    assert by_name["A"] == by_name["C"] == by_name["D"]
    assert len({by_name["A"], by_name["B"], by_name["E"]}) == 3 and by_name["F"] == by_name["B"]


def test_sub_nanosecond_times_zero_durations_and_event_args(tmp_path):
    def record(rec):
        t = rec.track("/host:CPU", "Input Pipeline Thread 0", "host", core=0)
        c = rec.track("/host:CPU", "Dropped IDs", "counter", unit="count")
        rec.emit(
            track=[t] * 4,
            name=["a", "b", "c", "d"],
            start_ps=[1500, 1500, 1999, 7000],
            dur_ps=[0, 400, 1, 0],
            step=[1, None, 1, 2],
            args={"label": ["x", None, "z", "w"], "ratio": [0.5, 1.25, None, 2.0], "bytes": [1, 2, 3, None]},
        )
        rec.counters(track=[c, c, c], ts_ps=[0, 1500, 1500], value=[1.0, 2.5, 3.0])

    db = make_store(str(tmp_path), record)
    out = str(tmp_path / "o.pftrace")
    export(db, out)
    rb = assert_round_trip(db, out)
    kinds = {s.name: s.end_ts for s in rb.slices}
    assert kinds["a"] is None and kinds["b"] is None  # both end in their start nanosecond: instants


def test_export_is_valid_per_validator(synthetic_db, tmp_path):
    out = str(tmp_path / "s.pftrace")
    export(synthetic_db, out)
    assert validate_file(out) == []


@pytest.mark.parametrize("config", ["baseline.toml", "tuned.toml"])
def test_bundled_runs_round_trip(tmp_path, config):
    from sim_backend.recording.record import record_run

    r = record_run(os.path.join(REPO, "configs", config), [], None, 3, str(tmp_path / "run"))
    db = ingest_file(str(tmp_path), r.trace_path)
    out = str(tmp_path / "run.pftrace")
    stats = export(db, out)
    rb = assert_round_trip(db, out)
    assert stats.flows > 0
    with Store.open(db, read_only=True) as store:
        chips = store.rows("SELECT num_chips FROM runs")[0]["num_chips"]
    assert {rb.path(u)[0] for u in rb.tracks} >= {f"Chip {c}" for c in range(chips)}


# -- property-based: random runs, overlapping events included ----------------------------------

LINES = [
    ("/device:TPU:0", "XLA Ops", "tensorcore", 0, 0),
    ("/device:TPU:0 SparseCore 0", "Sparse Core Ops", "sparsecore", 0, 0),
    ("/device:TPU:1 SparseCore 1", "Sparse Core Ops", "sparsecore", 1, 1),
    ("/host:CPU", "Input Pipeline Thread 0", "host", -1, 0),
    ("/device:TPU:0 SparseCore 0", "Tile 3", "sc_tile", 0, 0),
]

event = st.tuples(
    st.integers(0, len(LINES) - 1),  # track
    st.sampled_from(["op.a", "op.b", "SparseDenseMatmulOp", "dense_forward"]),
    st.one_of(st.integers(0, 40).map(lambda x: x * 1000), st.integers(0, 40_000)),  # start, often on ns
    st.one_of(st.just(0), st.integers(0, 20).map(lambda x: x * 1000), st.integers(0, 20_000)),  # duration
    st.one_of(st.none(), st.integers(0, 3)),  # step
    st.one_of(st.none(), st.integers(-5, 1 << 40)),  # ids
    st.one_of(st.none(), st.sampled_from(["t1", "t2"])),  # table
    st.one_of(st.none(), st.integers(-3, 3), st.floats(-1e9, 1e9, allow_nan=False), st.text(max_size=5)),  # arg
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(event, min_size=1, max_size=40),
    counters=st.lists(st.tuples(st.integers(0, 50_000), st.floats(0, 1e12, allow_nan=False)), max_size=8),
    markers=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30_000), st.integers(0, 9_000)), max_size=4),
    small=st.booleans(),
)
def test_random_runs_round_trip(events, counters, markers, small):
    with tempfile.TemporaryDirectory() as tmp:

        def record(rec):
            tracks = [
                rec.track(p, ln, k, chip, core, tile=3 if k == "sc_tile" else -1) for p, ln, k, chip, core in LINES
            ]
            tr, nm, s, d, stp, ids, tbl, arg = zip(*events, strict=True)
            # one argument column of one type per run (the recorder types columns), else none
            kinds = {type(a) for a in arg if a is not None}
            extra = {"extra": list(arg)} if len(kinds) == 1 else None
            rec.emit(
                track=[tracks[i] for i in tr],
                name=list(nm),
                start_ps=list(s),
                dur_ps=list(d),
                step=list(stp),
                ids=list(ids),
                table=[t or "" for t in tbl],
                args=extra,
            )
            if counters:
                heap = rec.track("/device:TPU:0", "HBM heap", "counter", 0, unit="bytes")
                rec.counters(
                    track=[heap] * len(counters), ts_ps=[c[0] for c in counters], value=[c[1] for c in counters]
                )
            if markers:
                steps_t = rec.track("/device:TPU:0", "Steps", "tensorcore", 0, 0)
                rec.steps(
                    track=[steps_t] * len(markers),
                    step=[m[0] for m in markers],
                    start_ps=[m[1] for m in markers],
                    dur_ps=[m[2] for m in markers],
                )

        db = make_store(tmp, record)
        out = os.path.join(tmp, "o.pftrace")
        kw = {"window_rows": 5, "chunk_rows": 3} if small else {}
        export(db, out, **kw)
        assert_round_trip(db, out)


def test_lanes_match_a_brute_force_check():
    """Random intervals: every lane nests strictly, and fast and slow paths agree across chunks."""
    from exporters.perfetto.lanes import _Lanes

    rng = np.random.default_rng(1)
    for trial in range(30):
        n = 300
        key = rng.integers(0, 3, n)
        s = np.sort(rng.integers(0, 200, n)) if trial % 2 else np.sort(rng.integers(0, 2000, n))
        e = s + rng.integers(0, 30, n)
        order = np.lexsort((-e, s))
        key, s, e = key[order], s[order], e[order]
        lanes = _Lanes(3)
        cut = rng.integers(1, n)
        lane = np.concatenate([lanes.assign(key[:cut], s[:cut], e[:cut]), lanes.assign(key[cut:], s[cut:], e[cut:])])
        for k in range(3):
            for ln in set(lane[key == k].tolist()):
                m = (key == k) & (lane == ln)
                open_ends: list[int] = []
                for a, b in zip(s[m].tolist(), e[m].tolist(), strict=True):
                    while open_ends and open_ends[-1] <= a:
                        open_ends.pop()
                    assert not open_ends or open_ends[-1] >= b, "lane does not nest"
                    if b > a:
                        open_ends.append(b)

"""The idle-gap searches (analyzers/gap_search.py) against plain-Python references on small random runs."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from analyzers import gap_search
from analyzers.context import RunContext
from analyzers.op_arrays import NO_STEP, op_arrays
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, store_with
from tests.tracekit import PROPERTY

event = st.builds(
    lambda where, chip, core, start, dur, step, cat: Ev(where, chip, core, "op", start, dur, step=step, category=cat),
    st.sampled_from([TC_OPS, SC_OPS, SC_OPS, HOST]),
    st.integers(0, 1),
    st.integers(0, 1),
    st.integers(0, 60),
    st.integers(0, 12),
    st.one_of(st.none(), st.integers(0, 3)),
    st.sampled_from([None, None, "sc_forward", "host_to_device", "sc_collective"]),
)


def track_of(e: Ev) -> tuple:
    """The track an event lands on: its plane and line with the chip and core filled in (a
    TensorCore's ops of both cores share the chip's one XLA Ops line)."""
    plane, line, _ = e.where
    return plane.format(chip=e.chip, core=e.core), line


def store_events(store) -> list[dict]:
    """Every op event of run 1 with its track's facts, read with SQL (independently of op_arrays)."""
    return store.rows(
        """SELECT e.event_id, e.track_id, t.chip, t.kind, t.line, e.step, e.start_ps AS s, e.start_ps + e.dur_ps AS e,
                  c.value AS category
           FROM events e JOIN tracks t USING (run_id, track_id)
           LEFT JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
           WHERE e.run_id = 1 AND t.kind <> 'counter' AND t.line NOT IN ('Steps')"""
    )


def reference(events: list[dict], min_gap: int) -> list[tuple]:
    """(track, gap start, gap end, step, next forward step, blocker event, unrelated end) per gap, by loops."""
    out = []
    for track in sorted({e["track_id"] for e in events}):
        ops = sorted((e for e in events if e["track_id"] == track), key=lambda e: (e["s"], e["e"]))
        if ops[0]["kind"] not in ("tensorcore", "sparsecore") or ops[0]["line"] not in ("XLA Ops", "Sparse Core Ops"):
            continue
        chip = ops[0]["chip"]
        for prev, cur in zip(ops, ops[1:], strict=False):
            gs, ge = prev["e"], cur["s"]
            if ge - gs < min_gap:
                continue
            step = cur["step"] if cur["step"] is not None else prev["step"]
            own = -1 if step is None else step
            ok_steps = {own, -1 if step is None else step - 1}
            fwd = [e for e in ops if e["category"] == "sc_forward" and e["s"] >= gs]
            nxt = min(fwd, key=lambda e: (e["s"], e["e"]))["step"] if fwd else None
            work = [e for e in events if e["e"] > e["s"] and (e["chip"] == chip or e["chip"] < 0) and gs < e["e"] <= ge]
            cands = [e for e in work if (-1 if e["step"] is None else e["step"]) in ok_steps]
            best = max(
                cands,
                key=lambda e: (e["e"], (-1 if e["step"] is None else e["step"]) == own, e["event_id"]),
                default=None,
            )
            unrelated = None
            if best is not None and ops[0]["kind"] == "tensorcore":
                b = -1 if best["step"] is None else best["step"]
                others = [e["e"] for e in work if e["kind"] != "host" and (-1 if e["step"] is None else e["step"]) != b]
                unrelated = max(others, default=None)
            out.append((track, gs, ge, step, nxt, best["event_id"] if best else None, unrelated))
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


@PROPERTY
# Ops tied on (start, end) on one track have no "consecutive" order: the gap step would be arbitrary.
@given(
    events=st.lists(event, min_size=2, max_size=30, unique_by=lambda e: (*track_of(e), e.start, e.dur)),
    min_gap=st.integers(1, 6),
)
@example(  # two ops of one track end together, both without a step: the higher event id is the blocker
    events=[
        Ev(TC_OPS, 0, 0, "op", 0, 0),
        Ev(TC_OPS, 1, 0, "op", 34, 11),
        Ev(SC_OPS, 1, 0, "op", 0, 0),
        Ev(SC_OPS, 1, 0, "op", 45, 0),
        Ev(TC_OPS, 1, 0, "op", 33, 12),
    ],
    min_gap=1,
)
def test_gaps_and_blockers_match_reference(tmp_path_factory, events, min_gap):
    with store_with(tmp_path_factory.mktemp("gaps"), RunSpec(events=events, hardware={"num_chips": 2})) as store:
        ctx = RunContext(store, 1)
        a = op_arrays(ctx)
        g = gap_search.find_gaps(a, min_gap, a.with_category(ctx, "sc_forward"))
        b = gap_search.find_blockers(a, gap_search.end_index(a), g)
        expected = reference(store_events(store), min_gap)

    def none(v: int) -> int | None:
        return None if v == NO_STEP else v

    got = sorted(
        (
            int(a.track_id[t]),
            int(s),
            int(e),
            none(int(st_)),
            none(int(n)),
            None if ev < 0 else int(ev),
            None if u < 0 else int(u),
        )
        for t, s, e, st_, n, ev, u in zip(
            g["track"],
            g["start"],
            g["end"],
            g["step"],
            g["next_fwd_step"],
            b["blocker_event"],
            b["unrelated_ps"],
            strict=True,
        )
    )
    assert got == expected


@PROPERTY
@given(tracks=st.lists(st.integers(0, 5), max_size=300), runs=st.booleans())
def test_grouping_keeps_scan_order_within_each_track(tracks, runs):
    # both ways op_arrays groups a scan: long runs of one track (copied as slices) and
    # interleaved tracks (a radix sort); either must equal a stable sort by track rank
    from analyzers.op_arrays import _group

    scan = np.repeat(np.asarray(tracks, np.int32), 70) if runs else np.asarray(tracks, np.int32)
    lut = np.asarray([3, 0, 5, 1, 4, 2], np.int32)  # track id -> rank
    values = np.arange(len(scan)) * 10
    expected = sorted(range(len(scan)), key=lambda i: lut[scan[i]])  # sorted() is stable
    g = _group(scan, lut)
    assert g.source.tolist() == expected
    assert g.take(values).tolist() == [values[i] for i in expected]
    assert (
        np.bincount(g.rank, g.length, len(lut)).astype(int).tolist()
        == np.bincount(lut[scan], minlength=len(lut)).tolist()
    )

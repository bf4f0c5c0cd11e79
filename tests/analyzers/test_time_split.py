"""The wall-time split against a unit-by-unit plain-Python reference."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers import _sweep
from analyzers.context import RunContext
from analyzers.rules.breakdown import step_breakdown
from analyzers.time_split import CATEGORIES, split_timeline
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, store_with
from tests.tracekit import PROPERTY

PLACES = {
    "tc_forward": TC_OPS,
    "tc_backward": TC_OPS,
    "tc_collective": TC_OPS,
    "sc_forward": SC_OPS,
    "sc_backward": SC_OPS,
    "sc_collective": SC_OPS,
    "host_to_device": HOST,
    "host_preprocess": HOST,
}


def reference_split(events: list[Ev], windows: list[tuple[int, int, int, int]]) -> dict[tuple, int]:
    """(chip, step, category) -> units, walking every unit of every window."""
    out: dict[tuple, int] = defaultdict(int)
    for chip, step, start, dur in windows:
        for t in range(start, start + dur):
            active = [
                CATEGORIES.index(e.category)
                for e in events
                if e.start <= t < e.start + e.dur and (e.where == HOST or e.chip == chip)
            ]
            out[chip, step, CATEGORIES[min(active)] if active else "idle"] += 1
    return dict(out)


event = st.builds(
    lambda cat, chip, core, start, dur: Ev(PLACES[cat], chip, core, cat, start, dur, category=cat),
    st.sampled_from(sorted(PLACES)),
    st.integers(0, 1),
    st.integers(0, 1),
    st.integers(0, 60),
    st.integers(1, 25),
)


@PROPERTY
@given(events=st.lists(event, min_size=1, max_size=25), cuts=st.lists(st.integers(1, 30), min_size=1, max_size=3))
def test_split_matches_unit_by_unit_reference(tmp_path_factory, events, cuts):
    tmp = tmp_path_factory.mktemp("split")
    windows, t = [], 5
    for step, length in enumerate(cuts):
        windows += [(chip, step, t, length) for chip in (0, 1)]
        t += length
    store = store_with(tmp, RunSpec(events=events, steps=windows, hardware={"num_chips": 2}))
    with store:
        split = step_breakdown(RunContext(store, 1)).to_pylist()
    got = {(r["chip"], r["step"], r["category"]): r["dur_ps"] for r in split}
    assert got == reference_split(events, windows)
    # categories of a step sum to the step exactly
    for chip, step, _, length in windows:
        assert sum(v for (c, s, _), v in got.items() if (c, s) == (chip, step)) == length


def test_overlapping_events_on_one_core_count_once(tmp_path):
    events = [
        Ev(TC_OPS, 0, 0, "a", 0, 10, category="tc_forward"),
        Ev(TC_OPS, 0, 0, "b", 5, 10, category="tc_forward"),
        Ev(SC_OPS, 0, 0, "c", 12, 6, category="sc_forward"),
    ]
    with store_with(tmp_path, RunSpec(events=events, steps=[(0, 0, 0, 20)])) as store:
        got = {r["category"]: r["dur_ps"] for r in step_breakdown(RunContext(store, 1)).to_pylist()}
    assert got == {"tc_forward": 15, "sc_forward": 3, "idle": 2}


def reference_owned(events, windows, n_cat: int, sets: bool) -> dict[tuple, int]:
    """(chip, step, label) -> units, walking every unit of every window; events: (chip, start, end, kind)."""
    out: dict[tuple, int] = defaultdict(int)
    for chip, step, start, end in windows:
        for t in range(start, end):
            active = {k for c, s, e, k in events if c == chip and k >= 0 and s <= t < e}
            label = sum(1 << k for k in active) if sets else min(active, default=n_cat - 1)
            out[chip, step, label] += 1
    return dict(out)


span = st.tuples(
    st.integers(0, 2), st.integers(0, 50), st.integers(0, 20), st.integers(-1, 2)
)  # chip, start, dur, kind


@PROPERTY
@given(
    spans=st.lists(span, max_size=30),
    cuts=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 15)), min_size=1, max_size=4),
    sets=st.booleans(),
)
def test_split_of_an_events_table_matches_reference(spans, cuts, sets):
    # events in any order, zero-length ones, events outside every window, windows with gaps
    # between them and empty ones, a chip without events and events of a chip without windows
    events = [(chip, start, start + dur, kind) for chip, start, dur, kind in spans]
    windows, t = [], 0
    for step, (gap, length) in enumerate(cuts):
        windows += [(chip, step, t + gap, t + gap + length) for chip in (0, 1)]
        t += gap + length
    cats = tuple(f"c{i}" for i in range(8 if sets else 4))
    table = pa.table(
        {
            "chip": [e[0] for e in events],
            "start_ps": [e[1] for e in events],
            "end_ps": [e[2] for e in events],
            "priority": pa.array([e[3] for e in events], pa.int8()),
        },
        schema=pa.schema(
            [("chip", pa.int32()), ("start_ps", pa.int64()), ("end_ps", pa.int64()), ("priority", pa.int8())]
        ),
    )
    win = pa.table(
        {
            "chip": [w[0] for w in windows],
            "step": [w[1] for w in windows],
            "start_ps": pa.array([w[2] for w in windows], pa.int64()),
            "end_ps": pa.array([w[3] for w in windows], pa.int64()),
        }
    )
    got = {
        (r["chip"], r["step"], cats.index(r["category"])): r["dur_ps"]
        for r in split_timeline(table, win, cats, sets).to_pylist()
    }
    assert got == {k: v for k, v in reference_owned(events, windows, len(cats), sets).items() if v}


def test_sweep_rejects_what_it_cannot_split():
    one = np.zeros(1, np.int64)

    def owned(start, kind=0, runs=((0, 2),), w=((0, 10),), n_cat=3):
        start = np.asarray(start, np.int64)
        w = np.asarray(w, np.int64)
        out = np.zeros((len(w), n_cat), np.int64)
        _sweep.owned(
            start,
            start + 5,
            np.full(len(start), kind, np.int8),
            np.asarray(runs, np.int64),
            np.ascontiguousarray(w[:, 0]),
            np.ascontiguousarray(w[:, 1]),
            n_cat,
            False,
            out,
        )
        return out

    assert owned([0, 3]).tolist() == [[8, 0, 2]]
    with pytest.raises(ValueError, match="not sorted by start"):
        owned([3, 0])
    with pytest.raises(ValueError, match="has no label"):
        owned([0, 3], kind=2)
    with pytest.raises(ValueError, match="outside the events"):
        owned([0, 3], runs=((0, 3),))
    with pytest.raises(ValueError, match="sorted and not overlap"):
        owned([0, 3], w=((0, 10), (5, 12)))
    with pytest.raises(TypeError, match="8 bytes"):
        _sweep.owned(
            one.astype(np.int32),
            one,
            one.astype(np.int8),
            np.zeros((0, 2), np.int64),
            one,
            one,
            2,
            False,
            np.zeros((1, 2), np.int64),
        )

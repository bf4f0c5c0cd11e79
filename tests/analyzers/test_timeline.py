"""The wall-time split against a unit-by-unit plain-Python reference."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from analyzers.breakdown import step_breakdown
from analyzers.context import RunContext
from analyzers.timeline import CATEGORIES
from tests.analyzers.runkit import HOST, SC_OPS, TC_OPS, Ev, RunSpec, store_with
from tests.tracekit import PROPERTY

PLACES = {"tc_forward": TC_OPS, "tc_backward": TC_OPS, "tc_collective": TC_OPS, "sc_forward": SC_OPS,
          "sc_backward": SC_OPS, "sc_collective": SC_OPS, "host_to_device": HOST, "host_preprocess": HOST}  # fmt: skip


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
    st.sampled_from(sorted(PLACES)), st.integers(0, 1), st.integers(0, 1), st.integers(0, 60), st.integers(1, 25),
)  # fmt: skip


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
    events = [Ev(TC_OPS, 0, 0, "a", 0, 10, category="tc_forward"), Ev(TC_OPS, 0, 0, "b", 5, 10, category="tc_forward"),
              Ev(SC_OPS, 0, 0, "c", 12, 6, category="sc_forward")]  # fmt: skip
    with store_with(tmp_path, RunSpec(events=events, steps=[(0, 0, 0, 20)])) as store:
        got = {r["category"]: r["dur_ps"] for r in step_breakdown(RunContext(store, 1)).to_pylist()}
    assert got == {"tc_forward": 15, "sc_forward": 3, "idle": 2}

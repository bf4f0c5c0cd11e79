"""The "Step breakdown" track: each step window split into its wall-time categories, as the analyzer says."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest
from perfetto_helpers import assert_round_trip, ingest_file

from analyzers.context import RunContext
from analyzers.rules.breakdown import step_breakdown
from analyzers.time_split import CATEGORIES as TIMELINE_CATEGORIES
from exporters.perfetto import BREAKDOWN_CATEGORY, BREAKDOWN_TRACK, write_trace
from exporters.perfetto.validate import read_trace
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("breakdown")
    trace = os.path.join(tmp, "s.sctrace")
    write_synthetic_trace(trace, 6000, chips=2, scs=2)
    return ingest_file(tmp, trace)


def breakdown_slices(path: str):
    """{(chip name, step): [(name, start_ps, dur_ps), ...] in file order} of the breakdown tracks."""
    rb = read_trace(path)
    assert rb.problems == []
    out = defaultdict(list)
    for s in rb.slices:
        if BREAKDOWN_CATEGORY not in s.categories:
            continue
        path_names = rb.path(s.track_uuid)
        assert path_names[1:] == [BREAKDOWN_TRACK]  # directly under the chip's process track
        a = dict(s.args)
        start = a.pop("start_ps", s.ts * 1000)
        dur = a.pop("dur_ps", (s.end_ts - s.ts) * 1000 if s.end_ts is not None else 0)
        out[(path_names[0], a.pop("step"))].append((s.name, start, dur))
        assert a == {}
    return out


def analyzer_view(db: str, steps=None):
    with Store.open(db, read_only=True) as store:
        ctx = RunContext(store, 1)
        split = step_breakdown(ctx).to_pylist()
        windows = ctx.sql("analysis.split.step_windows").to_pylist()
    want = defaultdict(dict)
    for r in split:
        if steps is None or steps[0] <= r["step"] < steps[1]:
            want[(f"Chip {r['chip']}", r["step"])][r["category"]] = r["dur_ps"]
    return want, {(f"Chip {w['chip']}", w["step"]): (w["start_ps"], w["end_ps"]) for w in windows}


@pytest.mark.parametrize("kw", [{}, {"window_rows": 500, "chunk_rows": 97}])
def test_breakdown_slices_split_each_step_window(db, tmp_path, kw):
    out = str(tmp_path / "b.pftrace")
    with Store.open(db, read_only=True) as store:
        stats = write_trace(store, 1, out, **kw)
    got = breakdown_slices(out)
    want, windows = analyzer_view(db)
    assert stats.breakdown == sum(len(v) for v in got.values()) > 0
    assert set(got) == set(want)
    for key, slices in got.items():
        names = [n for n, _, _ in slices]
        # named by category, one slice each, in the priority order of analyzers.time_split.CATEGORIES
        assert names == sorted(names, key=TIMELINE_CATEGORIES.index) and len(set(names)) == len(names)
        assert {n: d for n, _, d in slices} == want[key]  # the analyzer's figures
        start, end = windows[key]
        at = start
        for _, s, d in slices:  # consecutive from the window start ...
            assert s == at and d > 0
            at += d
        assert at == end  # ... and they sum to the window
    # the rest of the export is untouched by the extra track
    assert_round_trip(db, out)


def test_breakdown_follows_steps_filter_and_can_be_left_out(db, tmp_path):
    out = str(tmp_path / "s.pftrace")
    with Store.open(db, read_only=True) as store:
        write_trace(store, 1, out, steps=(2, 4))
    got = breakdown_slices(out)
    want, _ = analyzer_view(db, steps=(2, 4))
    assert {k: {n: d for n, _, d in v} for k, v in got.items()} == want
    assert {step for _, step in got} == {2, 3}

    bare = str(tmp_path / "bare.pftrace")
    with Store.open(db, read_only=True) as store:
        stats = write_trace(store, 1, bare, breakdown=False)
    assert stats.breakdown == 0
    assert not any(d.name == BREAKDOWN_TRACK for d in read_trace(bare).tracks.values())

"""Invariants on every bundled config: dependencies, resources, step markers, determinism.

The schedule is checked against the graph; the written trace is read back with the
profiler's reader and checked on its own (what analyzers will see).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from profiler.reader import read_trace
from sim_backend.config_load import load_config
from sim_backend.emulator import simulate
from sim_backend.recording.record import record_run
from tests.sim_backend.conftest import CONFIG_DIR, RUNNABLE

STEPS = 4
DEVICE_OP_LINES = ("XLA Ops", "Sparse Core Ops", "ICI")


def _sim(name: str):
    cfg = load_config(os.path.join(CONFIG_DIR, name))
    return simulate(dataclasses.replace(cfg, steps=STEPS))


@pytest.fixture(scope="module", params=RUNNABLE)
def recorded(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp(name.removesuffix(".toml"))
    r1 = record_run(os.path.join(CONFIG_DIR, name), [], None, STEPS, str(out / "a"))
    r2 = record_run(os.path.join(CONFIG_DIR, name), [], None, STEPS, str(out / "b"))
    return name, r1, r2


@pytest.mark.parametrize("name", RUNNABLE)
def test_no_task_starts_before_its_dependencies(name):
    sim = _sim(name)
    g, s = sim.graph, sim.schedule
    done = np.full(len(g.event_threshold), -1, dtype=np.int64)
    for tid, sig in enumerate(g.signals):
        for e in sig:
            done[e] = max(done[e], s.end_ps[tid])
    pairs = [(t, e) for t, waits in enumerate(g.waits) for e in waits]
    t, e = np.array(pairs).T
    threshold = np.array(g.event_threshold)
    assert ((done[e] >= 0) | (threshold[e] == 0)).all()  # every awaited event fired
    assert (s.start_ps[t] >= done[e]).all()
    assert (s.end_ps - s.start_ps == np.array(g.dur_ps)).all()


@pytest.mark.parametrize("name", RUNNABLE)
def test_no_resource_unit_runs_two_tasks_at_once(name):
    sim = _sim(name)
    s = sim.schedule
    res = np.array(sim.graph.resource)
    units = np.array(sim.resources.units())
    assert (s.unit < units[res]).all()
    key = res * 1000 + s.unit
    o = np.lexsort((s.start_ps, key))
    same = key[o][1:] == key[o][:-1]
    assert (s.start_ps[o][1:][same] >= s.end_ps[o][:-1][same]).all()


def _tracks(trace):
    return {t.id: t for t in trace.tracks}


def test_trace_tracks_never_overlap(recorded):
    _, r1, _ = recorded
    tr = read_trace(r1.trace_path)
    ev = tr.data["events"]
    tracks = _tracks(tr)
    for tid in np.unique(ev["track"]):
        m = ev["track"] == tid
        st, du = ev["start_ps"][m], ev["dur_ps"][m]
        o = np.argsort(st, kind="stable")
        assert (st[o][1:] >= (st + du)[o][:-1]).all(), tracks[int(tid)]


def test_step_markers_are_consistent(recorded):
    _, r1, _ = recorded
    tr = read_trace(r1.trace_path)
    tracks = _tracks(tr)
    steps, ev = tr.data["steps"], tr.data["events"]
    names = np.array(tr.strings, dtype=object)
    marker_tracks = {int(t) for t in np.unique(steps["track"])}
    step_lines = {tracks[t].line for t in marker_tracks}
    assert step_lines == {"Steps", "Sparse Core Steps"}
    planes = {tracks[t].plane: t for t in marker_tracks}
    for tid in marker_tracks:
        m = steps["track"] == tid
        st, du, sn = steps["start_ps"][m], steps["dur_ps"][m], steps["step"][m]
        o = np.argsort(sn)
        assert sn[o].tolist() == list(range(STEPS))  # every step, once
        assert (du > 0).all()
        assert (st[o][1:] >= (st + du)[o][:-1]).all()  # ordered, no overlap
    # every op on a device op line carries a step; TC ops and SC forward ops lie inside
    # the marker of their step on their plane
    for tid, t in tracks.items():
        if t.line not in DEVICE_OP_LINES:
            continue
        m = ev["track"] == tid
        assert (ev["step"][m] >= 0).all()
        if t.line == "ICI":
            continue
        marker = planes[t.plane]
        mm = steps["track"] == marker
        mst = dict(zip(steps["step"][mm].tolist(), steps["start_ps"][mm].tolist(), strict=True))
        mdu = dict(zip(steps["step"][mm].tolist(), steps["dur_ps"][mm].tolist(), strict=True))
        check = m & (names[ev["name"]] != "SparseDenseMatmulGradOp")
        for s, a, d in zip(ev["step"][check], ev["start_ps"][check], ev["dur_ps"][check], strict=True):
            assert mst[s] <= a and a + d <= mst[s] + mdu[s], (t.plane, t.line, s)


def test_same_seed_gives_byte_identical_traces(recorded):
    name, r1, r2 = recorded
    with open(r1.trace_path, "rb") as a, open(r2.trace_path, "rb") as b:
        assert a.read() == b.read(), name


def test_another_seed_gives_another_trace(tmp_path):
    path = os.path.join(CONFIG_DIR, "baseline.toml")
    r1 = record_run(path, [], None, 2, str(tmp_path / "a"))
    r2 = record_run(path, ["seed=1"], None, 2, str(tmp_path / "b"))
    with open(r1.trace_path, "rb") as a, open(r2.trace_path, "rb") as b:
        assert a.read() != b.read()

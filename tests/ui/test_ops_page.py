"""The Ops page (ui/pages/ops.py): its table and roofline points are the op profile's figures,
checked against the store's events by plain SQL, and its roof is the run's peaks."""

from __future__ import annotations

import math

import pytest

from profiler.store import Store
from tests.ui.dashkit import find_id
from tests.ui.ops_store import run_id
from tests.ui.test_data import data_table_of, find, text_of
from ui import data as ui_data
from ui.pages.ops import NO_PEAKS, NO_WORK, render_ops


@pytest.fixture
def store(ops_db):
    with Store.open(ops_db, read_only=True) as s:
        yield s


def event_work(store: Store, run: int) -> dict[tuple[str, str], tuple]:
    """Per (track kind, op name): the FLOPs and bytes the events of its op tracks record, straight from
    the slices (a capture's 'Async XLA Ops' line repeats ops and is no op track)."""
    rows = store.rows(
        "SELECT track_kind, name, sum(flops)::BIGINT AS f, sum(bytes)::BIGINT AS b FROM slices WHERE run_id = ? "
        "AND track_id IN (SELECT track_id FROM op_tracks WHERE run_id = ?) GROUP BY ALL",
        [run, run],
    )
    return {(r["track_kind"], r["name"]): (r["f"], r["b"]) for r in rows}


@pytest.mark.parametrize("name", ["emulated", "tpu_v6e"])
def test_points_are_the_profiles_flops_over_bytes_and_self_time(store, name):
    run = run_id(store, name)
    top = ui_data.analysis(store, run).analyses["ops"].figures["top"]
    work = event_work(store, run)
    want = {}
    for r in top:
        f, b = work.get((r["track_kind"], r["name"]), (None, None))
        assert (r["flops"], r["bytes"]) == (f, b)  # the profile's FLOPs and bytes are the events' sums
        if f and b:
            want[r["name"]] = (f / b, f / (r["self_ps"] * 1e-12))
    assert want, "the run has ops with FLOPs and bytes"
    fig = find_id(render_ops(store, {"run": run}), "ops-roofline").figure
    got = {}
    for trace in fig.data:
        if trace.name.endswith(" ops"):
            for x, y, cd in zip(trace.x, trace.y, trace.customdata, strict=True):
                got[cd[0]] = (x, y)
    assert set(got) == set(want)
    for op, (x, y) in want.items():
        assert math.isclose(got[op][0], x, rel_tol=1e-9) and math.isclose(got[op][1], y, rel_tol=1e-9)


@pytest.mark.parametrize("name", ["emulated", "tpu_v6e"])
def test_roof_is_the_runs_peaks(store, name):
    run = run_id(store, name)
    peak_flops, peak_bw = store.rows(
        "SELECT tc_peak_flops, hbm_bandwidth_bytes_per_s FROM runs WHERE run_id = ?", [run]
    )[0].values()
    assert peak_flops and peak_bw
    fig = find_id(render_ops(store, {"run": run}), "ops-roofline").figure
    by = {t.name.split(" (")[0]: t for t in fig.data}
    ridge = by["ridge"]
    assert math.isclose(ridge.x[0], peak_flops / peak_bw, rel_tol=1e-12) and ridge.y[0] == peak_flops
    mem, comp = by["HBM roof"], by["compute roof"]
    assert math.isclose(mem.y[0] / mem.x[0], peak_bw, rel_tol=1e-9) and mem.x[1] == ridge.x[0]
    assert list(comp.y) == [peak_flops, peak_flops] and comp.x[0] == ridge.x[0]
    xs = [x for t in fig.data if t.name.endswith(" ops") for x in t.x]
    assert mem.x[0] < min(xs) and comp.x[1] > max(xs)  # the roof spans every point
    ridge_fig = ui_data.analysis(store, run).analyses["utilization"].figures["ridge_flop_per_byte"]
    assert math.isclose(ridge_fig, ridge.x[0], rel_tol=1e-12)  # the utilization analyzer's ridge


@pytest.mark.parametrize("name", ["emulated", "tpu_v6e", "tf2"])
def test_table_rows_are_ops_top(store, name):
    run = run_id(store, name)
    top = ui_data.analysis(store, run).analyses["ops"].figures["top"]
    rows = data_table_of(find_id(render_ops(store, {"run": run}), "ops-table"))["rows"]
    assert [r[1] for r in rows] == [t["name"] for t in top]
    assert len(rows) == len(top) and [r[0] for r in rows] == [t["track_kind"] for t in top]
    assert [r[3] for r in rows] == [f"{t['events']:,}" for t in top]


def test_tpu_intensity_column_is_flops_over_bytes(store):
    run = run_id(store, "tpu_v6e")
    top = ui_data.analysis(store, run).analyses["ops"].figures["top"]
    rows = data_table_of(find_id(render_ops(store, {"run": run}), "ops-table"))["rows"]
    for r, t in zip(rows, top, strict=True):
        if t["flops"] is not None and t["bytes"]:
            assert r[8] == f"{t['flops'] / t['bytes']:.3g} FLOP/byte"
        else:
            assert r[8] == "-"


def test_gpu_capture_without_flops_says_so_and_draws_no_chart(store):
    run = run_id(store, "tf2")
    assert store.rows("SELECT count(*) AS n FROM events WHERE run_id = ? AND flops IS NOT NULL", [run])[0]["n"] == 0
    page = render_ops(store, {"run": run})
    assert find(page, "ops-roofline") is None
    assert NO_WORK in text_of(page) and "this capture records no flops or bytes per op" in NO_WORK.lower()
    assert len(data_table_of(find_id(page, "ops-table"))["columns"]) == 6  # self times, no FLOP columns


def test_no_peaks_draws_points_without_the_roof(store, monkeypatch):
    run = run_id(store, "tpu_v6e")
    real = ui_data.run_info
    monkeypatch.setattr(
        ui_data, "run_info", lambda s, r: {**real(s, r), "tc_peak_flops": None, "hbm_bandwidth_bytes_per_s": None}
    )
    page = render_ops(store, {"run": run})
    fig = find_id(page, "ops-roofline").figure
    assert all(t.name.endswith(" ops") for t in fig.data) and NO_PEAKS in text_of(page)


def test_a_failed_run_without_ops_says_why(pages_db):
    from tests.ui.pages_store import run_id as pages_run

    with Store.open(pages_db, read_only=True) as s:
        run = pages_run(s, "failed")
        assert s.rows("SELECT count(*) AS n FROM events WHERE run_id = ? AND dur_ps > 0", [run])[0]["n"] == 0
        page = render_ops(s, {"run": run})
    assert find(page, "ops-roofline") is None and find(page, "ops-table") is None
    assert "No op profile" in text_of(page)

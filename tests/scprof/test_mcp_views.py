"""`scprof mcp`'s view tools, `events` and `step_breakdown`, through the SDK's client over stdio: the
rows equal what the trace viewer draws (profiler/sql/ui/timeline.sql's tile SQL), the same window over the
`slices` view in `scprof sql`, and the Overview's time split (ui/data.py breakdown_per_step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK (a dependency of `scprof mcp`) is not installed")

from analyzers import runstats  # noqa: E402
from profiler.store import Store  # noqa: E402
from scprof.mcp_tools import MAX_RESULT_BYTES  # noqa: E402
from tests.scprof import test_mcp_server as base  # noqa: E402
from tests.scprof.test_mcp_server import cli_json, drive, error_line, ok  # noqa: E402

store_db = base.store_db  # the same store: two emulated runs, a failed one, a real capture

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "whole": ("events", {"run": "baseline", "limit": 5000}),
    "first 5": ("events", {"run": "baseline", "limit": 5}),
    "window": ("events", {"run": "baseline", "t0_ps": 10**9, "t1_ps": 3 * 10**9, "limit": 5000}),
    "step 1 sc chip 0": ("events", {"run": "host_bound", "steps": "1:2", "kind": "sparsecore", "chip": 0}),
    "ops lines": ("events", {"run": "baseline", "line": "ops", "plane": "TPU:1", "limit": 5000}),
    "capture": ("events", {"run": "tpu_inference_2", "limit": 50}),
    "no tracks": ("events", {"run": "baseline", "kind": "no-such-kind"}),
    "both": ("events", {"run": "baseline", "steps": "0:1", "t0_ps": 0, "t1_ps": 5}),
    "steps beyond": ("events", {"run": "baseline", "steps": "50:60"}),
    "limit": ("events", {"run": "baseline", "limit": 0}),
    "bd": ("step_breakdown", {"run": "baseline"}),
    "bd chip 1 steps": ("step_breakdown", {"run": "host_bound", "steps": "1:3", "chip": 1}),
    "bd 1 row": ("step_breakdown", {"run": "baseline", "limit": 1}),
    "bd capture": ("step_breakdown", {"run": "tpu_inference_2"}),
    "bd failed": ("step_breakdown", {"run": "spmem_overflow"}),
}


@pytest.fixture(scope="module")
def served(store_db) -> dict[str, Any]:
    return drive(store_db, CALLS)


SLICES_SQL = """SELECT event_id, track_id, plane, line, track_kind, chip, name, step, start_ps, dur_ps FROM slices
WHERE run_id = {run} AND start_ps < {t1} AND (start_ps >= {t0} OR start_ps + dur_ps > {t0}) {more}
ORDER BY start_ps, track_id, event_id"""


def _slices(capsys, db: Path, run: int, t0: int, t1: int, more: str = "") -> list[dict[str, Any]]:
    query = SLICES_SQL.format(run=run, t0=t0, t1=t1, more=more)
    return cli_json(capsys, db, "sql", query, "--format", "json", "--max-rows", "100000")


def _markers(db: Path, run: int, t0: int, t1: int) -> list[tuple]:
    with Store.open(str(db), read_only=True) as store:
        rows = store.rows(
            "SELECT track_id, step, start_ps, dur_ps FROM steps WHERE run_id = ? AND start_ps < ? "
            "AND (start_ps >= ? OR start_ps + dur_ps > ?) ORDER BY start_ps, track_id",
            [run, t1, t0, t0],
        )
    return [(r["track_id"], r["step"], r["start_ps"], r["dur_ps"]) for r in rows]


def _events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["rows"] if r["event_id"] != -1]


def test_events_of_the_whole_run_equal_slices_in_sql(served, store_db, capsys):
    """The whole run (1,210 slices) is over the 256 KiB a result holds: the rows that fit, in order."""
    doc = ok(served["whole"])
    t0, t1 = doc["window_ps"]
    every = _slices(capsys, store_db, 1, t0, t1)
    markers = _markers(store_db, 1, t0, t1)
    assert doc["count"] == len(every) + len(markers) == sum(t["count"] for t in doc["tracks"])
    assert doc["truncated"] and "KiB" in doc["note"] and 0 < len(doc["rows"]) < doc["count"]
    assert len(served["whole"].content[0].text.encode()) <= MAX_RESULT_BYTES
    got = _events(doc)
    assert got == every[: len(got)]
    shown = [(r["track_id"], r["step"], r["start_ps"], r["dur_ps"]) for r in doc["rows"] if r["event_id"] == -1]
    assert shown == markers[: len(shown)] and shown  # the step markers, as the viewer draws them
    assert all(r["name"] == f"step {r['step']}" for r in doc["rows"] if r["event_id"] == -1)
    starts = [r["start_ps"] for r in doc["rows"]]
    assert starts == sorted(starts)


def test_events_equal_the_viewers_tile_rows(served, store_db):
    """The window [0, 2^(k+10)) is tile (k, 0): its exact-mode rows (TILE_SLICES, minlen 0) are the tool's."""
    from profiler import sqltree
    from ui.trace_api import run_facts, run_tracks

    doc = ok(served["window"])
    with Store.open(str(store_db), read_only=True) as store:
        facts = run_facts(store, 1)
        tracks = [t.track_id for t in run_tracks(store, 1)]
        tile = sqltree.query(
            store.con,
            "ui.timeline.tile_slices",
            run=1,
            t0=10**9,
            t1=3 * 10**9,
            maxdur=facts.max_event_dur_ps,
            maxmarker=facts.max_marker_dur_ps,
            name_base=facts.name_base,
            tracks=tracks,
            minlen=0,
        )
    viewer = sorted((r["id"], r["track_id"], r["start"], r["dur"]) for r in tile.to_pylist())
    got = sorted((r["event_id"], r["track_id"], r["start_ps"], r["dur_ps"]) for r in doc["rows"])
    assert got == viewer and 0 < len(got) < ok(served["whole"])["count"]


def test_events_windows_and_track_filters(served, store_db, capsys):
    window = ok(served["window"])
    assert window["window_ps"] == [10**9, 3 * 10**9]
    assert _events(window) == _slices(capsys, store_db, 1, 10**9, 3 * 10**9)

    step = ok(served["step 1 sc chip 0"])
    with Store.open(str(store_db), read_only=True) as store:
        from ui.data import steps_window

        assert step["window_ps"] == list(steps_window(store, 2, (1, 1))) and step["steps"] == [1, 2]
    t0, t1 = step["window_ps"]
    expect = _slices(capsys, store_db, 2, t0, t1, "AND track_kind = 'sparsecore' AND chip = 0")
    assert _events(step)[: len(step["rows"])] == expect[: len(_events(step))] and step["count"] >= len(expect)
    assert {(t["track_kind"], t["chip"]) for t in step["tracks"]} == {("sparsecore", 0)}

    lines = ok(served["ops lines"])
    t0, t1 = lines["window_ps"]
    expect = _slices(capsys, store_db, 1, t0, t1, "AND lower(line) LIKE '%ops%' AND plane LIKE '%TPU:1%'")
    assert _events(lines) == expect and expect


def test_events_are_capped_and_say_how_to_narrow(served, capsys, store_db):
    first = ok(served["first 5"])
    whole = ok(served["whole"])
    assert first["rows"] == whole["rows"][:5] and first["count"] == whole["count"] and first["truncated"]
    assert "narrow the query" in first["note"] and "window" in first["note"]
    window = ok(served["window"])
    assert not window["truncated"] and window["count"] == len(window["rows"])
    capture = ok(served["capture"])  # a real capture without steps: its events all the same
    assert len(capture["rows"]) == 50 and capture["truncated"] and capture["steps"] is None
    none = ok(served["no tracks"])
    assert none["rows"] == [] and none["count"] == 0 and not none["truncated"]


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("both", "not both"),
        ("steps beyond", "has no steps 50..59"),
        ("limit", "limit: must be 1..5,000"),
        ("bd capture", "has no steps"),
    ],
)
def test_view_refusals_are_one_line(served, key, needle):
    assert needle in error_line(served[key])


def test_step_breakdown_equals_the_overview(served, store_db):
    from ui.data import breakdown_per_step, clamp_steps, step_bounds

    with Store.open(str(store_db), read_only=True) as store:
        whole = breakdown_per_step(runstats.report(store, 1), clamp_steps(step_bounds(store, 1), None))
        part = breakdown_per_step(runstats.report(store, 2), (1, 2), 1)
    for doc, bd in ((ok(served["bd"]), whole), (ok(served["bd chip 1 steps"]), part)):
        assert [r["step"] for r in doc["rows"]] == bd["steps"]
        assert doc["categories"] == list(bd["per_step"])
        for c in doc["categories"]:
            assert [r[c] for r in doc["rows"]] == pytest.approx(bd["per_step"][c], rel=0, abs=0)
            assert [r[c] for r in doc["per_chip"]] == bd["per_chip"][c]
        assert [r["chip"] for r in doc["per_chip"]] == bd["chips"] and doc["counted_steps"] == len(bd["counted_steps"])
        for r in doc["rows"]:
            assert r["total_ps"] == pytest.approx(sum(r[c] for c in doc["categories"]))
    assert ok(served["bd chip 1 steps"])["chip"] == 1 and ok(served["bd chip 1 steps"])["steps"] == [1, 3]
    one = ok(served["bd 1 row"])
    assert len(one["rows"]) == 1 and one["truncated"] and "give steps" in one["note"]


def test_step_breakdown_of_a_failed_run_says_so(served):
    assert "'spmem_overflow' has no steps" in error_line(served["bd failed"])

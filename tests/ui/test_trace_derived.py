"""The trace viewer's derived `Steps` rows (ui/trace_derived.py, ui.timeline's derived_device_steps) on real
captures, against independent references: the `Steps` line TensorFlow's profiler derived itself on the GPUs of the
TF2 capture, plain Python over the events (XProf's DeriveStepEventsFromGroups rule), and a stored step-marker track
holding the same spans, whose tiles the SQL path computes."""

from __future__ import annotations

import dataclasses
import shutil

import duckdb
import pytest

from profiler.store import Store
from scprof import answers
from scprof.cli import main
from tests.xplane.test_wild_captures import ingest_path
from ui import trace_api
from ui.app import create_app
from ui.trace_derived import derived_steps

CAPTURES = ("hta_nccl", "hta_gpu_train", "tf2_gpu_multi_worker", "jax_cpu_4dev_collectives")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("derived") / "s.duckdb")
    for name in CAPTURES:
        assert main(["ingest", ingest_path(name), "--db", path, "--name", name]) == 0, name
    return path


@pytest.fixture(scope="module")
def runs(db) -> dict[str, int]:
    with Store.open(db, read_only=True) as store:
        return {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}


def xprof_rule(store: Store, run_id: int) -> list[tuple[int, int, int, int]]:
    """(chip, step, start, dur) per span, in plain Python: a device chip's step-tagged events (chips with no step
    markers and no `Steps` line), sorted by start (the longer first, then the step), consecutive events of one step
    merged."""
    chips_with_steps = {
        r["chip"]
        for r in store.rows(
            "SELECT DISTINCT t.chip FROM tracks t LEFT JOIN steps s USING (run_id, track_id) "
            "WHERE t.run_id = ? AND (t.line = 'Steps' OR s.step IS NOT NULL)",
            [run_id],
        )
    }
    events = store.rows(
        "SELECT t.chip, e.step, e.start_ps, e.dur_ps FROM events e JOIN tracks t USING (run_id, track_id) "
        "WHERE e.run_id = ? AND t.chip >= 0 AND t.kind IN ('gpu', 'cpu', 'device') AND e.step IS NOT NULL "
        "AND t.line NOT IN ('TensorFlow Ops', 'TensorFlow Name Scope', 'XLA Modules', 'XLA Ops')",
        [run_id],
    )
    spans: list[list[int]] = []
    last: dict[int, list[int]] = {}
    for e in sorted(events, key=lambda e: (e["chip"], e["start_ps"], -e["dur_ps"], e["step"])):
        if e["chip"] in chips_with_steps:
            continue
        end = e["start_ps"] + e["dur_ps"]
        span = last.get(e["chip"])
        if span is not None and span[1] == e["step"]:
            span[3] = max(span[3], end)
        else:
            last[e["chip"]] = span = [e["chip"], e["step"], e["start_ps"], end]
            spans.append(span)
    return sorted((c, s, a, b - a) for c, s, a, b in spans)


def derived_rows(store: Store, run_id: int) -> list[tuple[int, int, int, int]]:
    d = derived_steps(store, run_id)
    chip = {t[0]: t[3] for t in d.tracks}
    return sorted(
        (chip[t], s, a, b)
        for t, s, a, b in zip(d.track.tolist(), d.step.tolist(), d.start_ps.tolist(), d.dur_ps.tolist(), strict=True)
    )


def test_the_rows_follow_xprofs_rule_over_the_events(db, runs):
    with Store.open(db, read_only=True) as store:
        for name in CAPTURES:
            assert derived_rows(store, runs[name]) == xprof_rule(store, runs[name]), name
        # the Kineto traces' GPU gets a row (the host alone marks their steps); TF2's GPUs have TensorFlow's own
        # `Steps` line and JAX's CPU device the host's step markers: no row
        assert [t[1:] for t in derived_steps(store, runs["hta_nccl"]).tracks] == [("/device:GPU:0", "gpu", 0, 3)]
        assert derived_steps(store, runs["hta_gpu_train"]).tracks
        assert not derived_steps(store, runs["tf2_gpu_multi_worker"]).tracks
        assert not derived_steps(store, runs["jax_cpu_4dev_collectives"]).tracks


def test_the_rows_equal_the_steps_tensorflow_derived_on_its_gpus(db, runs, tmp_path):
    """With TensorFlow's `Steps` line taken out of the TF2 capture, the derived rows are that line, span for span."""
    copy = str(tmp_path / "tf2.duckdb")
    shutil.copy(db, copy)
    run = runs["tf2_gpu_multi_worker"]
    con = duckdb.connect(copy)
    reference = con.execute(
        "SELECT t.plane, s.step, s.start_ps, s.dur_ps FROM steps s JOIN tracks t USING (run_id, track_id) "
        "WHERE s.run_id = ? ORDER BY ALL",
        [run],
    ).fetchall()
    assert len(reference) == 4  # GPU:4 and GPU:6 of each of the capture's two hosts, one step each
    con.execute("DELETE FROM steps WHERE run_id = ?", [run])
    con.execute(
        "DELETE FROM events WHERE run_id = ? AND track_id IN "
        "(SELECT track_id FROM tracks WHERE run_id = ? AND line = 'Steps')",
        [run, run],
    )
    con.execute("UPDATE tracks SET line = 'taken out' WHERE run_id = ? AND line = 'Steps'", [run])
    con.close()
    with Store.open(copy, read_only=True) as store:
        d = derived_steps(store, run)
        plane = {t[0]: t[1] for t in d.tracks}
        rows = sorted(
            (plane[t], s, a, b)
            for t, s, a, b in zip(
                d.track.tolist(), d.step.tolist(), d.start_ps.tolist(), d.dur_ps.tolist(), strict=True
            )
        )
    assert rows == reference


@pytest.mark.parametrize("limit", [1, 2000])
def test_tiles_equal_those_of_a_stored_marker_track_with_the_same_spans(db, runs, tmp_path, monkeypatch, limit):
    """Both tile modes: the derived row's tile (numpy) equals the SQL path's tile of a stored step-marker track
    holding the same spans, at every level from one bucket per span to the whole run."""
    copy = str(tmp_path / "copy.duckdb")
    shutil.copy(db, copy)
    run = runs["hta_nccl"]
    with Store.open(copy, read_only=True) as store:
        d = derived_steps(store, run)
    (derived_id, plane, kind, chip, _), *_ = d.tracks
    stored_id = derived_id + 100
    con = duckdb.connect(copy)
    con.execute(
        "INSERT INTO tracks (run_id, track_id, plane, line, kind, chip, core, tile) VALUES (?, ?, ?, 'x', ?, ?, -1, -1)",
        [run, stored_id, plane, kind, chip],
    )
    con.executemany(
        "INSERT INTO steps (run_id, track_id, step, start_ps, dur_ps) VALUES (?, ?, ?, ?, ?)",
        [
            [run, stored_id, s, a, b]
            for s, a, b in zip(d.step.tolist(), d.start_ps.tolist(), d.dur_ps.tolist(), strict=True)
        ],
    )
    con.close()
    monkeypatch.setattr(trace_api, "EXACT_LIMIT", limit)
    with Store.open(copy, read_only=True) as store:
        facts = dataclasses.replace(
            trace_api.run_facts(store, run), tile_level=None
        )  # the stored row is not in tile_sums
        top = trace_api.max_level(facts.last_ps)
        bucketed = 0
        for k in range(top - 8, top + 12):  # up to buckets longer than every span
            for i in range(0, (facts.last_ps >> (k + trace_api.TILE_SHIFT)) + 1):
                tiles = trace_api.compute_tiles(store, facts, k, i, [derived_id, stored_id])
                ours, theirs = tiles[derived_id], tiles[stored_id]
                assert ours["mode"] == theirs["mode"], (k, i)
                assert ours["ev"] == theirs["ev"], (k, i)
                assert ours.get("bk") == theirs.get("bk"), (k, i)
                assert sorted(ours["_names"].tolist()) == sorted(theirs["_names"].tolist())
                bucketed += len(ours.get("bk", {}).get("b", []))
    assert bucketed > 0 if limit == 1 else bucketed == 0  # the aggregated mode's buckets were compared


def test_the_api_and_the_events_tool_show_the_row_first_in_its_gpus_group(db, runs):
    client = create_app(db).server.test_client()
    run = runs["hta_nccl"]
    meta = client.get(f"/api/trace/meta?run={run}").get_json()
    gpu = next(g for g in meta["groups"] if g["id"] == "GPU:0")
    first = next(t for t in meta["tracks"] if t["id"] == gpu["tracks"][0])
    assert (first["line"], first["kind"], first["steps"], first["n"]) == ("Steps", "gpu", True, 3)
    tile = client.get(f"/api/trace/tile?run={run}&k={meta['max_level']}&i=0&tracks={first['id']}").get_json()
    ev = tile["tracks"][str(first["id"])]["ev"]
    assert [tile["names"][str(n)] for n in ev["name"]] == ["step 4", "step 5", "step 6"]
    assert ev["step"] == [4, 5, 6] and ev["id"] == [-1, -1, -1]
    with Store.open(db, read_only=True) as store:
        d = derived_steps(store, run)
        doc = answers.events_doc(store, run, tracks={"plane": "GPU", "line": "Steps"})
    assert [r["start_ps"] for r in doc["rows"]] == d.start_ps.tolist()
    assert [r["name"] for r in doc["rows"]] == ["step 4", "step 5", "step 6"]
    assert doc["count"] == 3 and doc["tracks"][0]["count"] == 3

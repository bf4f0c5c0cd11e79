"""Importing XProf captures: committed JAX CPU captures and a synthetic TPU-like XSpace."""

from __future__ import annotations

import os

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from tests.xplane.helpers import JAX_LOGDIR, JAX_RUN_DIR, JAX_SMALL, count_space, read_space
from tests.xplane.synth import tpu_space


def _ingest(paths, db="s.duckdb", **kw):
    with Store.open(db) as store:
        return ingest_traces(store, paths, **kw)


@pytest.mark.parametrize(
    "path,pb", [(JAX_RUN_DIR, os.path.join(JAX_RUN_DIR, "jaxhost.xplane.pb")), (JAX_SMALL, JAX_SMALL)]
)
def test_jax_capture_ingests_what_the_file_holds(path, pb):
    want = count_space(read_space(pb))
    assert want["events"] and want["steps"]
    (r,) = _ingest([path])
    with Store.open("s.duckdb", read_only=True) as st:
        run = st.rows("SELECT * FROM runs")[0]
        assert run["source"] == "xplane" and run["events"] == want["events"] == r.events
        lines = {
            (x["plane"], x["line"]): x["n"] for x in st.rows("SELECT plane, line, count(*) n FROM slices GROUP BY ALL")
        }
        assert lines == want["lines"]
        assert {p for p, _ in lines} == want["planes"]
        assert run["steps"] == len(want["steps"])
        markers = st.rows("SELECT step FROM steps ORDER BY step")
        assert [m["step"] for m in markers] == sorted(want["steps"])
        # The threads that run XLA ops (an hlo_op stat, read here with the protobuf classes) are the
        # CPU device, chip 0; the others are the host's.
        space = read_space(pb)
        xla_lines = set()
        for plane in space.planes:
            hlo = {i for i, m in plane.stat_metadata.items() if m.name == "hlo_op"}
            for ln in plane.lines:
                if any(s.metadata_id in hlo for e in ln.events for s in e.stats):
                    xla_lines.add(ln.name)
        assert xla_lines
        kinds = {(t["line"], t["kind"], t["chip"], t["core"]) for t in st.rows("SELECT * FROM tracks")}
        assert kinds == {
            (ln, "cpu", 0, 0) if ln in xla_lines or "XLA" in ln else (ln, "host", -1, -1) for ln, *_ in kinds
        }
        assert {k for _, k, *_ in kinds} == {"cpu", "host"}
        # Stats that are not typed columns are kept as arguments, none dropped.
        keys = {r["key"] for r in st.rows("SELECT DISTINCT key FROM event_args")}
        assert {"hlo_op", "hlo_module", "program_id"} <= keys


def test_logdir_is_accepted_and_reingest_is_refused():
    (r,) = _ingest([JAX_LOGDIR])
    assert r.name == "run1"
    from profiler.errors import StoreError

    with pytest.raises(StoreError, match="already holds this run"):
        _ingest([JAX_RUN_DIR])


def test_synthetic_tpu_space(tmp_path):
    path = str(tmp_path / "tpu.xplane.pb")
    space = tpu_space(steps=3)
    with open(path, "wb") as f:
        f.write(space.SerializeToString())
    want = count_space(space)
    (r,) = _ingest([path], name="tpu")
    with Store.open("s.duckdb", read_only=True) as st:
        run = st.rows("SELECT * FROM runs")[0]
        assert (run["generation"], run["num_chips"], run["sparsecores_per_chip"]) == ("v5p", 1, 2)
        assert run["tc_peak_flops"] == pytest.approx(459e12)
        assert run["hbm_bandwidth_bytes_per_s"] == pytest.approx(2765e9)
        assert run["start_time_unix_ns"] == 1_700_000_000_000_000_000
        assert run["events"] == want["events"] and run["steps"] == 3
        tracks = {(t["plane"], t["line"]): (t["kind"], t["chip"], t["core"]) for t in st.rows("SELECT * FROM tracks")}
        assert tracks[("/device:TPU:0", "XLA Ops")] == ("tensorcore", 0, 0)
        assert tracks[("/device:TPU:0 SparseCore 1", "Sparse Core Ops")] == ("sparsecore", 0, 1)
        assert tracks[("/host:CPU", "python")] == ("host", -1, -1)
        assert tracks[("/custom:widget", "Widget Line")] == ("unknown", -1, -1)
        assert tracks[("/host:CPU", "hbm bytes_allocated")] == ("counter", -1, -1)
        # Absolute time: line.timestamp_ns * 1000 + offset_ps, relative to the run start.
        op = st.rows("SELECT * FROM slices WHERE name = 'fusion.2' AND step = 1")[0]
        assert op["start_ps"] == 1000 + 1_000_000_000 + 200_000_000
        assert (op["flops"], op["bytes"], op["category"]) == (3000, 64, "convolution")
        sc = st.rows("SELECT * FROM slices WHERE plane LIKE '%SparseCore 1' AND step = 2")[0]
        assert (sc["table_name"], sc["ids"], sc["unique_ids"], sc["dropped_ids"], sc["bytes"]) == (
            "table_1",
            802,
            600,
            2,
            4096,
        )
        assert (
            st.rows(
                "SELECT count(*) n FROM events WHERE step IS NULL AND track_id IN "
                "(SELECT track_id FROM tracks WHERE plane LIKE '/device%')"
            )[0]["n"]
            == 0
        )
        steps = st.rows("SELECT step, dur_ps FROM step_markers WHERE plane = '/device:TPU:0' ORDER BY step")
        assert steps == [{"step": s, "dur_ps": 1_000_000_000 - 1000} for s in range(3)]
        mem = st.rows("SELECT value FROM counter_samples WHERE counter = 'hbm bytes_allocated' ORDER BY ts_ps")
        assert [m["value"] for m in mem] == [1 << 20, 1 << 21, 1 << 22]
        args = {
            (a["key"], a["int_value"], a["double_value"], a["string_value"])
            for a in st.rows("SELECT key, int_value, double_value, string_value FROM event_args")
        }
        assert ("custom_note", None, None, "hot") in args
        assert ("brightness", None, 0.5, None) in args and ("mood", None, None, "calm") in args
        assert ("allocator_name", None, None, "hbm") in args
        extra = st.rows("SELECT hardware_extra FROM runs")[0]["hardware_extra"]
        assert "widget_rev" in extra


def test_two_files_of_the_same_bytes_are_two_hosts(tmp_path):
    """A multi-worker logdir can hold two host files with equal bytes; XProf reads two hosts (the
    same path given twice is still refused: tests/xplane/hostile.py, same_file_twice)."""
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    data = tpu_space(steps=2).SerializeToString()
    for host in ("host-a", "host-b"):
        (run / f"{host}.xplane.pb").write_bytes(data)
    (r,) = _ingest([str(run)], db=str(tmp_path / "s.duckdb"))
    with Store.open(str(tmp_path / "s.duckdb"), read_only=True) as st:
        planes = {t["plane"] for t in st.rows("SELECT DISTINCT plane FROM tracks WHERE kind = 'tensorcore'")}
        (run_row,) = st.rows("SELECT * FROM runs")
    assert planes == {"host-a /device:TPU:0", "host-b /device:TPU:0"}
    (one,) = _ingest([str(run / "host-a.xplane.pb")], db=str(tmp_path / "one.duckdb"))
    assert run_row["num_chips"] == 2 and r.events == 2 * one.events


def test_an_empty_device_plane_is_a_chip_and_hlo_text_names_the_op(tmp_path):
    from profiler.xspace import xplane_pb2 as xp
    from tests.xplane.synth import PlaneBuilder

    space = xp.XSpace(hostnames=["h"])
    tpu = PlaneBuilder(space, 1, "/device:TPU:0")
    PlaneBuilder(space, 2, "/device:TPU:1")  # no lines at all
    ops, asyncs = tpu.line(1, "XLA Ops"), tpu.line(2, "Async XLA Ops")
    tpu.event(ops, "%copy-start.2 = (f32[8]) copy-start(f32[8] %p)", 0, 10)
    tpu.event(ops, "%fusion.1 = f32[8] fusion(f32[8] %a)", 10, 1000)
    tpu.event(ops, "%copy-done.2 = f32[8] copy-done((f32[8]) %copy-start.2)", 1010, 500)
    tpu.event(asyncs, "%copy-start.2 = (f32[8]) copy-start(f32[8] %p)", 0, 1510)
    space.planes[0].event_metadata[1].display_name = "async-copy"  # as XProf names an async line's event
    path = str(tmp_path / "t.xplane.pb")
    with open(path, "wb") as f:
        f.write(space.SerializeToString())
    _ingest([path], db=str(tmp_path / "s.duckdb"))
    with Store.open(str(tmp_path / "s.duckdb"), read_only=True) as st:
        names = {(r["line"], r["name"]) for r in st.rows("SELECT line, name FROM slices")}
        chips = st.rows("SELECT chip, busy_ps, idle_share_span FROM device_idle ORDER BY chip")
        (window,) = st.rows("SELECT name, source, dur_ps, hidden_ps, exposed_ps FROM async_spans")
        (run_row,) = st.rows("SELECT num_chips FROM runs")
    assert names == {
        ("XLA Ops", "copy-start.2"),
        ("XLA Ops", "fusion.1"),
        ("XLA Ops", "copy-done.2"),
        ("Async XLA Ops", "copy-start.2"),
    }
    assert run_row["num_chips"] == 2
    # TPU:0 busy over its ops (1510 ps, the async window not added); TPU:1 a chip with no ops
    assert [(c["chip"], c["busy_ps"]) for c in chips] == [(0, 1510), (1, 0)] and chips[1]["idle_share_span"] == 1
    # the window hides behind fusion.1 only (the start and done are no compute): 1000 of 1510 ps
    assert (window["name"], window["source"], window["dur_ps"], window["hidden_ps"], window["exposed_ps"]) == (
        "copy-start.2",
        "async_line",
        1510,
        1000,
        510,
    )

"""An imported XProf capture exported again is the capture, for protobuf and for XProf.

Over every XSpace capture of the corpus (tests/data/**: *.xplane.pb files and run directories of
several hosts, the wild corpus included as it lands): `scprof ingest`, `scprof export xspace`,
then
- each exported file parses to the same XSpace message as its original (stats with their types,
  metadata stats on the metadata, display names, metadata planes, hostnames: all of it);
- `xprof get_overview` (XProf's CLI, a test extra, in a subprocess) gives the same performance
  summary (step time, idle and op-time shares, roofline, bound-by) and run environment on both.
A TPU-shaped capture built here with the generated classes carries what the corpus may lack:
uint64, bytes and ref stats on event metadata, display names, `/host:metadata` and
`Task Environment` planes, a "TPU v6 Lite" device type.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from exporters.xspace import export_run
from exporters.xspace_kept import host_paths
from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from profiler.xspace import xplane_pb2 as xp
from profiler.xspace.read import find_runs
from tests.tracekit import REPO, missing_extra
from tests.xplane.synth import T0_NS, PlaneBuilder

XPROF = shutil.which("xprof") or os.path.join(os.path.dirname(sys.executable), "xprof")


def corpus_captures() -> list[str]:
    """Every XSpace capture under tests/data: a run directory when it holds several host files, else the file."""
    files = sorted(glob.glob(str(REPO / "tests" / "data" / "**" / "*.xplane.pb"), recursive=True))
    out = []
    for f in files:
        d = os.path.dirname(f)
        target = d if len(glob.glob(os.path.join(glob.escape(d), "*.xplane.pb"))) > 1 else f
        if target not in out:
            out.append(target)
    return out


def v6e_space() -> xp.XSpace:
    """Two TPU v6e chips running an inference loop: typed metadata stats, display names, metadata planes."""
    space = xp.XSpace(hostnames=["t1v-n-test-w-0"])
    hlo = b"\x0a\x05fusion" * 40  # a serialized proto (bytes stat) as /host:metadata carries
    for chip in range(2):
        tc = PlaneBuilder(space, chip, f"/device:TPU:{chip}")
        tc.p.stats.add(metadata_id=tc.stat("device_type_string"), str_value="TPU v6 Lite")
        tc.p.stats.add(metadata_id=tc.stat("peak_teraflops_per_second"), double_value=918.0)
        tc.p.stats.add(metadata_id=tc.stat("peak_hbm_bw_gigabytes_per_second"), double_value=1640.0)
        tc.p.stats.add(metadata_id=tc.stat("memory_size"), uint64_value=34_359_738_368)
        modules, ops = tc.line(1, "XLA Modules"), tc.line(2, "XLA Ops")
        for k in range(3):
            md = tc.p.event_metadata[tc.meta(f"fusion.{k}")]
            md.display_name = f"fusion.{k} = f32[8,128] fusion(p0, p1)"
            md.stats.add(metadata_id=tc.stat("hlo_category"), ref_value=tc.stat("convolution fusion"))
            md.stats.add(metadata_id=tc.stat("flops"), uint64_value=2_000_000 * (k + 1))
            md.stats.add(metadata_id=tc.stat("bytes_accessed"), uint64_value=4096 * (k + 1))
            md.stats.add(metadata_id=tc.stat("memory_access_breakdown"), bytes_value=bytes([8, k, 16, 2]))
            md.stats.add(metadata_id=tc.stat("program_id"), uint64_value=(1 << 63) + 77)  # beyond int64
        for s in range(4):
            base = s * 2_000_000_000
            tc.event(modules, "jit_infer(77)", base, 1_500_000_000, run_id=1000 + s)
            for k in range(3):
                ev = ops.events.add(
                    metadata_id=tc.meta(f"fusion.{k}"), offset_ps=base + k * 400_000_000, duration_ps=300_000_000
                )
                ev.stats.add(metadata_id=tc.stat("run_id"), uint64_value=1000 + s)
    host = PlaneBuilder(space, 100, "/host:CPU")
    th = host.line(5, "XLA TraceMe")
    for s in range(4):
        host.event(th, "ExecuteHelper", s * 2_000_000_000, 100_000_000)
    meta = PlaneBuilder(space, 200, "/host:metadata")
    meta.p.stats.add(metadata_id=meta.stat("hlo_proto"), bytes_value=hlo)
    env = PlaneBuilder(space, 201, "Task Environment")
    env.p.stats.add(metadata_id=env.stat("profile_start_time"), uint64_value=T0_NS)
    env.p.stats.add(metadata_id=env.stat("profile_stop_time"), uint64_value=T0_NS + 8_000_000_000)
    return space


def _ingest_export(tmp_path, capture: str) -> tuple[list[str], list[str], int]:
    """(original files, exported files, events) of a capture ingested into a new store."""
    with Store.open(str(tmp_path / "s.duckdb")) as st:
        (r,) = ingest_traces(st, [capture])
        (_, files), *_ = find_runs(capture)
        out_dir = tmp_path / "export" / "plugins" / "profile" / "run1"
        out_dir.mkdir(parents=True)
        out = str(out_dir / "h.xplane.pb")
        line = export_run(st, r.run_id, out, None, True)
        assert "(its own XSpace)" in line and "(checked)" in line
    return files, host_paths(out, files), r.events


def _parsed(path: str) -> xp.XSpace:
    with open(path, "rb") as f:
        return xp.XSpace.FromString(f.read())


@pytest.mark.parametrize("capture", corpus_captures(), ids=lambda p: os.path.relpath(p, REPO / "tests" / "data"))
def test_export_of_an_imported_capture_is_the_capture(tmp_path, capture):
    originals, exported, events = _ingest_export(tmp_path, capture)
    assert events > 0
    for a, b in zip(originals, exported, strict=True):
        assert _parsed(a) == _parsed(b), (a, b)


def test_typed_metadata_stats_and_metadata_planes_survive(tmp_path):
    cap = tmp_path / "v6e.xplane.pb"
    cap.write_bytes(v6e_space().SerializeToString())
    (orig,), (out,), events = _ingest_export(tmp_path, str(cap))
    assert events == 2 * 4 * 4 + 4
    got = _parsed(out)
    assert got == _parsed(orig)
    tc = next(p for p in got.planes if p.name == "/device:TPU:0")
    names = {m.id: m.name for m in tc.stat_metadata.values()}
    kinds = {names[s.metadata_id]: s.WhichOneof("value") for md in tc.event_metadata.values() for s in md.stats}
    assert kinds == {
        "hlo_category": "ref_value",
        "flops": "uint64_value",
        "bytes_accessed": "uint64_value",
        "memory_access_breakdown": "bytes_value",
        "program_id": "uint64_value",
    }
    assert {p.name for p in got.planes} >= {"/host:metadata", "Task Environment"}
    assert list(got.hostnames) == ["t1v-n-test-w-0"]


def test_steps_export_keeps_the_chosen_steps_events(tmp_path):
    capture = str(REPO / "tests" / "data" / "jax_cpu_train")
    with Store.open(str(tmp_path / "s.duckdb")) as st:
        (r,) = ingest_traces(st, [capture])
        want = st.rows("SELECT count(*) AS n FROM events WHERE run_id = ? AND step >= 1 AND step < 3", [r.run_id])[0]
        out = str(tmp_path / "steps.xplane.pb")
        export_run(st, r.run_id, out, (1, 3), True)
    space = _parsed(out)
    assert sum(len(ln.events) for p in space.planes for ln in p.lines) == want["n"] > 0


def test_a_capture_without_a_kept_space_exports_from_the_store(tmp_path):
    """Captures imported before schema 7 kept nothing: their export is the store's rows, as before."""
    capture = str(REPO / "tests" / "data" / "jax_cpu_small.xplane.pb")
    with Store.open(str(tmp_path / "s.duckdb")) as st:
        (r,) = ingest_traces(st, [capture])
        st.con.execute("DELETE FROM xspace_files; DELETE FROM xspace_events")
        out = str(tmp_path / "generic.xplane.pb")
        line = export_run(st, r.run_id, out, None, True)
    assert "its own XSpace" not in line
    assert any(p.name == "/host:scprof" for p in _parsed(out).planes)


# --------------------------------------------------------------------------- XProf reads the same


def _overview(run_dir: str) -> dict:
    out = subprocess.run(
        [XPROF, "get_overview", f"--session_id={run_dir}", "--bypass_cache=True"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(out.stdout[out.stdout.index("{") :])
    assert "performance_summary" in got, got
    return got


@pytest.mark.parametrize(
    "capture",
    ["v6e", *corpus_captures()],
    ids=lambda p: p if p == "v6e" else os.path.relpath(p, REPO / "tests" / "data"),
)
def test_xprof_overview_of_the_export_is_the_original_s(tmp_path, capture):
    if not os.path.exists(XPROF):
        missing_extra("xprof CLI not installed (test extra `xprof`; run `make install-test`)")
    src_dir = tmp_path / "orig" / "plugins" / "profile" / "run1"
    src_dir.mkdir(parents=True)
    if capture == "v6e":
        (src_dir / "host.xplane.pb").write_bytes(v6e_space().SerializeToString())
        capture = str(src_dir / "host.xplane.pb")
    (_, files), *_ = find_runs(capture)
    for f in files:
        if os.path.dirname(f) != str(src_dir):
            shutil.copyfile(f, src_dir / os.path.basename(f))
    _, exported, _ = _ingest_export(tmp_path, capture)
    before, after = _overview(str(src_dir)), _overview(os.path.dirname(exported[0]))
    assert after["performance_summary"] == before["performance_summary"]
    assert after["run_environment"] == before["run_environment"]

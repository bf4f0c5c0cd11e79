"""Real captures get the analysis emulated runs get: steps, breakdown, host-bound, compare.

The captures are JAX CPU runs of a DLRM-like step fed by a host input pipeline
(tests/data/make_input_captures.py): host_bound preprocesses each batch in line,
prefetched prepares batches ahead in a thread pool, two_hosts is the host-bound loop in
two processes (one file per host), missing_stats is prefetched without the stats newer
XProf versions drop. References are independent of scprof: the step wall times the
capturing script measured, and interval arithmetic over the raw XPlane events read with
the protobuf classes. A GPU capture is built here with the same classes (no GPU is lent
to the tests): a host step loop feeding `/device:GPU:0` stream lines.
"""

from __future__ import annotations

import json
import os

import pytest

from profiler.store import Store
from scprof.cli import main
from tests.xplane.helpers import DATA, read_space
from tests.xplane.synth import PlaneBuilder

PIPE = os.path.join(DATA, "input_pipeline")
HOST_BOUND = os.path.join(PIPE, "host_bound", "plugins", "profile", "run1")
PREFETCHED = os.path.join(PIPE, "prefetched", "plugins", "profile", "run1")
TWO_HOSTS = os.path.join(PIPE, "two_hosts", "plugins", "profile", "run1")
MISSING_STATS = os.path.join(PIPE, "missing_stats.xplane.pb")


def _walls(run_dir: str, host: str = "host0") -> list[float]:
    with open(os.path.join(run_dir, f"{host}.steps.json")) as f:
        return json.load(f)["step_wall_s"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("real") / "s.duckdb")
    for name, path in (
        ("host_bound", HOST_BOUND),
        ("prefetched", PREFETCHED),
        ("two_hosts", TWO_HOSTS),
        ("drift", MISSING_STATS),
    ):
        assert main(["ingest", path, "--db", db, "--name", name]) == 0
    return db


def _json(capsys, *argv: str):
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _step_ps(db: str, run: str) -> list[int]:
    with Store.open(db, read_only=True) as st:
        return [
            r["dur_ps"]
            for r in st.rows(
                "SELECT dur_ps FROM step_times JOIN runs USING (run_id) WHERE name = ? ORDER BY step", [run]
            )
        ]


@pytest.mark.parametrize("run,run_dir", [("host_bound", HOST_BOUND), ("prefetched", PREFETCHED)])
def test_step_times_match_the_wall_times_the_script_measured(store, run, run_dir):
    walls = _walls(run_dir)
    got = _step_ps(store, run)
    assert len(got) == len(walls) == 16
    for ps, wall_s in zip(got, walls, strict=True):
        assert ps / 1e12 == pytest.approx(wall_s, rel=0.05)


def test_two_hosts_import_as_one_run_with_both_hosts(store):
    with Store.open(store, read_only=True) as st:
        (run,) = st.rows("SELECT * FROM runs WHERE name = 'two_hosts'")
        tracks = st.rows("SELECT DISTINCT plane, kind, chip FROM tracks WHERE run_id = ?", [run["run_id"]])
    want = sum(
        len(ln.events)
        for h in ("host0", "host1")
        for p in read_space(os.path.join(TWO_HOSTS, f"{h}.xplane.pb")).planes
        for ln in p.lines
    )
    assert run["events"] <= want and run["events"] > want * 0.9  # markers only (StepTraceAnnotation) are steps
    assert {(t["plane"], t["kind"], t["chip"]) for t in tracks if t["kind"] == "cpu"} == {
        ("host0 /host:CPU", "cpu", 0),
        ("host1 /host:CPU", "cpu", 1),
    }
    assert {t["plane"] for t in tracks} >= {"host0 /host:CPU", "host1 /host:CPU"}
    # a step ends when its slowest host's does: each step within 5% of the slower host's wall time
    walls = [max(a, b) for a, b in zip(_walls(TWO_HOSTS, "host0"), _walls(TWO_HOSTS, "host1"), strict=True)]
    for ps, wall_s in zip(_step_ps(store, "two_hosts"), walls, strict=True):
        assert ps / 1e12 == pytest.approx(wall_s, rel=0.05)


def _intervals_with(space, pred) -> list[tuple[int, int]]:
    """(start_ps, end_ps) after T0 of the events of `space` for which pred(plane, line, event, stat names)."""
    out = []
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        meta = plane.event_metadata
        for ln in plane.lines:
            for e in ln.events:
                stats = {names.get(s.metadata_id) for s in e.stats} | {
                    names.get(s.metadata_id) for s in meta[e.metadata_id].stats
                }
                if pred(plane, ln, e, meta[e.metadata_id].name, stats):
                    start = ln.timestamp_ns * 1000 + e.offset_ps
                    out.append((start, start + e.duration_ps))
    return out


def awaited_input_share(path: str) -> float:
    """Plain-Python reference: the share of the counted steps (all but the first and last host step) that
    the device (events with XLA op stats) sat idle until an input event (preprocess_batch) that ended in
    the idle gap: per gap, from the first such event's start (or the gap's) to the last one's end."""
    space = read_space(path)
    steps = sorted(_intervals_with(space, lambda p, ln, e, name, stats: "step_num" in stats))
    device = sorted(_intervals_with(space, lambda p, ln, e, name, stats: bool({"hlo_op", "hlo_module"} & stats)))
    inputs = _intervals_with(space, lambda p, ln, e, name, stats: name == "preprocess_batch")
    waited = total = 0
    for w0, w1 in steps[1:-1]:
        total += w1 - w0
        gaps, cursor = [], w0
        for s, e in device:
            if e <= cursor or s >= w1:
                continue
            if s > cursor:
                gaps.append((cursor, s))
            cursor = max(cursor, e)
        if cursor < w1:
            gaps.append((cursor, w1))
        for g0, g1 in gaps:
            ending = [(s, e) for s, e in inputs if g0 < e <= g1]
            if ending:
                waited += max(e for _, e in ending) - max(g0, min(s for s, _ in ending))
    return waited / total


def test_host_bound_run_gets_the_finding_with_the_measured_share(store, capsys):
    report = _json(capsys, "analyze", "host_bound", "--db", store, "--json")
    (f,) = [f for f in report["findings"] if f["rule"] == "host_bound"]
    want = awaited_input_share(os.path.join(HOST_BOUND, "host0.xplane.pb"))
    assert want > 0.3
    assert f["value"] == pytest.approx(want, abs=0.01)
    assert f["severity"] == "critical" and "Prefetch" in f["recommendation"]
    assert any(e["name"] == "preprocess_batch" for e in f["evidence"]["host_input_events"])
    share = report["figures"]["breakdown"]["share"]
    assert share["device_compute"] > 0.3 and share["host_preprocess"] > 0.3


def test_prefetched_run_is_not_host_bound_and_compare_says_improved(store, capsys):
    report = _json(capsys, "analyze", "prefetched", "--db", store, "--json")
    assert not [f for f in report["findings"] if f["rule"] == "host_bound"]
    assert awaited_input_share(os.path.join(PREFETCHED, "host0.xplane.pb")) < 0.05
    c = _json(capsys, "compare", "host_bound", "prefetched", "--db", store, "--json")
    st = c["step_time"]
    assert st["verdict"] == "improved"
    assert st["ci_high"] < 0  # the 95% CI of the change excludes zero
    # per-op deltas include the device's XLA ops
    assert any(op["track_kind"] == "cpu" for op in c["ops"])


def test_a_capture_missing_stats_still_finds_its_cpu_device(store):
    with Store.open(store, read_only=True) as st:
        kinds = {
            r["name"]: r["k"]
            for r in st.rows(
                "SELECT name, list(DISTINCT kind ORDER BY kind) AS k FROM tracks JOIN runs USING (run_id) GROUP BY name"
            )
        }
        wide = st.rows(
            "SELECT DISTINCT int_value FROM event_args JOIN runs USING (run_id) "
            "WHERE name = 'drift' AND key = 'program_id'"
        )
        hlo_op = st.rows(
            "SELECT count(*) AS n FROM event_args JOIN runs USING (run_id) WHERE name = 'drift' AND key = 'hlo_op'"
        )[0]["n"]
    assert hlo_op == 0 and kinds["drift"] == kinds["prefetched"] == ["cpu", "host"]
    assert wide and all(r["int_value"] >= 1 << 31 for r in wide)  # ids beyond 2**31 kept exactly
    assert _step_ps(store, "drift") == _step_ps(store, "prefetched")


def gpu_space(steps: int = 6, input_ps: int = 8_000_000_000, kernel_ps: int = 2_000_000_000):
    """A host loop of `steps` steps: read input for input_ps, copy it to GPU 0 (1 µs), run one kernel."""
    from profiler.xspace import xplane_pb2 as xp

    space = xp.XSpace(hostnames=["gpuhost"])
    host = PlaneBuilder(space, 1, "/host:CPU")
    gpu = PlaneBuilder(space, 2, "/device:GPU:0")
    loop = host.line(1, "python")
    compute = gpu.line(1, "Stream #13(Compute)")
    copies = gpu.line(2, "Stream #14(MemcpyH2D)")
    t = 0
    step_ps = input_ps + 1_000_000 + kernel_ps + 10_000
    for s in range(steps):
        host.event(loop, "train", t, step_ps, step_num=s)
        host.event(loop, "next_batch", t, input_ps)
        host.event(loop, "cuLaunchKernel", t + input_ps + 1_000_000, 5_000)
        gpu.event(copies, "MemcpyH2D", t + input_ps, 1_000_000)
        gpu.event(compute, "fusion_kernel", t + input_ps + 1_000_000, kernel_ps)
        t += step_ps
    return space


def test_a_gpu_capture_gets_device_tracks_steps_and_the_host_bound_finding(tmp_path, capsys):
    path = str(tmp_path / "gpu.xplane.pb")
    with open(path, "wb") as f:
        f.write(gpu_space().SerializeToString())
    db = str(tmp_path / "g.duckdb")
    assert main(["ingest", path, "--db", db, "--name", "gpu"]) == 0
    with Store.open(db, read_only=True) as st:
        tracks = {r["line"]: (r["kind"], r["chip"]) for r in st.rows("SELECT * FROM tracks")}
        cats = {r["name"]: r["category"] for r in st.rows("SELECT DISTINCT name, category FROM slices")}
        steps = {
            r["name"]: r["s"]
            for r in st.rows("SELECT name, list(DISTINCT step ORDER BY step) s FROM slices GROUP BY name")
        }
    assert tracks["Stream #13(Compute)"] == tracks["Stream #14(MemcpyH2D)"] == ("gpu", 0)
    assert tracks["python"] == ("host", -1)
    assert (cats["fusion_kernel"], cats["MemcpyH2D"], cats["next_batch"], cats["cuLaunchKernel"]) == (
        "device_compute",
        "host_to_device",
        "host_preprocess",
        "host_launch",
    )
    assert steps["fusion_kernel"] == list(range(6))  # device work takes its host step
    report = _json(capsys, "analyze", "gpu", "--db", db, "--json")
    b = report["figures"]["breakdown"]
    step_ps = 8_000_000_000 + 1_000_000 + 2_000_000_000 + 10_000
    assert b["step_ps_mean"] == pytest.approx(step_ps)  # the host's step, not the device's busy time
    assert b["share"]["device_compute"] == pytest.approx(2_000_000_000 / step_ps)
    assert b["share"]["host_preprocess"] == pytest.approx(8_000_000_000 / step_ps)
    (f,) = [f for f in report["findings"] if f["rule"] == "host_bound"]
    assert f["value"] == pytest.approx(8_000_000_000 / step_ps)


def test_a_tpu_pod_capture_is_one_run_with_chips_numbered_across_hosts(tmp_path, capsys):
    from tests.xplane.synth import tpu_space

    run_dir = tmp_path / "plugins" / "profile" / "pod"
    run_dir.mkdir(parents=True)
    for h in range(2):
        space = tpu_space(steps=3)
        space.hostnames[:] = [f"tpu-host-{h}"]
        (run_dir / f"tpu-host-{h}.xplane.pb").write_bytes(space.SerializeToString())
    db = str(tmp_path / "p.duckdb")
    assert main(["ingest", str(run_dir), "--db", db, "--name", "pod"]) == 0
    with Store.open(db, read_only=True) as st:
        chips = {
            (r["plane"], r["kind"], r["chip"], r["core"])
            for r in st.rows(
                "SELECT DISTINCT plane, kind, chip, core FROM tracks WHERE kind IN ('tensorcore', 'sparsecore')"
            )
        }
        (run,) = st.rows("SELECT * FROM runs")
    # each host has chip 0 with its TensorCore and two SparseCores: host 1's becomes chip 1
    assert chips == {
        (f"tpu-host-{h} /device:TPU:0{sc}", kind, h, core)
        for h in range(2)
        for sc, kind, core in (
            ("", "tensorcore", 0),
            (" SparseCore 0", "sparsecore", 0),
            (" SparseCore 1", "sparsecore", 1),
        )
    }
    assert run["num_chips"] == 2
    report = _json(capsys, "analyze", "pod", "--db", db, "--json")
    assert report["figures"]["breakdown"]["steps"] == 3


def test_per_op_changes_carry_a_95_interval_computed_as_by_hand(store, capsys):
    import math
    import statistics

    c = _json(capsys, "compare", "host_bound", "prefetched", "--db", store, "--json")
    op = next(o for o in c["ops"] if o["name"] == "train")
    with Store.open(store, read_only=True) as st:

        def samples(run: str) -> list[float]:  # the op's time in each counted step (0 where it does not run)
            steps = [
                r["step"]
                for r in st.rows(
                    "SELECT step FROM step_times JOIN runs USING (run_id) WHERE name = ? AND counted ORDER BY step",
                    [run],
                )
            ]
            per = {
                r["step"]: r["ps"]
                for r in st.rows(
                    "SELECT step, sum(dur_ps)::DOUBLE AS ps FROM slices JOIN runs USING (run_id) "
                    "WHERE runs.name = ? AND slices.name = 'train' AND track_kind = 'host' GROUP BY step",
                    [run],
                )
            }
            return [per.get(s, 0.0) for s in steps]

        b, p = samples("host_bound"), samples("prefetched")
    mb, mp = statistics.fmean(b), statistics.fmean(p)
    # the delta method on the log ratio of the means, with a Welch t quantile (scipy's)
    tdist = pytest.importorskip("scipy.stats").t
    a, c = statistics.variance(b) / (len(b) * mb * mb), statistics.variance(p) / (len(p) * mp * mp)
    df = (a + c) ** 2 / (a * a / (len(b) - 1) + c * c / (len(p) - 1))
    half = tdist.ppf(0.975, df) * math.sqrt(a + c)
    assert op["base_ps_per_step"] == pytest.approx(mb) and op["cand_ps_per_step"] == pytest.approx(mp)
    assert op["ci_low"] == pytest.approx(math.exp(math.log(mp / mb) - half) - 1, rel=1e-6)
    assert op["ci_high"] == pytest.approx(math.exp(math.log(mp / mb) + half) - 1, rel=1e-6)
    assert op["change"] == "faster" and op["ci_high"] < 0

"""The corpus of real captures made elsewhere (tests/data/wild/<capture>/, each with its
PROVENANCE.md): every capture goes ingest -> analyze -> compare (every pair) -> both exports ->
re-ingest without an internal error, and its figures agree with XProf's CLI on the same file.

The corpus is read from the folder, so a capture added there (an XSpace logdir or file, or a
trace another importer reads) is tested too. References are independent of scprof: XProf's CLI
(`xprof`, a test extra) run in a subprocess on a copy of the capture, and the raw XSpace read
with the official protobuf classes. Tolerances (docs/benchmarks.md, "Real captures"):
- device count: equal (empty device planes are chips);
- step time: XProf's `steptime_ms_average` (printed with one or two decimals, ms) against
  scprof's mean over its counted steps (run_list.mean_step_ps), within 0.05 ms;
- idle: XProf's `device_idle_time_percent` (one decimal) against utilization.idle_share,
  within 0.1 percentage point (TPU and GPU; XProf reports 0% for a CPU device, which it does
  not measure);
- top ops (self time): XProf's top four ops by time and scprof's are the same ops, and their
  summed self time agrees within 1% (per op the two part: XProf's op time is the device's
  `device_duration_ps` stat, scprof's the event on the timeline; that stat, kept as an event
  argument, sums to XProf's figure within 1e-6);
- bound by: equal where XProf says HBM or Compute.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import shutil
import subprocess
import sys

import pytest

from profiler.store import Store
from scprof.cli import main
from tests.tracekit import missing_extra
from tests.xplane.helpers import DATA, read_space

WILD = os.path.join(DATA, "wild")
CAPTURES = sorted(d for d in os.listdir(WILD) if os.path.isdir(os.path.join(WILD, d)))
XPROF = shutil.which("xprof") or os.path.join(os.path.dirname(sys.executable), "xprof")
DEVICE_KINDS = ("tensorcore", "sparsecore", "gpu", "device")


def ingest_path(name: str) -> str:
    """What `scprof ingest` is given: the capture's folder when it is a logdir, else its one trace file."""
    folder = os.path.join(WILD, name)
    if os.path.isdir(os.path.join(folder, "plugins", "profile")):
        return folder
    (trace,) = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f != "PROVENANCE.md"]
    return trace


def xplane_files(name: str) -> list[str]:
    folder = os.path.join(WILD, name)
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".xplane.pb"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("wild") / "s.duckdb")
    for name in CAPTURES:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(["ingest", ingest_path(name), "--db", db, "--name", name]) == 0, name
        assert "without its analysis" not in err.getvalue(), err.getvalue()
    return db


def test_every_capture_has_its_provenance():
    for name in CAPTURES:
        with open(os.path.join(WILD, name, "PROVENANCE.md")) as f:
            text = f.read()
        assert "Licence" in text or "Made here" in text, name


@pytest.mark.parametrize("name", CAPTURES)
def test_analyze_exports_and_reingest_never_fail(store, name, capsys, tmp_path):
    rc, out, err = run(capsys, "analyze", name, "--db", store, "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["run"]["name"] == name
    out = tmp_path / "logdir" / "plugins" / "profile" / "export"  # XProf's logdir layout
    out.mkdir(parents=True)
    for fmt, suffix in (("perfetto", "pftrace"), ("xspace", "xplane.pb")):
        path = str(out / f"{name}.{suffix}")
        rc, _, err = run(capsys, "export", fmt, name, "-o", path, "--db", store)
        assert rc == 0, err
    # a capture of several hosts exports one file per host, named as its own (XProf names hosts by file)
    exported = sorted(str(p) for p in out.glob("*.xplane.pb"))
    assert exported and all(os.path.getsize(p) > 0 for p in exported) and (out / f"{name}.pftrace").stat().st_size
    again = str(tmp_path / "again.duckdb")
    rc, _, err = run(capsys, "ingest", str(tmp_path / "logdir"), "--db", again, "--name", name)
    assert rc == 0, err
    rc, _, err = run(capsys, "analyze", name, "--db", again, "--json")
    assert rc == 0, err


@pytest.mark.parametrize("base,cand", list(itertools.permutations(CAPTURES, 2)))
def test_compare_every_pair_never_fails(store, base, cand, capsys):
    rc, out, err = run(capsys, "compare", base, cand, "--db", store, "--json")
    assert rc in (0, 2), err
    if rc == 2:  # what the comparison cannot do, said in one line
        assert len(err.strip().splitlines()) == 1 and err.startswith("scprof: "), err
    else:
        json.loads(out)


@pytest.mark.parametrize("name", CAPTURES)
def test_runs_step_times_and_reports_agree_on_the_steps(store, name, capsys):
    rc, out, _ = run(capsys, "runs", "--db", store, "--json")
    (row,) = [r for r in json.loads(out) if r["name"] == name]
    with Store.open(store, read_only=True) as st:
        steps = st.rows("SELECT s.* FROM step_times s JOIN runs USING (run_id) WHERE name = ? ORDER BY step", [name])
        chip_steps = st.rows("SELECT c.* FROM chip_steps c JOIN runs USING (run_id) WHERE name = ?", [name])
    assert row["steps"] == len(steps)
    for s in steps:  # a step's window is one chip's step: an interval of the trace
        assert any(
            c["step"] == s["step"] and c["start_ps"] == s["start_ps"] and c["dur_ps"] == s["dur_ps"] for c in chip_steps
        ), s


@pytest.mark.parametrize("name", [n for n in CAPTURES if xplane_files(n)])
def test_every_device_plane_is_a_chip(store, name):
    want = set()
    files = xplane_files(name)
    for f in files:
        space = read_space(f)
        want |= {(f, p.name) for p in space.planes if p.name.startswith("/device:")}
    with Store.open(store, read_only=True) as st:
        (run_row,) = st.rows("SELECT * FROM runs WHERE name = ?", [name])
        planes = st.rows(
            "SELECT DISTINCT plane FROM tracks WHERE run_id = ? AND list_contains(?, kind)",
            [run_row["run_id"], list(DEVICE_KINDS)],
        )
    assert len(planes) == len(want)
    if want:
        assert run_row["num_chips"] == len({p for p in want if " SparseCore" not in p[1]})


# --------------------------------------------------------------------------- XProf parity
@pytest.fixture(scope="module")
def xprof(tmp_path_factory):
    """name -> {tool: XProf's JSON} on a copy of each XSpace capture (XProf writes caches beside it)."""
    if not os.path.exists(XPROF):
        missing_extra("xprof CLI not installed (test extra `xprof`; run `make install-test`)")
    out = {}
    for name in CAPTURES:
        files = xplane_files(name)
        if not files:
            continue
        run_dir = tmp_path_factory.mktemp(name)
        for f in files:
            shutil.copyfile(f, run_dir / os.path.basename(f))
        session = f"--session_id={run_dir}"
        out[name] = {
            tool: _xprof(tool, session, *extra)
            for tool, extra in (("get_overview", ["--bypass_cache=True"]), ("get_top_hlo_ops", ["--limit=10"]))
        }
    return out


def _xprof(*args: str) -> dict:
    done = subprocess.run([XPROF, *args], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout[done.stdout.index("{") :])


def _report(store: str, name: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["analyze", name, "--db", store, "--json"]) == 0
    return json.loads(out.getvalue())


def parity(store: str, name: str, xprof_out: dict) -> dict:
    """The figures of one capture, scprof's and XProf's side by side (the docs' table)."""
    ov = xprof_out["get_overview"]
    summary, env = ov["performance_summary"], ov["run_environment"]
    report = _report(store, name)
    util = report["figures"].get("utilization", {})
    with Store.open(store, read_only=True) as st:
        (r,) = st.rows("SELECT * FROM run_list WHERE name = ?", [name])
        steps = [
            x["dur_ps"]
            for x in st.rows("SELECT dur_ps FROM step_times JOIN runs USING (run_id) WHERE name = ?", [name])
        ]
        kind = util.get("device_kind")
        top = st.rows(
            """SELECT o.name, sum(o.self_ps)::DOUBLE AS self_ps FROM op_self_times o JOIN runs USING (run_id)
               JOIN op_tracks t USING (run_id, track_id) WHERE runs.name = ? AND t.track_kind = ? AND t.chip >= 0
               GROUP BY 1 ORDER BY 2 DESC LIMIT 4""",
            [name, kind],
        )
        dev_ps = {
            x["name"]: x["ps"]
            for x in st.rows(
                """SELECT s.value AS name, sum(a.int_value)::DOUBLE AS ps FROM event_args a JOIN events e USING (run_id, event_id)
               JOIN strings s ON s.run_id = e.run_id AND s.string_id = e.name_id JOIN runs ON runs.run_id = a.run_id
               WHERE runs.name = ? AND a.key = 'device_duration_ps' GROUP BY 1""",
                [name],
            )
        }
    x_top = [o for o in xprof_out["get_top_hlo_ops"]["top_by_time"] if o["category"] != "IDLE"][:4]
    return {
        "devices": (r["num_chips"], int(env["device_core_count"])),
        "device_type": env["device_type"],
        "steps": len(steps),
        "step_ms": ((r["mean_step_ps"] or 0.0) / 1e9, float(summary["steptime_ms_average"])),
        "idle": (util.get("idle_share"), summary.get("device_idle_time_percent")),
        "bound_by": (util.get("bound_by"), summary.get("bound_by")),
        "top": ([t["name"] for t in top], [o["name"].rsplit("/", 1)[-1] for o in x_top]),
        "top_ms": (sum(t["self_ps"] for t in top) / 1e9, sum(o["total_self_time_ms"] for o in x_top)),
        "top_device_ms": {
            o["name"].rsplit("/", 1)[-1]: (dev_ps.get(o["name"].rsplit("/", 1)[-1], 0.0) / 1e9, o["total_self_time_ms"])
            for o in x_top
        },
    }


@pytest.mark.parametrize("name", [n for n in CAPTURES if xplane_files(n)])
def test_figures_agree_with_xprof(store, xprof, name):
    p = parity(store, name, xprof[name])
    print(name, json.dumps(p))
    ours, theirs = p["devices"]
    if p["device_type"] != "CPU":  # XProf counts no CPU device cores (0); scprof's is the host's CPU device
        assert ours == theirs
    assert p["step_ms"][0] == pytest.approx(p["step_ms"][1], abs=0.05)
    idle, x_idle = p["idle"]
    if x_idle is not None and p["device_type"] != "CPU":
        assert idle * 100 == pytest.approx(float(x_idle.rstrip("%")), abs=0.1)
    if p["bound_by"][1] in ("HBM", "Compute"):
        assert p["bound_by"][0].lower() == p["bound_by"][1].lower()
    ours_top, x_top = p["top"]
    if x_top:
        assert set(ours_top) == set(x_top)
        assert p["top_ms"][0] == pytest.approx(p["top_ms"][1], rel=0.01)
        for op, (dev_ms, x_ms) in p["top_device_ms"].items():
            assert dev_ms == pytest.approx(x_ms, rel=1e-6), op


def test_async_windows_of_the_async_line_are_xprofs(store, tmp_path):
    """The TPU capture's `Async XLA Ops` windows (TPU:0) against XProf's analyze_async_overlap."""
    name = "tpu_v6e_inference"
    assert name in CAPTURES, "the committed TPU v6e capture is missing from tests/data/wild"
    if not os.path.exists(XPROF):
        missing_extra("xprof CLI not installed (test extra `xprof`; run `make install-test`)")
    shutil.copyfile(ingest_path(name), tmp_path / "h.xplane.pb")  # XProf writes its cache beside the capture
    got = _xprof("analyze_async_overlap", f"--session_id={tmp_path}", "--bypass_cache=True")
    x = got["by_plane"]["/device:TPU:0"]
    assert x["window_source"] == "Async XLA Ops"
    with Store.open(store, read_only=True) as st:
        (r,) = st.rows(
            """SELECT count(*) AS n, sum(dur_ps) AS span, sum(exposed_ps) AS exposed,
                      count(*) FILTER (WHERE hidden_ps >= 0.9 * dur_ps) AS hidden,
                      count(DISTINCT a.name) AS names
               FROM async_spans a JOIN runs USING (run_id) WHERE runs.name = ? AND plane = '/device:TPU:0'""",
            [name],
        )
        ops = st.rows(
            "SELECT count(*) AS n FROM op_tracks t JOIN runs USING (run_id) "
            "WHERE runs.name = ? AND line = 'Async XLA Ops'",
            [name],
        )
    assert (r["n"], r["span"], r["exposed"], r["hidden"]) == (x["count"], x["span_ps"], x["exposed_ps"], x["hidden"])
    assert r["names"] == 6  # copy-start .. copy-start.5, not one "async-copy"
    assert ops[0]["n"] == 0  # async windows are no ops: not op time, not busy time

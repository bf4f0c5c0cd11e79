"""XProf itself reads an exported run: `xprof list_xplane_lines` and `xprof get_overview`.

Runs the `xprof` CLI (test extra) in a subprocess on a logdir holding the exported
file, and checks XProf's average step time against the run's step markers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from exporters.xspace import export_run
from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_traces

XPROF = shutil.which("xprof") or os.path.join(os.path.dirname(sys.executable), "xprof")
HAVE_XPROF = os.path.exists(XPROF)

pytestmark = pytest.mark.skipif(
    not HAVE_XPROF, reason="xprof CLI not installed (test extra `xprof`; run `make install-test`)"
)


def _xprof(*args: str) -> dict:
    out = subprocess.run([XPROF, *args], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout[out.stdout.index("{") :])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xprof")
    trace, db = str(tmp / "run.sctrace"), str(tmp / "s.duckdb")
    write_synthetic_trace(trace, 4000, chips=2, scs=2)
    run_dir = tmp / "logdir" / "plugins" / "profile" / "run1"
    run_dir.mkdir(parents=True)
    with Store.open(db) as st:
        (r,) = ingest_traces(st, [trace])
        export_run(st, r.run_id, str(run_dir / "scprof.xplane.pb"), None, True)
        markers = st.rows("SELECT avg(dur_ps) / 1e9 AS ms FROM steps")[0]["ms"]
        planes = {x["plane"]: x["n"] for x in st.rows("SELECT plane, count(*) n FROM slices GROUP BY 1")}
    return run_dir, markers, planes


def test_list_xplane_lines_sees_every_plane(exported):
    run_dir, _, planes = exported
    got = _xprof("list_xplane_lines", f"--session_id={run_dir}")
    counts = {p["name"]: p["total_events"] for p in got["planes"]}
    for plane, n in planes.items():
        assert counts[plane] >= n  # + step markers on the Steps lines


def test_overview_step_time_agrees_within_1_percent(exported):
    run_dir, marker_ms, _ = exported
    got = _xprof("get_overview", f"--session_id={run_dir}", "--bypass_cache=True")
    summary = got["performance_summary"]
    assert got["run_environment"]["device_type"] == "TPU v5p"
    assert float(summary["steptime_ms_average"]) == pytest.approx(marker_ms, rel=0.01)

"""`scprof record`: names are data (never paths), nothing it did not make is destroyed, a
killed or interrupted record leaves a partial trace that ingests with --allow-truncated."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from profiler.reader import read_trace
from profiler.trace_file import Cut, iter_chunks
from sim_backend.recording.record import PARTIAL_FILE, TRACE_FILE, record_run
from tests.sim_backend.conftest import CONFIG_DIR, SMALL
from tests.sim_backend.test_sim_record import small_file
from tests.tracekit import assert_one_error, cli, snapshot

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def small(tmp_path) -> str:
    """The small workload (2 chips) as a config file named `small`, 3 steps."""
    raw = copy.deepcopy(SMALL)
    raw["steps"] = 3
    return small_file(tmp_path, raw)


def test_a_refused_record_leaves_the_existing_trace_and_store_untouched(capsys, tmp_path, small):
    db = tmp_path / "s.duckdb"
    out = tmp_path / "x"
    trace_path = out / "x" / TRACE_FILE  # --out DIR: the run's folder is DIR/<name>/
    assert cli(capsys, "record", small, "--name", "x", "--out", out, "--db", db).code == 0
    trace = trace_path.read_bytes()
    before = snapshot(db)
    # same name, other settings (so another trace): refused before anything is written
    got = cli(capsys, "record", small, "--name", "x", "--steps", "2", "--out", out, "--db", db)
    assert_one_error(got, "already holds a run named 'x'", "--replace")
    assert trace_path.read_bytes() == trace
    assert sorted(os.listdir(out)) == ["x"] and sorted(os.listdir(out / "x")) == [TRACE_FILE]
    assert snapshot(db) == before
    # with --replace it goes through: one run, the new trace
    assert cli(capsys, "record", small, "--name", "x", "--steps", "2", "--out", out, "--db", db, "--replace").code == 0
    assert trace_path.read_bytes() != trace
    assert [r[2] for r in snapshot(db)["runs"]] == ["x"]


def test_records_with_one_out_get_sibling_folders(capsys, tmp_path, small):
    """--out is the parent of the runs' folders, as runs/ is: a sweep script that passes the same
    --out to every point works (before: the second point was refused, its trace would have
    overwritten the first's)."""
    db, out = tmp_path / "s.duckdb", tmp_path / "sweep"
    for name in ("p1", "p2"):
        got = cli(capsys, "record", small, "--name", name, "--steps", "2", "--out", out, "--db", db)
        assert got.code == 0, got.err
        assert f"trace: {out / name / TRACE_FILE}" in got.out
    assert sorted(os.listdir(out)) == ["p1", "p2"]
    assert all(os.listdir(out / name) == [TRACE_FILE] for name in ("p1", "p2"))
    assert [(r[2], r[4]) for r in snapshot(db)["runs"]] == [(n, str(out / n / TRACE_FILE)) for n in ("p1", "p2")]


def test_the_trace_of_another_stored_run_is_not_overwritten(capsys, tmp_path, small):
    db = tmp_path / "s.duckdb"
    out = tmp_path / "shared"
    # stored run 'a' (another run: 2 steps) has its trace where run 'b' recorded with this --out would write
    other = tmp_path / "other.duckdb"
    assert cli(capsys, "record", small, "--name", "b", "--steps", "2", "--out", out, "--db", other).code == 0
    assert cli(capsys, "ingest", out / "b" / TRACE_FILE, "--name", "a", "--db", db).code == 0
    trace = (out / "b" / TRACE_FILE).read_bytes()
    before = snapshot(db)
    got = cli(capsys, "record", small, "--name", "b", "--out", out, "--db", db, "--replace")
    assert_one_error(got, "is the trace of stored run 'a'")
    assert (out / "b" / TRACE_FILE).read_bytes() == trace and snapshot(db) == before


def test_the_store_itself_is_not_a_trace_target(capsys, tmp_path, small):
    out = tmp_path / "o"
    (out / "small").mkdir(parents=True)
    db = out / "small" / TRACE_FILE
    got = cli(capsys, "record", small, "--out", out, "--db", db)
    assert_one_error(got, "would overwrite the store")
    assert sorted(os.listdir(out / "small")) == []


@pytest.mark.parametrize("name", ["../../../../escape/x", "..", "a/b\\c", "tab\tnew\nline\x1b[31m"])
def test_names_are_data_not_paths(capsys, tmp_path, monkeypatch, small, name):
    """A hostile run name (--name or the config's `name`) stays the run's name in the store;
    its default folder is one safe component under runs/, and nothing lands elsewhere."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    db = tmp_path / "s.duckdb"
    (tmp_path / "cfg").mkdir()
    via_config = small_file(tmp_path / "cfg", {**copy.deepcopy(SMALL), "name": name, "steps": 2})
    for argv in (["record", via_config], ["record", small, "--name", name]):
        got = cli(capsys, *argv, "--db", db, "--replace")
        assert got.code == 0, got.err
        assert sorted(os.listdir(work)) == ["runs"]
        (folder,) = os.listdir(work / "runs")
        assert sorted(os.listdir(work / "runs" / folder)) == [TRACE_FILE]
        assert read_trace(str(work / "runs" / folder / TRACE_FILE)).header.run_name == name
        assert [r[2] for r in snapshot(db)["runs"]] == [name]
    assert sorted(os.listdir(tmp_path)) == ["cfg", "s.duckdb", "small.toml", "work"]


def test_out_that_is_a_file_is_one_line(capsys, tmp_path, small):
    target = tmp_path / "file"
    target.write_text("keep me")
    for out in (target, target / "sub"):
        assert_one_error(cli(capsys, "record", small, "--out", out, "--db", tmp_path / "s.duckdb"), str(out))
    assert target.read_text() == "keep me" and not (tmp_path / "s.duckdb").exists()


def test_out_that_cannot_be_written_is_one_line(capsys, tmp_path, monkeypatch, small):
    real_open = os.open

    def no_partials(path, *args, **kw):  # what a read-only folder does (root ignores chmod)
        if str(path).endswith(".partial"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", no_partials)
    got = cli(capsys, "record", small, "--out", tmp_path / "ro", "--db", tmp_path / "s.duckdb")
    assert_one_error(got, "--out", "cannot write there", "Permission denied")


def test_failed_runs_are_stored_as_failed_with_their_trace(capsys, tmp_path):
    """An HBM OOM found part-way (header tags rewritten at the end) and a compile error:
    exit 2, the run stored with status failed, no partial file left."""
    db = tmp_path / "s.duckdb"
    baseline = os.path.join(CONFIG_DIR, "baseline.toml")
    oom = ["--set", "hardware.hbm_bytes=52520000000", "--steps", "3"]
    for argv, kind in (
        ([baseline, *oom, "--name", "oom"], "hbm_oom"),
        ([os.path.join(CONFIG_DIR, "spmem_overflow.toml"), "--name", "spmem"], "spmem_overflow"),
    ):
        out = tmp_path / kind / argv[-1]  # --out DIR: DIR/<name>/
        got = cli(capsys, "record", *argv, "--out", out.parent, "--db", db)
        assert got.code == 2 and str(out / TRACE_FILE) in got.err
        assert sorted(os.listdir(out)) == [TRACE_FILE]
        tags = read_trace(str(out / TRACE_FILE)).header.tags
        assert tags["status"] == "failed" and tags["failure"] == kind
    runs = snapshot(db)["runs"]
    assert [(r[2], r[7]) for r in runs] == [("oom", "failed"), ("spmem", "failed")]
    assert json.loads(runs[0][23])["failure"] == "hbm_oom"  # tags


def _chunks(path: str) -> int:
    """Complete chunks of a trace being written (0 while it has none)."""
    try:
        return sum(1 for c in iter_chunks(path) if not isinstance(c, Cut))
    except Exception:  # noqa: BLE001 - not even a header yet
        return 0


def _default_sigint() -> None:
    """In the child: Ctrl-C as on a terminal, even where this process ignores it (run in the background)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _record_until(tmp_path, config: str, chunks: int, sig: int) -> tuple[subprocess.Popen, str]:
    """Start `scprof record` on `config` (many steps) and send `sig` once its partial trace
    holds at least `chunks` complete chunks."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "scprof.cli", "record", config, "--steps", "5000", "--out", str(out)]
    proc = subprocess.Popen(
        argv + ["--db", str(tmp_path / "s.duckdb")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    partial = str(out / "small" / PARTIAL_FILE)
    deadline = time.monotonic() + 120
    while _chunks(partial) < chunks:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the partial trace did not grow"
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    return proc, partial


def test_a_killed_record_loses_at_most_the_last_chunk(capsys, tmp_path, small):
    """SIGKILL mid-record: the partial file's complete chunks ingest as a truncated run whose
    ops are exactly the first ops of the same run recorded without interruption."""
    proc, partial = _record_until(tmp_path, small, 12, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "out" / "small" / TRACE_FILE).exists()
    db = tmp_path / "k.duckdb"
    got = cli(capsys, "ingest", partial, "--allow-truncated", "--db", db)
    assert got.code == 0 and "truncated" in got.out
    cut = read_trace(partial, allow_truncated=True)
    ops = _ops(cut)
    steps = sorted(set(cut.data["partition_stats"]["step"].tolist()))
    assert len(ops) > 0 and steps == list(range(len(steps))) and len(steps) >= 50

    # the same run, in this process, stopped well after the kill point: same first ops
    def stop(done: int, total: int) -> None:
        if done == len(steps) + 60:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as again:
        record_run(small, [], None, 5000, str(tmp_path / "again"), progress=stop)
    ref = _ops(read_trace(again.value.partial_path, allow_truncated=True))
    assert len(ref) > len(ops) and ref[: len(ops)] == ops


def _ops(tr) -> list[tuple]:
    """Op events in file order: (plane, line, name, start, dur, step)."""
    ev = tr.data["events"]
    tracks = {t.id: (t.plane, t.line) for t in tr.tracks}
    names = np.array(tr.strings, dtype=object)
    rows = zip(
        ev["track"].tolist(),
        ev["name"].tolist(),
        ev["start_ps"].tolist(),
        ev["dur_ps"].tolist(),
        ev["step"].tolist(),
        strict=True,
    )
    return [
        (*tracks[t], names[n], s, d, st) for t, n, s, d, st in rows if tracks[t][1] in ("XLA Ops", "Sparse Core Ops")
    ]


def test_ctrl_c_keeps_the_partial_trace_and_says_how_to_recover_it(capsys, tmp_path, small):
    # past start-up (a Ctrl-C inside a library's import can be swallowed by its bare `except:`)
    proc, partial = _record_until(tmp_path, small, 12, signal.SIGINT)
    err = proc.stderr.read()
    assert proc.returncode == 130, err
    (line,) = err.splitlines()
    assert partial in line and "scprof ingest --allow-truncated" in line
    assert cli(capsys, "ingest", partial, "--allow-truncated", "--db", tmp_path / "c.duckdb").code == 0
    assert not (tmp_path / "out" / "small" / TRACE_FILE).exists()

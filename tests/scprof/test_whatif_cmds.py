"""The what-if commands (`tune`, `analyze --verify`, `compare --attribute`) check everything the
user gave before they write anything: a refusal is exit 2 with one line, and the store file (its
bytes), its whatif_trials table and the folders are as they were. `tune --out DIR` writes only
under DIR. Each case here wrote a trial row, a store, a folder or a file elsewhere (or was exit
1) before the hardening (docs/security.md "What-if trials")."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.recording.record import TRACE_FILE, record_run
from tests.sim_backend.conftest import SMALL
from tests.sim_backend.test_sim_record import small_file
from tests.tracekit import REPO, CliResult, assert_one_error, file_sha256, listing, trial_rows

STEPS = 8  # 6 counted steps: enough for tune's interval, quick to simulate


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with small.toml and store.duckdb holding the emulated run 'small'."""
    root = tmp_path_factory.mktemp("whatif_cmds")
    config = small_file(root, {**copy.deepcopy(SMALL), "steps": STEPS})
    with Store.open(str(root / "store.duckdb")) as store:
        ingest_trace(store, record_run(config, [], None, None, str(root / "rec")).trace_path)
    shutil.rmtree(root / "rec")  # the run's trace is not needed once stored
    return root


@pytest.fixture
def world(stored: Path, tmp_path: Path) -> Path:
    """This test's copy of small.toml and the store; the commands run here."""
    for name in ("small.toml", "store.duckdb"):
        shutil.copyfile(stored / name, tmp_path / name)
    return tmp_path


def scprof(cwd: Path, *argv: str, timeout_s: float = 300) -> CliResult:
    """`python -m scprof.cli argv...` in a child process (the command as a user runs it)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run(
        [sys.executable, "-m", "scprof.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    return CliResult(p.returncode, p.stdout, p.stderr)


def assert_refused_untouched(world: Path, argv: list[str], *needles: str) -> str:
    """Exit 2, one line holding the needles; the store's bytes and the folder's files as they were."""
    before_sha, before_files = file_sha256(world / "store.duckdb"), listing(world)
    line = assert_one_error(scprof(world, *argv), *needles)
    assert file_sha256(world / "store.duckdb") == before_sha, "the refusal changed the store file"
    assert trial_rows(world / "store.duckdb") == 0
    assert listing(world) == before_files, "the refusal wrote files or folders"
    return line


# --set KEY=VALUE that the config refuses: (item, words the one line holds)
BAD_SETS = {
    "nan": ("features.0.zipf_exponent=nan", ["zipf_exponent", "finite"]),
    "inf": ("features.0.zipf_exponent=inf", ["zipf_exponent", "finite"]),
    "-inf": ("hardware.hbm_bandwidth_bytes_per_s=-inf", ["hbm_bandwidth_bytes_per_s", "finite"]),
    "overflows to inf": ("hardware.hbm_bandwidth_bytes_per_s=1e400", ["hbm_bandwidth_bytes_per_s", "finite"]),
    "nan inside a list": ("dense.bottom_mlp=[64, nan]", ["bottom_mlp", "finite"]),
    "negative": ("host.num_threads=-1", ["host.num_threads", "minimum 1"]),
    "zero below the minimum": ("cost.tc_efficiency=0", ["cost.tc_efficiency", "minimum 0.001"]),
    "out of range": ("steps=1000000", ["steps", "maximum 100,000"]),
    "text for a number": ("host.num_threads=abc", ["host.num_threads"]),
    "fraction for a whole number": ("global_batch=1.5", ["global_batch"]),
    "unknown key": ("hardware.no_such_key=1", ["no_such_key", "unknown key"]),
    "unknown table": ("tables.nope.width=8", ["nope"]),
    "empty value": ("host.num_threads=", ["host.num_threads"]),
    "no =": ("host.num_threads", ["--set", "KEY=VALUE"]),
    "empty key": ("=4", ["--set", "KEY=VALUE"]),
}


@pytest.mark.parametrize("target", ["small", "small.toml"])
@pytest.mark.parametrize("case", sorted(BAD_SETS))
def test_a_bad_set_is_refused_before_anything_is_written(world: Path, target: str, case: str) -> None:
    item, needles = BAD_SETS[case]
    argv = ["tune", target, "--set", item, "--db", "store.duckdb", "--workers", "1", "--budget", "1"]
    assert_refused_untouched(world, argv, *needles)


@pytest.mark.parametrize("target", ["small", "small.toml"])
def test_an_empty_scheduler_is_refused(world: Path, target: str) -> None:
    argv = ["tune", target, "--scheduler", "", "--db", "store.duckdb", "--budget", "1"]
    assert_refused_untouched(world, argv, "--scheduler", "empty")


@pytest.mark.parametrize(
    "argv",
    [
        ["tune", "small", "--workers", "1"],
        ["analyze", "small", "--verify"],
        ["compare", "small", "small", "--attribute"],
    ],
    ids=["tune RUN", "analyze --verify", "compare --attribute"],
)
def test_an_absent_store_is_refused_and_not_created(world: Path, argv: list[str]) -> None:
    before = listing(world)
    line = assert_one_error(scprof(world, *argv, "--db", "new.duckdb"), "new.duckdb", "no store here")
    assert "run not found" not in line
    assert listing(world) == before  # no new.duckdb, no WAL, no folder


# --out values that are no folder for runs: (path made in the world, words the one line holds)
BAD_OUTS = {
    "a file": ("small.toml", ["small.toml", "not a folder"]),
    "the store": ("store.duckdb", ["store.duckdb", "DuckDB database"]),
    "under a file": ("small.toml/sub", ["small.toml", "is a file"]),
    "under /proc": ("/proc/scprof-out", ["/proc", "kernel file system"]),
    "empty": ("", ["--out", "empty"]),
}


@pytest.mark.parametrize(
    "command", [["tune", "small"], ["tune", "small.toml"], ["record", "small.toml", "--name", "again"]]
)
@pytest.mark.parametrize("case", sorted(BAD_OUTS))
def test_an_out_that_is_no_folder_is_refused(world: Path, command: list[str], case: str) -> None:
    out, needles = BAD_OUTS[case]
    extra = ["--workers", "1", "--budget", "1"] if command[0] == "tune" else []
    assert_refused_untouched(world, [*command, "--out", out, "--db", "store.duckdb", *extra], "--out", *needles)


def test_tune_config_with_out_writes_only_under_out(tmp_path: Path) -> None:
    """`tune CONFIG --out DIR`: the config's run, the trials and tuned.toml all land in DIR (as
    they land in runs/ by default); nothing else appears in the working directory."""
    config = small_file(tmp_path, {**copy.deepcopy(SMALL), "steps": STEPS})
    work = tmp_path / "work"
    work.mkdir()
    res = scprof(
        work, "tune", config, "--out", "out", "--db", str(tmp_path / "s.duckdb"), "--workers", "1", "--budget", "2"
    )
    assert res.code == 0, res.err
    assert os.listdir(work) == ["out"]
    files = listing(work / "out")
    assert sorted(os.listdir(work / "out")) == ["tuned", "whatif"]
    assert f"whatif/small/{TRACE_FILE}" in files  # the config's run
    assert "tuned/small/tuned.toml" in files and "tuned/small/trials" in files
    assert f"tuned config: {os.path.join('out', 'tuned', 'small', 'tuned.toml')}" in res.out
    assert sorted(os.listdir(tmp_path)) == ["s.duckdb", "small.toml", "work"]

"""Paths a stored run's config names (docs/security.md "What-if trials"): re-simulating a run
(`analyze --verify`, `compare --attribute`, `tune RUN`) never opens such a path without
--trust-paths. The limits file and FDO stats a run was recorded with come from its header; any other
stored path is refused in one line (exit 2) before anything is written; a trusted or user-given path
is read guarded (a FIFO, a device, a symlink to one: one line); a relative --set path is the working
directory's. Before this, a FIFO hung `analyze --verify`, /dev/zero ended in a MemoryError and a
readable file was copied into every trial folder.

Each CLI case runs in a child process with a time and memory limit (the harness's, not an
assertion about speed): a hang or a runaway read shows as a failure, not a stuck suite."""

from __future__ import annotations

import copy
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.recording.record import record_run
from tests.sim_backend.conftest import SMALL
from tests.sim_backend.test_sim_record import small_file
from tests.tracekit import REPO, CliResult, assert_one_error, file_sha256, listing, trial_rows

STEPS = 8
MARKER = "SCPROF-TEST-SECRET-5d1c"
# big and mid stack together (big_mid), tiny is alone; [stacks.big] and [stacks.mid] apply only
# when stacking is off (a file derived for two stackings, as configs/limits/too_few_stacked_limits.toml)
LIMITS = """[stacks.big_mid]
max_ids_per_partition = 2048
max_unique_ids_per_partition = 1024

[stacks.tiny]
max_ids_per_partition = 64
max_unique_ids_per_partition = 8

[stacks.big]
max_ids_per_partition = 1500
max_unique_ids_per_partition = 700
"""
LIMITS_KEY = "flags.xla_sparse_core_max_ids_file"
KINDS = ("a FIFO", "/dev/zero", "a symlink to /dev/zero", "a secret", "a symlink to a secret")
COMMANDS = {
    "analyze --verify": ["analyze", "limited", "--verify"],
    "compare --attribute": ["compare", "small", "limited", "--attribute"],
    "tune RUN": ["tune", "limited", "--budget", "1", "--workers", "1"],
}
CHILD_TIMEOUT_S = 90
CHILD_MEMORY = 3 << 30  # address space: /dev/zero read whole stops here, not at the machine's memory


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """small.toml, the limits file and a store with 'small' and 'limited' (the limits file and
    a shallower prefetch: two changed keys, so --attribute simulates trials)."""
    root = tmp_path_factory.mktemp("untrusted")
    config = small_file(root, {**copy.deepcopy(SMALL), "steps": STEPS})
    (root / "limits.toml").write_text(LIMITS)
    with Store.open(str(root / "store.duckdb")) as store:
        for name, sets in (
            ("small", []),
            ("limited", [f"{LIMITS_KEY}={root / 'limits.toml'}", "flags.maximum_parallel_iterations=1"]),
        ):
            ingest_trace(store, record_run(config, sets, name, None, str(root / name)).trace_path)
            shutil.rmtree(root / name)
    return root


@pytest.fixture
def world(stored: Path, tmp_path: Path) -> Path:
    """This test's working directory (a copy of small.toml and the store); `outside/` beside it
    holds a secret."""
    work = tmp_path / "world"
    work.mkdir()
    for name in ("small.toml", "store.duckdb"):
        shutil.copyfile(stored / name, work / name)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.toml").write_text(f"# {MARKER}\n[stacks.tiny]\nmax_ids_per_partition = 64\n")
    return work


def scprof(cwd: Path, *argv: str) -> CliResult:
    """`python -m scprof.cli argv...` in a child with a time and address-space limit."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))

    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        p = subprocess.run(
            [sys.executable, "-m", "scprof.cli", *argv, "--db", "store.duckdb"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired:
        return CliResult(-1, "", f"(harness) no answer within {CHILD_TIMEOUT_S} s: it hung")
    return CliResult(p.returncode, p.stdout, p.stderr)


def leaked(world: Path) -> list[str]:
    """Files under the world holding the secret's bytes."""
    found = []
    for p in world.rglob("*"):
        if p.is_file() and not p.is_symlink() and MARKER.encode() in p.read_bytes():
            found.append(str(p.relative_to(world)))
    return found


def restore(world: Path, run: str, edit) -> None:
    """Change the stored config of `run` (as a shared store or a hand-made trace could have it)."""
    con = duckdb.connect(str(world / "store.duckdb"))
    try:
        (config,) = con.execute("SELECT config FROM runs WHERE name = ?", [run]).fetchall()[0]
        config = json.loads(config)
        edit(config)
        con.execute("UPDATE runs SET config = ? WHERE name = ?", [json.dumps(config), run])
        con.execute("CHECKPOINT")
    finally:
        con.close()


def hostile(world: Path, kind: str) -> Path:
    """A path where the stored limits file was, holding `kind`."""
    path = world / "lim" / "limits.toml"
    path.parent.mkdir(exist_ok=True)
    secret = world.parent / "outside" / "secret.toml"
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        return Path("/dev/zero")
    elif kind == "a symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "a secret":
        return secret
    elif kind == "a symlink to a secret":
        path.symlink_to(secret)
    elif kind == "a directory":
        path.mkdir()
    else:
        raise ValueError(kind)
    return path


def point_limits(world: Path, path: Path | str, held: bool) -> None:
    """The stored run 'limited' names `path` as its limits file; `held`: the header still holds
    the file's sections (a run recorded by this scprof), else not (an older one, a hand-made trace)."""

    def edit(config: dict) -> None:
        config["flags"]["xla_sparse_core_max_ids_file"] = str(path)
        if not held:
            config["resolved"].pop("limits_file", None)

    restore(world, "limited", edit)


def assert_refused_untouched(world: Path, argv: list[str], *needles: str) -> str:
    """Exit 2, one line holding the needles; the store's bytes and the folder as they were; no leak."""
    before_sha, before_files = file_sha256(world / "store.duckdb"), listing(world)
    line = assert_one_error(scprof(world, *argv), *needles)
    assert file_sha256(world / "store.duckdb") == before_sha, "the refusal changed the store file"
    assert trial_rows(world / "store.duckdb") == 0
    assert listing(world) == before_files, "the refusal wrote files or folders"
    assert not (world / "runs").exists()
    return line


# -- the limits the header holds: nothing is opened, the trials run -------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_limits_file_the_header_holds_is_never_opened(world: Path, command: str, kind: str) -> None:
    """What the stored path now is does not matter: the trials get the limits the run was
    recorded with, from its header; no hang, no MemoryError, no copy of the secret."""
    point_limits(world, hostile(world, kind), held=True)
    res = scprof(world, *COMMANDS[command])
    assert res.code == 0, res.err
    assert not leaked(world)
    written = sorted(world.glob("runs/**/*_limits.toml"))
    assert written, "no trial folder got the run's limits"
    for path in written:
        assert MARKER not in path.read_text() and "[stacks.big]" in path.read_text()


# -- a stored path the store does not hold: refused before anything --------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_stored_path_the_store_does_not_hold_is_refused(world: Path, command: str, kind: str) -> None:
    path = hostile(world, kind)
    point_limits(world, path, held=False)
    line = assert_refused_untouched(world, COMMANDS[command], LIMITS_KEY, str(path), "--trust-paths")
    assert MARKER not in line
    assert not leaked(world)


OTHER_PATHS = {
    "features.f_big.ids_file": lambda c, p: c["features"][0].update(ids_file=p),
    "perf_tables": lambda c, p: c.update(perf_tables=p),
    "flags.fdo_stats_dir": lambda c, p: c["flags"].update(fdo_stats_dir=p),
    "extends": lambda c, p: c.update(extends=p),
}


@pytest.mark.parametrize("command", ["analyze --verify", "tune RUN"])
@pytest.mark.parametrize("key", sorted(OTHER_PATHS))
def test_every_other_stored_path_is_refused(world: Path, key: str, command: str) -> None:
    path = hostile(world, "a FIFO")
    restore(world, "limited", lambda c: OTHER_PATHS[key](c, str(path)))
    assert_refused_untouched(world, COMMANDS[command], key, str(path), "--trust-paths")


def test_a_relative_stored_path_is_refused_too(world: Path) -> None:
    restore(world, "limited", lambda c: OTHER_PATHS["features.f_big.ids_file"](c, "ids.npz"))
    assert_refused_untouched(world, COMMANDS["analyze --verify"], "features.f_big.ids_file", "'ids.npz'")


# -- --trust-paths: read, but guarded ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["a FIFO", "/dev/zero", "a symlink to /dev/zero", "a directory"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_trusted_path_that_is_no_regular_file_is_one_line(world: Path, command: str, kind: str) -> None:
    path = hostile(world, kind)
    point_limits(world, path, held=False)
    assert_refused_untouched(world, [*COMMANDS[command], "--trust-paths"], LIMITS_KEY, str(path))


def test_a_trusted_limits_file_travels_with_the_trials(world: Path, stored: Path) -> None:
    legit = world / "lim.toml"
    legit.write_text(LIMITS.replace("1500", "1499"))
    point_limits(world, legit, held=False)
    assert scprof(world, *COMMANDS["analyze --verify"]).code == 2  # not without the flag
    res = scprof(world, *COMMANDS["analyze --verify"], "--trust-paths")
    assert res.code == 0, res.err
    shipped = sorted(world.glob("runs/whatif/*/origin_limits.toml"))
    assert shipped and all(p.read_text() == legit.read_text() for p in shipped)


# -- the user's own --set --------------------------------------------------------------------------


def test_a_relative_set_path_is_the_working_directorys(world: Path) -> None:
    (world / "rel_limits.toml").write_text(LIMITS)
    res = scprof(world, "tune", "small", "--set", f"{LIMITS_KEY}=rel_limits.toml", "--budget", "1", "--workers", "1")
    assert res.code == 0, res.err
    con = duckdb.connect(str(world / "store.duckdb"), read_only=True)
    try:
        overrides = [json.loads(r[0]) for r in con.execute("SELECT overrides FROM whatif_trials").fetchall()]
    finally:
        con.close()
    assert overrides and all(o[LIMITS_KEY] == str(world / "rel_limits.toml") for o in overrides)


def test_a_set_path_to_a_fifo_is_one_line_before_anything(world: Path) -> None:
    os.mkfifo(world / "fifo.toml")
    argv = ["tune", "small", "--set", f"{LIMITS_KEY}=fifo.toml", "--budget", "1", "--workers", "1"]
    assert_refused_untouched(world, argv, "--set", str(world / "fifo.toml"), "not a regular file")


def test_a_set_replaces_the_stored_path_it_names(world: Path) -> None:
    """tune RUN --set KEY=PATH: the stored path of KEY is never needed, so it is no refusal."""
    point_limits(world, hostile(world, "a FIFO"), held=False)
    (world / "mine.toml").write_text(LIMITS)
    res = scprof(world, "tune", "limited", "--set", f"{LIMITS_KEY}=mine.toml", "--budget", "1", "--workers", "1")
    assert res.code == 0, res.err


# -- in process: the header's limits reproduce the file for any stacking --------------------------


def _session(world: Path, run: str):
    from whatif.engine import Session
    from whatif.executor import Executor

    store = Store.open(str(world / "store.duckdb"))
    return store, Session(store, store.resolve_run(run), "verify", Executor(), root=str(world / "trials"))


def _resolved_limits(store: Store, run_id: int) -> dict:
    (config,) = store.rows("SELECT config FROM runs WHERE run_id = ?", [run_id])
    return json.loads(config["config"])["resolved"]["limits"]


def test_a_trial_that_restacks_gets_the_files_sections_for_its_new_stacks(world: Path) -> None:
    """The header keeps every section of the limits file (not only the stacks the run had), so a
    trial with stacking off gets [stacks.big] as a record with the file would: the file is gone."""
    from whatif.engine import Change

    point_limits(world, world / "gone.toml", held=True)
    store, session = _session(world, "limited")
    with store:
        (m,) = session.measure([Change({"sparsecore.disable_table_stacking": True})], session.origin_run_id)
        assert m.failure is None, m.failure
        limits = _resolved_limits(store, m.run_id)
    assert limits["big"]["max_ids_per_partition"] == 1500 and limits["big"]["source"] == "limits_file"
    assert limits["tiny"]["max_ids_per_partition"] == 64
    assert limits["mid"]["source"] == "default"  # the file has no [stacks.mid]


def test_fdo_stats_the_header_holds_reach_the_trials(world: Path, tmp_path: Path) -> None:
    """A run recorded with flags.fdo_stats_dir keeps the limits the stats gave; its trials get
    them from a stats file the engine writes, after the directory is gone."""
    from whatif.engine import Change

    derived = record_run(
        str(world / "small.toml"),
        ["flags.xla_sparse_core_estimate_max_ids=true"],
        "derive",
        None,
        str(tmp_path / "derive"),
    )
    assert derived.fdo_stats_path
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    shutil.copy(derived.fdo_stats_path, stats_dir)
    with Store.open(str(world / "store.duckdb")) as store:
        run = record_run(
            str(world / "small.toml"), [f"flags.fdo_stats_dir={stats_dir}"], "fdo", None, str(tmp_path / "fdo")
        )
        fdo_id = ingest_trace(store, run.trace_path).run_id
        origin = _resolved_limits(store, fdo_id)
    assert {v["source"] for v in origin.values()} == {"fdo_stats"}
    shutil.rmtree(stats_dir)
    stats_dir.mkdir()
    os.mkfifo(stats_dir / "fdo_stats_0_9.csv")  # a hostile file where the stats were: never opened
    store, session = _session(world, "fdo")
    with store:
        (m,) = session.measure([Change({"host.num_threads": 8})], session.origin_run_id)
        assert m.failure is None, m.failure
        assert _resolved_limits(store, m.run_id) == origin


# -- loading: every path key, --set paths absolute ---------------------------------------------------


def test_config_paths_lists_every_path_key() -> None:
    from sim_backend.config_load import config_paths

    raw = {
        "extends": "b.toml",
        "perf_tables": "t",
        "flags": {"fdo_stats_dir": "d", LIMITS_KEY.split(".")[1]: ""},
        "features": [{"name": "f.x", "ids_file": "i.npz"}, {"ids_file": "j.npz"}],
    }
    keys = [k for k, _, _ in config_paths(raw)]
    assert keys == ["extends", "perf_tables", "flags.fdo_stats_dir", 'features."f.x".ids_file', "features.1.ids_file"]


def test_record_makes_every_set_path_absolute(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--set paths are the working directory's: stored absolute, so a re-simulation elsewhere
    (a trial folder) names the same file."""
    from sim_backend.config_load import load_config

    monkeypatch.chdir(tmp_path)
    cfg = load_config(str(world / "small.toml"), ["flags.fdo_stats_dir=stats", f"{LIMITS_KEY}=lim.toml"])
    assert cfg.flags.fdo_stats_dir == str(tmp_path / "stats")
    assert cfg.flags.xla_sparse_core_max_ids_file == str(tmp_path / "lim.toml")

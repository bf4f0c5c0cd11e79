"""Every user-caused failure is exit 2 with one `scprof: error:` line naming the file or argument,
and leaves the store as it was (no new store either). Each case below was exit 1 (an internal
error), exit 0 (accepted) or a hang before the hardening (docs/security.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.tracekit import REPO, CliResult, assert_one_error, cli, record_small

SMALL_TOML = """name = "small"
steps = 2
global_batch = 256
[hardware]
generation = "v5p"
num_chips = 2
[sparsecore]
max_ids_per_chip_per_sample = 1000
max_ids_per_partition = 4096
max_unique_ids_per_partition = 4096
[[tables]]
name = "big"
vocab = 100000
width = 32
[[features]]
name = "f_big"
table = "big"
multi_hot = 8
distribution = "zipf"
"""


@pytest.fixture
def world(tmp_path):
    """small.toml, a store holding run 'small' (from ./small.sctrace), and assorted bad files."""
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    os.mkdir(tmp_path / "adir")
    (tmp_path / "latin1.toml").write_bytes(b'name = "caf\xe9"\n')
    (tmp_path / "extdir.toml").write_text('extends = "adir"\n')
    (tmp_path / "cyc1.toml").write_text('extends = "cyc2.toml"\n')
    (tmp_path / "cyc2.toml").write_text('extends = "cyc1.toml"\n')
    (tmp_path / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "limits_latin1.toml").write_bytes(b"[tables.big]\nx = '\xe9'\n")
    os.makedirs(tmp_path / "tables_with_dir" / "collectives.json")
    (tmp_path / "tables_with_dir" / "gemm.json").write_text("{}")
    record_small(tmp_path / "small.sctrace")
    from scprof.cli import main

    assert main(["ingest", "small.sctrace", "--db", "store.duckdb"]) == 0
    shutil.copyfile(tmp_path / "store.duckdb", tmp_path / "other.duckdb")
    return tmp_path


def rec(*extra: str) -> list[str]:
    return ["record", "small.toml", "--out", "out", "--db", "new.duckdb", *extra]


def export(fmt: str, out: str, *extra: str) -> list[str]:
    return ["export", fmt, "small", "-o", out, "--db", "store.duckdb", *extra]


# (argv, words the one error line must hold); before: what main did
CASES = {
    # config files (before: exit 1, IsADirectoryError / UnicodeDecodeError / RecursionError)
    "config is a directory": (["record", "adir", "--db", "new.duckdb"], ["adir", "is a directory"]),
    "config not UTF-8": (["record", "latin1.toml", "--db", "new.duckdb"], ["latin1.toml", "not UTF-8"]),
    "config nested too deeply": (["record", "deep.toml", "--db", "new.duckdb"], ["deep.toml", "nested too deeply"]),
    "extends a directory": (["record", "extdir.toml", "--db", "new.duckdb"], ["extdir.toml", "extends 'adir'"]),
    "extends cycle": (["record", "cyc1.toml", "--db", "new.duckdb"], ["cycle: cyc1.toml -> cyc2.toml -> cyc1.toml"]),
    "limits file is a directory": (
        rec("--set", "flags.xla_sparse_core_max_ids_file=adir"),
        ["flags.xla_sparse_core_max_ids_file", "is a directory"],
    ),
    "limits file not UTF-8": (
        rec("--set", "flags.xla_sparse_core_max_ids_file=limits_latin1.toml"),
        ["limits_latin1.toml", "not UTF-8"],
    ),
    "perf-table file is a directory": (rec("--perf-tables", "tables_with_dir"), ["collectives.json", "is a directory"]),
    # values (before: hang, exit 1 MemoryError / ZeroDivisionError / OverflowError, or accepted)
    "--steps 10**20": (rec("--steps", str(10**20)), ["--steps", "1..100,000"]),
    "--set steps=1000000": (rec("--set", "steps=1000000"), ["small.toml: steps", "maximum 100,000"]),
    "multi_hot 1e9": (
        rec("--set", "features.0.multi_hot=1000000000"),
        ["small.toml: features[0].multi_hot = 1000000000", "TiB", "more than this machine's"],
    ),
    "zipf exponent NaN": (rec("--set", "features.0.zipf_exponent=nan"), ["features[0].zipf_exponent", "finite"]),
    "bandwidth infinite": (
        rec("--set", "hardware.hbm_bandwidth_bytes_per_s=inf"),
        ["hardware.hbm_bandwidth_bytes_per_s", "finite"],
    ),
    "bandwidth 1 B/s": (rec("--set", "hardware.hbm_bandwidth_bytes_per_s=1"), ["below the minimum 1e+09"]),
    "num_threads 1e6": (rec("--set", "host.num_threads=1000000"), ["host.num_threads", "maximum 4,096"]),
    "cost efficiency 0": (rec("--set", "cost.tc_efficiency=0"), ["cost.tc_efficiency", "minimum 0.001"]),
    "cost row padding 0": (rec("--set", "cost.row_padding_bytes=0"), ["cost.row_padding_bytes", "minimum 1"]),
    "cost overhead 9e18 ps": (rec("--set", "cost.task_overhead_ps=9000000000000000000"), ["cost.task_overhead_ps"]),
    # export outputs (before: exit 0 overwriting the store / trace / another database, or exit 1)
    "export over the store": (export("perfetto", "store.duckdb"), ["store.duckdb", "is the store"]),
    "export xspace --check over the store": (export("xspace", "store.duckdb", "--check"), ["is the store"]),
    "export over the WAL": (export("perfetto", "store.duckdb.wal"), ["write-ahead log"]),
    "export over the source trace": (export("xspace", "small.sctrace"), ["source of stored run 'small'"]),
    "export over another database": (export("perfetto", "other.duckdb"), ["other.duckdb", "DuckDB database"]),
    "export to a directory": (export("perfetto", "adir"), ["adir", "is a directory"]),
    "export to an empty path": (export("xspace", ""), ["empty path"]),
    # stores (before: DuckDB's IO error, exit 2 already: kept as a regression guard)
    "--db a directory": (["runs", "--db", "adir"], ["adir", "is a directory, not a store"]),
    "--db not a database": (
        ["analyze", "small", "--db", "small.toml"],
        ["small.toml", "not a DuckDB store", "does not start with a DuckDB header"],
    ),
}


# Cases that ran for hours (or until killed) before: run in a child with a time limit, so a
# regression fails instead of hanging the suite.
RAN_FOREVER = {"--steps 10**20", "--set steps=1000000"}


def cli_child(cwd, *argv: str, timeout_s: float = 120) -> CliResult:
    """`scprof argv...` in a child process, killed after `timeout_s`."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run(
        [sys.executable, "-m", "scprof.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    return CliResult(p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_exit_2_one_line(world, capsys, case):
    argv, needles = CASES[case]
    store = (world / "store.duckdb").read_bytes()
    res = cli_child(world, *argv) if case in RAN_FOREVER else cli(capsys, *argv)
    assert_one_error(res, *needles)
    assert (world / "store.duckdb").read_bytes() == store
    assert (world / "small.sctrace").exists() and (world / "other.duckdb").exists()
    assert not (world / "new.duckdb").exists()  # no new store
    assert not [f for _, _, fs in os.walk(world / "out") for f in fs]  # record wrote no file


@pytest.mark.parametrize(
    "argv",
    [
        ["record", "cfg.fifo", "--db", "new.duckdb"],
        ["record", "small.toml", "--perf-tables", "pipes", "--db", "new.duckdb"],
        ["runs", "--db", "db.fifo"],
        ["ingest", "small.sctrace", "--db", "db.fifo"],
        ["export", "perfetto", "small", "-o", "x.pftrace", "--db", "db.fifo"],
    ],
)
def test_fifos_are_refused_not_read(world, argv):
    """A FIFO where a config, table or store belongs is refused at once (before: blocked until killed)."""
    os.mkfifo(world / "cfg.fifo")
    os.mkfifo(world / "db.fifo")
    os.mkdir(world / "pipes")
    os.mkfifo(world / "pipes" / "collectives.json")
    (world / "pipes" / "gemm.json").write_text("{}")
    assert_one_error(cli_child(world, *argv, timeout_s=60), "not a regular file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the mode")
@pytest.mark.parametrize("what", ["config", "export dir"])
def test_permission_denied(world, capsys, what):
    if what == "config":
        os.chmod(world / "small.toml", 0)
        argv, needle = ["record", "small.toml", "--db", "new.duckdb"], "small.toml"
    else:
        os.chmod(world / "adir", 0o500)
        argv, needle = export("perfetto", "adir/x.pftrace"), "adir"
    assert_one_error(cli(capsys, *argv), needle)

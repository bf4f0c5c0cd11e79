"""`scprof export perfetto` end to end through scprof.cli.main."""

from __future__ import annotations

import os

import pytest
from perfetto_helpers import assert_round_trip, ingest_file

from profiler.synthetic import write_synthetic_trace
from scprof.cli import main


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    trace = os.path.join(tmp, "s.sctrace")
    write_synthetic_trace(trace, 3000, chips=2, scs=2, run_name="demo")
    return ingest_file(str(tmp), trace)


def test_export_with_check(db, tmp_path, capsys):
    out = str(tmp_path / "demo.pftrace")
    assert main(["export", "perfetto", "demo", "-o", out, "--check", "--db", db]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {out}:") and "checked: valid" in line and "ui.perfetto.dev" in line
    assert_round_trip(db, out)


def test_export_steps(db, tmp_path):
    out = str(tmp_path / "steps.pftrace")
    assert main(["export", "perfetto", "1", "-o", out, "--steps", "1:3", "--db", db]) == 0
    assert_round_trip(db, out, steps=(1, 3))


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["export", "perfetto", "nope", "-o", "{out}"], "run 'nope' not found"),
        (["export", "perfetto", "demo", "-o", "{out}", "--steps", "3:1"], "--steps"),
        (["export", "perfetto", "demo", "-o", "{out}", "--steps", "500:600"], "no events in steps"),
        (["export", "perfetto", "demo", "-o", "/nonexistent-dir/x.pftrace"], "cannot write"),
    ],
)
def test_errors_are_one_line_exit_2(db, tmp_path, capsys, argv, needle):
    out = str(tmp_path / "x.pftrace")
    assert main([a.format(out=out) for a in argv] + ["--db", db]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not os.path.exists(out)

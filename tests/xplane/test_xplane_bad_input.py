"""Bad XSpace input: one line on stderr naming the file, exit 2, store unchanged."""

from __future__ import annotations

import os

import pytest

from scprof.cli import main
from tests.xplane.helpers import JAX_SMALL


def _store_state(db: str):
    from profiler.store import Store

    if not os.path.exists(db):
        return None
    with Store.open(db, read_only=True) as st:
        return st.rows("SELECT (SELECT count(*) FROM runs) r, (SELECT count(*) FROM events) e")


def _bad_files(tmp_path):
    with open(JAX_SMALL, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 2])
    corrupt = tmp_path / "corrupt.xplane.pb"
    corrupt.write_bytes(bytes((b * 7 + 13) & 0xFF for b in data[:4000]))
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    nothing = tmp_path / "nothing_here"
    nothing.mkdir()
    return {"truncated": cut, "corrupt": corrupt, "empty": empty, "dir": nothing}


@pytest.mark.parametrize("kind", ["truncated", "corrupt", "empty", "dir"])
def test_bad_input_exit_2_one_line_store_unchanged(tmp_path, capsys, kind):
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", JAX_SMALL, "--db", db]) == 0
    before = _store_state(db)
    capsys.readouterr()
    bad = _bad_files(tmp_path)[kind]
    assert main(["ingest", str(bad), "--db", db, "--name", "bad"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0], err
    assert _store_state(db) == before


def test_good_and_bad_together_land_nothing(tmp_path, capsys):
    db = str(tmp_path / "s.duckdb")
    bad = _bad_files(tmp_path)["truncated"]
    assert main(["ingest", JAX_SMALL, str(bad), "--db", db]) == 2
    assert _store_state(db) in (None, [{"r": 0, "e": 0}])

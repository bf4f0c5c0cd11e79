"""Hostile XSpace captures (docs/security.md): every class is refused with one line naming the file and
where the value sits (plane, line, event, field), exit 2, the store unchanged; or, where the
value can be kept faithfully, imported with exactly that value. Never an internal error, never
a hang (each ingest runs under an alarm)."""

from __future__ import annotations

import pytest

from profiler.store import Store
from tests.fuzzkit import time_limit
from tests.tracekit import assert_one_error, cli, snapshot
from tests.xplane.helpers import JAX_SMALL
from tests.xplane.hostile import CASES, IMPORTS


@pytest.fixture
def db(tmp_path, capsys):
    path = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", JAX_SMALL, "--db", path).code == 0
    return path


@pytest.mark.parametrize("case", sorted(set(CASES) - IMPORTS))
def test_hostile_capture_is_refused_in_one_line(tmp_path, capsys, db, case):
    _, build, needles = CASES[case]
    d = tmp_path / "in"
    d.mkdir()
    paths = build(d)
    before = snapshot(db)
    with time_limit(30):
        result = cli(capsys, "ingest", *paths, "--db", db)
    line = assert_one_error(result, *needles)
    assert "internal error" not in line and "transaction" not in line.lower()
    assert snapshot(db) == before


def _ingest_one(tmp_path, capsys, db, case):
    d = tmp_path / "in"
    d.mkdir()
    (path,) = CASES[case][1](d)
    result = cli(capsys, "ingest", path, "--db", db, "--name", "x")
    assert result.code == 0, result.err
    return Store.open(str(db), read_only=True)


def test_uint64_argument_above_int64_is_kept_exactly(tmp_path, capsys, db):
    """A uint64 stat of 2^64 - 1 used to be stored as -1; it is kept as its decimal text."""
    with _ingest_one(tmp_path, capsys, db, "arg_uint64_2^64-1") as st:
        rows = st.rows(
            "SELECT a.int_value, a.string_value FROM event_args a JOIN runs r USING (run_id) "
            "WHERE r.name = 'x' AND a.key = 'fingerprint'"
        )
    assert rows == [{"int_value": None, "string_value": str((1 << 64) - 1)}]


def test_step_name_that_is_not_an_ascii_number_is_numbered_by_position(tmp_path, capsys, db):
    """'²' passes str.isdigit() but not int(): it used to be an internal error."""
    with _ingest_one(tmp_path, capsys, db, "step_name_superscript") as st:
        steps = st.rows("SELECT s.step FROM steps s JOIN runs r USING (run_id) WHERE r.name = 'x' ORDER BY s.start_ps")
    # The Steps line holds "0" (a number) and "²" (the second marker: numbered by its position, 1).
    assert [s["step"] for s in steps] == [0, 1]


@pytest.mark.parametrize("case", ["group_id_double", "group_id_str"])
def test_typed_stat_of_another_kind_is_kept_as_an_argument(tmp_path, capsys, db, case):
    """A group_id that is not an integer fills no typed column; its value stays an argument."""
    with _ingest_one(tmp_path, capsys, db, case) as st:
        rows = st.rows(
            "SELECT a.double_value, a.string_value FROM event_args a JOIN runs r USING (run_id) "
            "WHERE r.name = 'x' AND a.key = 'group_id'"
        )
    assert (
        rows == [{"double_value": 1.5, "string_value": None}]
        if case == "group_id_double"
        else [{"double_value": None, "string_value": "one"}]
    )


def test_capture_larger_than_memory_is_not_read(tmp_path, capsys, db, monkeypatch):
    """A file bigger than the machine can hold is refused before it is read whole (the limit is the
    physical memory; lowered here to the size of the committed capture minus one byte)."""
    import os

    from profiler.xspace import read as xspace_read

    size = os.path.getsize(JAX_SMALL)
    monkeypatch.setattr(xspace_read, "max_capture_bytes", lambda: size - 1)
    before = snapshot(db)
    line = assert_one_error(cli(capsys, "ingest", JAX_SMALL, "--db", db, "--name", "big"), JAX_SMALL, f"{size:,} bytes")
    assert "memory" in line
    assert snapshot(db) == before

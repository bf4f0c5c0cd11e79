"""Hostile `.sctrace` files whose chunks pass their CRC but hold values the store cannot hold
(docs/security.md), and special files given as traces: one line, exit 2, store unchanged, no
hang."""

from __future__ import annotations

import os
import socket

import pytest

from profiler import scprof_trace_pb2 as pb
from tests.fuzzkit import time_limit
from tests.tracekit import HOST_TRACK, assert_one_error, cli, crafted_trace, snapshot

EV = pb.EventBatch(track=[1], name=[1], start_ps=[0], dur_ps=[1])
SC_TRACK = pb.Track(
    id=1,
    plane="/device:TPU:0 SparseCore 0",
    line="Sparse Core Ops",
    kind=pb.TRACK_KIND_SPARSECORE,
    chip=0,
    core=0,
    tile=-1,
)


def _header(**hardware) -> pb.Header:
    extra = {k: hardware.pop(k) for k in ("config_json",) if k in hardware}
    return pb.Header(
        format_version=1,
        run_id="hostile",
        run_name="hostile",
        clock_unit="ps",
        hardware=pb.Hardware(**hardware),
        **extra,
    )


CASES = {
    "num_chips_2^32-1": (dict(header=_header(num_chips=(1 << 32) - 1)), ("hardware.num_chips",)),
    "hbm_bytes_2^64-1": (dict(header=_header(hbm_bytes=(1 << 64) - 1)), ("hardware.hbm_bytes",)),
    "tc_peak_flops_nan": (dict(header=_header(tc_peak_flops=float("nan"))), ("hardware.tc_peak_flops",)),
    "config_json_nan": (dict(header=_header(config_json='{"lr": NaN}')), ("config_json", "JSON")),
    "config_json_surrogate": (dict(header=_header(config_json='{"a": "\\ud800"}')), ("config_json", "JSON")),
    "extra_json_bad": (dict(header=_header(extra_json="{")), ("extra_json", "JSON")),
    "track_id_2^31": (
        dict(
            events=pb.EventBatch(track=[1 << 31], name=[1], start_ps=[0], dur_ps=[1]),
            tracks=(pb.Track(id=1 << 31, plane="/host:CPU", line="main", kind=pb.TRACK_KIND_HOST),),
        ),
        ("track id 2147483648", "int32"),
    ),
    "ids_sum_past_int64": (
        dict(
            events=pb.EventBatch(
                track=[1, 1],
                name=[1, 1],
                start_ps=[0, 10],
                dur_ps=[1, 1],
                step=[0, 0],
                sc=[0, 0],
                ids=[1 << 62, 1 << 62],
            ),
            tracks=(SC_TRACK,),
        ),
        ("ids", "sum past int64"),
    ),
    "dur_sum_past_int64": (
        dict(
            events=pb.EventBatch(
                track=[1] * 33_001,
                name=[1] * 33_001,
                start_ps=list(range(33_000)) + [(1 << 62) - 2],
                dur_ps=[(1 << 48) - 1] * 33_000 + [1],
            )
        ),
        ("dur_ps", "sum past int64"),
    ),
}


@pytest.fixture
def db(tmp_path, capsys, small_trace):
    path = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", small_trace, "--db", path).code == 0
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_trace_is_refused_in_one_line(tmp_path, capsys, db, case):
    kw, needles = CASES[case]
    kw = {"events": EV, **kw}
    path = crafted_trace(tmp_path / f"{case}.sctrace", kw.pop("events"), **kw)
    before = snapshot(db)
    line = assert_one_error(cli(capsys, "ingest", path, "--db", db), str(path), *needles)
    assert "internal error" not in line
    assert snapshot(db) == before


def _fifo(p):
    os.mkfifo(p)


def _socket(p):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    return s


def _device(p):
    os.symlink("/dev/zero", p)


@pytest.mark.parametrize("make,kind", [(_fifo, "a FIFO"), (_socket, "a socket"), (_device, "a character device")])
def test_special_file_as_trace_is_refused_without_reading(tmp_path, capsys, db, make, kind):
    """A FIFO without a writer used to block `ingest` forever; a socket was an internal error."""
    path = tmp_path / "special.sctrace"
    keep = make(path)
    before = snapshot(db)
    try:
        with time_limit(20):
            result = cli(capsys, "ingest", path, "--db", db)
    finally:
        if keep is not None:
            keep.close()
    assert_one_error(result, str(path), f"not a regular file ({kind})")
    assert snapshot(db) == before


def test_same_trace_twice_on_one_command_is_refused(tmp_path, capsys, small_trace):
    """It used to say the store 'already holds this run' (it did not: this very command added it)."""
    db = tmp_path / "t.duckdb"
    line = assert_one_error(cli(capsys, "ingest", small_trace, small_trace, "--db", db), "given twice")
    assert "already holds" not in line
    assert not db.exists()


def test_copy_of_a_trace_on_one_command_is_named(tmp_path, capsys, small_trace):
    copy = tmp_path / "copy.sctrace"
    copy.write_bytes(small_trace.read_bytes())
    db = tmp_path / "t.duckdb"
    assert_one_error(cli(capsys, "ingest", small_trace, copy, "--db", db), str(copy), "same run as", str(small_trace))


def test_host_track_alone_still_ingests(tmp_path, capsys):
    """The checks leave a plain valid trace alone."""
    path = crafted_trace(tmp_path / "ok.sctrace", EV, tracks=(HOST_TRACK,))
    assert cli(capsys, "ingest", path, "--db", tmp_path / "u.duckdb").code == 0


def test_two_traces_of_one_name_on_one_command_keep_both_or_neither(tmp_path, capsys):
    """With --replace, the second trace used to delete the run the same command had just added."""
    from tests.tracekit import record_small

    a = record_small(tmp_path / "a.sctrace", run_name="same", run_id="uuid-a")
    b = record_small(tmp_path / "b.sctrace", run_name="same", run_id="uuid-b")
    db = tmp_path / "t.duckdb"
    assert_one_error(cli(capsys, "ingest", a, b, "--db", db, "--replace"), str(b), "'same'", str(a))
    assert not db.exists()

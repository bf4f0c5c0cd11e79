"""`scprof ingest` and `scprof runs`: good files land, bad input gives one clear line and
leaves the store exactly as it was."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import duckdb
import pytest

from profiler import scprof_trace_pb2 as pb
from profiler.recorder import Recorder
from profiler.trace_file import MAGIC
from tests.tracekit import (
    assert_one_error,
    chunk,
    chunk_spans,
    cli,
    crafted_trace,
    record_small,
    snapshot,
)

GOOD_EVENTS = dict(track=[1, 1], name=[1, 1], start_ps=[0, 10], dur_ps=[5, 5])


def ev(**over):
    return pb.EventBatch(**{**GOOD_EVENTS, **over})


def multi_chunk_trace(path, events=20, chunk_rows=5):
    """A clean trace whose events sit in events/chunk_rows chunks."""
    with Recorder(str(path), run_name="chunky", run_id="uuid-chunky", chunk_rows=chunk_rows) as rec:
        t = rec.track("/host:CPU", "main", "host")
        rec.emit(track=[t] * events, name=["op"] * events, start_ps=range(events), dur_ps=[1] * events)
    return path


def events_chunk_spans(data):
    """(start, end) of the events chunks of a whole file."""
    kinds = [c.WhichOneof("payload") for c in pb.TraceFile.FromString(data).chunk]
    return [span for span, kind in zip(chunk_spans(data), kinds, strict=True) if kind == "events"]


# -- bad inputs: (how to make the file, words the error line must contain) -------------


def _empty(p):
    p.write_bytes(b"")
    return p, ["empty"]


def _wrong_magic(p):
    data = multi_chunk_trace(p).read_bytes()
    p.write_bytes(b"XX" + data[2:])
    return p, ["magic"]


def _wrong_version(p):
    data = multi_chunk_trace(p).read_bytes()
    p.write_bytes(MAGIC[:-1] + b"\x02" + data[len(MAGIC) :])
    return p, ["version 2"]


def _header_version(p):
    return crafted_trace(p, ev(), header=pb.Header(format_version=3, run_id="h3", clock_unit="ps")), ["version 3"]


def _cut_mid_chunk(p):
    data = multi_chunk_trace(p).read_bytes()
    start, end = events_chunk_spans(data)[2]
    p.write_bytes(data[: (start + end) // 2])
    return p, [f"byte {start}", "--allow-truncated"]


def _no_footer(p):
    with pytest.raises(RuntimeError), Recorder(str(p), run_name="crashed", run_id="uuid-crashed") as rec:
        t = rec.track("/host:CPU", "main", "host")
        rec.emit(track=[t], name=["op"], start_ps=[0], dur_ps=[1])
        raise RuntimeError("recorder crashed")
    return p, ["footer", f"byte {p.stat().st_size}"]


def _flipped_bytes(p):
    data = bytearray(multi_chunk_trace(p).read_bytes())
    start, end = events_chunk_spans(bytes(data))[1]
    data[end - 3] ^= 0xFF  # inside the packed columns
    p.write_bytes(bytes(data))
    return p, ["CRC", f"byte {start}"]


def _negative_duration(p):
    return crafted_trace(p, ev(dur_ps=[5, -3])), ["negative duration"]


def _unknown_track(p):
    return crafted_trace(p, ev(track=[1, 7])), ["unknown track id 7"]


def _unknown_string(p):
    return crafted_trace(p, ev(name=[1, 9])), ["unknown string id 9"]


def _unknown_string_in_arg(p):
    batch = ev(arg_event=[0], arg_key=[1], arg_kind=[3], arg_int=[0], arg_double=[0], arg_string=[12])
    return crafted_trace(p, batch), ["unknown string id 12"]


def _ragged_columns(p):
    return crafted_trace(p, ev(start_ps=[0])), ["different lengths"]


def _end_overflows(p):
    return crafted_trace(p, ev(start_ps=[0, 2**63 - 10], dur_ps=[5, 100])), ["int64"]


def _footer_mismatch(p):
    return crafted_trace(p, ev(), footer_events=5), ["footer"]


def _chunk_after_footer(p):
    data = crafted_trace(p, ev()).read_bytes()
    p.write_bytes(data + chunk("events", ev()))
    return p, ["follows the footer"]


def _not_header_first(p):
    p.write_bytes(MAGIC + chunk("strings", pb.StringTable(first_id=1, value=["x"])))
    return p, ["header"]


def _random_bytes(p):
    p.write_bytes(random.Random(7).randbytes(4096))
    return p, ["not an scprof trace"]


def _text_file(p):
    p.write_text("step,time\n1,2\n")
    return p, ["not an scprof trace"]


def _magic_then_garbage(p):
    p.write_bytes(MAGIC + b"this is not protobuf at all" * 10)
    return p, ["byte 16"]


def _bad_header_message(p):
    p.write_bytes(MAGIC + chunk("header", b"\xff\xff\xff"))
    return p, ["header"]


def _missing(p):
    return p.parent / "does-not-exist.sctrace", ["no such file"]


def _directory(p):
    d = p.parent / "a-directory"
    d.mkdir()
    return d, ["directory"]


BAD_INPUTS = {
    f.__name__.lstrip("_").replace("_", "-"): f
    for f in (
        _empty,
        _wrong_magic,
        _wrong_version,
        _header_version,
        _cut_mid_chunk,
        _no_footer,
        _flipped_bytes,
        _negative_duration,
        _unknown_track,
        _unknown_string,
        _unknown_string_in_arg,
        _ragged_columns,
        _end_overflows,
        _footer_mismatch,
        _chunk_after_footer,
        _not_header_first,
        _random_bytes,
        _text_file,
        _magic_then_garbage,
        _bad_header_message,
        _missing,
        _directory,
    )
}


@pytest.mark.parametrize("make", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_line_and_store_unchanged(capsys, tmp_path, store_path, make):
    bad, words = make(tmp_path / "bad.sctrace")
    before = snapshot(store_path)
    r = cli(capsys, "ingest", bad, "--db", store_path)
    assert_one_error(r, str(bad), *words)
    assert "Traceback" not in r.err and r.out == ""
    assert snapshot(store_path) == before


def test_bad_input_into_a_new_store_leaves_no_store(capsys, tmp_path):
    bad, _ = _flipped_bytes(tmp_path / "bad.sctrace")
    db = tmp_path / "fresh.duckdb"
    assert_one_error(cli(capsys, "ingest", bad, "--db", db), str(bad))
    assert not db.exists() and not (tmp_path / "fresh.duckdb.wal").exists()


@pytest.mark.parametrize("make", [_cut_mid_chunk, _no_footer], ids=["cut-mid-chunk", "no-footer"])
def test_allow_truncated_keeps_complete_chunks(capsys, tmp_path, store_path, make):
    bad, _ = make(tmp_path / "cut.sctrace")
    data = bad.read_bytes()
    cut_at = chunk_spans(data)[-1][1]  # end of the last complete chunk
    complete = pb.TraceFile.FromString(data[:cut_at])
    kept_events = sum(len(c.events.track) for c in complete.chunk if c.WhichOneof("payload") == "events")
    assert kept_events > 0
    r = cli(capsys, "ingest", bad, "--allow-truncated", "--db", store_path)
    assert r.code == 0, r.err
    assert "truncated" in r.out and str(bad) in r.out
    with duckdb.connect(str(store_path), read_only=True) as con:
        row = con.execute("SELECT status, truncated_at_byte, events FROM runs ORDER BY run_id DESC LIMIT 1").fetchall()
    assert row == [("truncated", cut_at, kept_events)]


def test_reingest_refused_unless_replace(capsys, tmp_path, store_path, small_trace):
    before = snapshot(store_path)
    r = cli(capsys, "ingest", small_trace, "--db", store_path)
    assert_one_error(r, str(store_path), "already holds", "--replace")
    assert snapshot(store_path) == before

    r = cli(capsys, "ingest", small_trace, "--replace", "--db", store_path)
    assert r.code == 0, r.err
    after = snapshot(store_path)
    assert after["counts"] == before["counts"]  # replaced, not doubled
    assert [row[2] for row in after["runs"]] == ["small"]


def test_same_name_other_run_needs_name_or_replace(capsys, tmp_path, store_path):
    other = record_small(tmp_path / "other.sctrace", run_name="small", run_id="another-uuid")
    assert_one_error(cli(capsys, "ingest", other, "--db", store_path), "small", "--name")
    r = cli(capsys, "ingest", other, "--name", "small-2", "--db", store_path)
    assert r.code == 0, r.err
    assert [row[2] for row in snapshot(store_path)["runs"]] == ["small", "small-2"]


@pytest.mark.parametrize(
    "make_last", [_flipped_bytes, _missing, _negative_duration], ids=["corrupt", "missing", "negative-duration"]
)
def test_several_files_all_or_nothing(capsys, tmp_path, store_path, make_last):
    good1 = record_small(tmp_path / "g1.sctrace", run_name="g1")
    good2 = record_small(tmp_path / "g2.sctrace", run_name="g2")
    bad, _ = make_last(tmp_path / "last.sctrace")
    before = snapshot(store_path)
    assert_one_error(cli(capsys, "ingest", good1, good2, bad, "--db", store_path), str(bad))
    assert snapshot(store_path) == before

    r = cli(capsys, "ingest", good1, good2, "--db", store_path)
    assert r.code == 0, r.err
    assert [row[2] for row in snapshot(store_path)["runs"]] == ["small", "g1", "g2"]


def test_name_with_several_files_is_a_usage_error(capsys, tmp_path, store_path):
    g1 = record_small(tmp_path / "g1.sctrace", run_name="g1")
    g2 = record_small(tmp_path / "g2.sctrace", run_name="g2")
    before = snapshot(store_path)
    assert_one_error(cli(capsys, "ingest", g1, g2, "--name", "x", "--db", store_path), "--name")
    assert snapshot(store_path) == before


@pytest.mark.parametrize("argv", [["ingest", "TRACE"], ["runs"], ["sql", "SELECT 1"]], ids=["ingest", "runs", "sql"])
def test_locked_store(capsys, tmp_path, store_path, argv):
    before = snapshot(store_path)
    other = record_small(tmp_path / "other.sctrace", run_name="other")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); time.sleep(30)",
            str(store_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        r = cli(capsys, *[other if a == "TRACE" else a for a in argv], "--db", store_path)
    finally:
        proc.kill()
        proc.wait()
    assert_one_error(r, str(store_path), "locked")
    assert snapshot(store_path) == before


def test_runs_lists_what_was_ingested(capsys, tmp_path, store_path):
    r = cli(capsys, "runs", "--json", "--db", store_path)
    assert r.code == 0 and r.err == ""
    runs = json.loads(r.out)
    assert [(x["run_id"], x["name"], x["status"], x["events"], x["steps"], x["span_ps"]) for x in runs] == [
        (1, "small", "ok", 4, 2, 2_900_000)
    ]
    r = cli(capsys, "runs", "--db", store_path)
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split()[:4] == ["id", "name", "source", "status"]
    assert lines[2].split()[:4] == ["1", "small", "scprof-trace", "ok"]


def test_runs_without_a_store(capsys, tmp_path):
    missing = tmp_path / "none.duckdb"
    assert_one_error(cli(capsys, "runs", "--db", missing), str(missing), "--db")
    assert not missing.exists()


def test_default_store_comes_from_environment(capsys, tmp_path, monkeypatch, small_trace):
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("SCPROF_DB", str(db))
    assert cli(capsys, "ingest", small_trace).code == 0
    assert db.exists() and not os.path.exists("scprof.duckdb")
    assert [row[2] for row in snapshot(db)["runs"]] == ["small"]


@pytest.mark.parametrize(
    "argv, words",
    [
        ([], ["COMMAND"]),
        (["frobnicate"], ["frobnicate"]),
        (["ingest"], ["PATH"]),
        (["sql", "SELECT 1", "--format", "xml"], ["--format", "xml"]),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, words):
    assert_one_error(cli(capsys, *argv), *words)

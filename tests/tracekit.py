"""Helpers shared by the tests: crafted trace files, store snapshots, CLI runs.

Crafted files are built from the official generated classes and the chunk framing,
so a test can put exactly the damage it wants into an otherwise valid trace.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, settings

from profiler import scprof_trace_pb2 as pb
from profiler.recorder import Recorder
from profiler.schema import TABLES
from profiler.trace_file import MAGIC, frame_chunk
from scprof.cli import main

REPO = Path(__file__).resolve().parents[1]

# Hypothesis settings for property tests that record files or open stores: no
# per-example deadline (the machine may be busy), the autouse directory fixture is
# fine to share between examples.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# `make test` sets SCPROF_REQUIRE_TEST_EXTRAS=1: there every test extra (playwright and
# chromium, xprof, grpcio-tools) must be present, so a missing one fails its tests.
# Run directly with pytest, those tests skip, naming what installs it.
REQUIRE_TEST_EXTRAS = os.environ.get("SCPROF_REQUIRE_TEST_EXTRAS") == "1"


def record_into(store: Any, config: str, name: str, steps: int, out: str, overrides: list[str] | None = None) -> int:
    """Record `config` with the emulator and ingest its trace as `name`; a run that fails (a
    compile error) is recorded before record_run raises and is stored as a failed run. Its run id."""
    from profiler.trace_to_store import ingest_trace
    from sim_backend.errors import RunFailure
    from sim_backend.recording.record import record_run

    try:
        path = record_run(config, list(overrides or []), name, steps, out, progress=False).trace_path
    except RunFailure as failed:
        path = failed.trace_path
    return ingest_trace(store, path, name=name).run_id


def missing_extra(message: str) -> None:
    """Fail under `make test`, skip otherwise: a test extra (`message` says which) is absent."""
    if REQUIRE_TEST_EXTRAS:
        pytest.fail(message)
    pytest.skip(message, allow_module_level=True)


HOST_TRACK = pb.Track(id=1, plane="/host:CPU", line="main", kind=pb.TRACK_KIND_HOST, chip=-1, core=-1, tile=-1)


def chunk(kind: str, body: pb.Message | bytes) -> bytes:
    """One framed chunk (crc + payload) holding `body`."""
    return frame_chunk(kind, body if isinstance(body, bytes) else body.SerializeToString())


def crafted_trace(
    path: Path,
    events: pb.EventBatch | bytes | None = None,
    *,
    strings: tuple[str, ...] = ("op",),
    tracks: tuple[pb.Track, ...] = (HOST_TRACK,),
    footer_events: int | None = None,
    footer: bool = True,
    header: pb.Header | None = None,
    run_id: str = "crafted-run",
    magic: bytes = MAGIC,
    extra: tuple[bytes, ...] = (),
) -> Path:
    """A trace: magic, header, strings, tracks, one events chunk, extra chunks, footer.

    The footer's event total is the events batch's length unless `footer_events` says
    otherwise; `extra` chunks go after the events chunk.
    """
    header = header or pb.Header(format_version=1, run_id=run_id, run_name=run_id, clock_unit="ps")
    parts = [magic, chunk("header", header)]
    parts.append(chunk("strings", pb.StringTable(first_id=1, value=list(strings))))
    parts.append(chunk("tracks", pb.TrackTable(track=list(tracks))))
    n_events = 0
    if events is not None:
        parts.append(chunk("events", events))
        if isinstance(events, pb.EventBatch):
            n_events = len(events.track)
    parts += extra
    if footer:
        n = n_events if footer_events is None else footer_events
        parts.append(chunk("footer", pb.Footer(events=n, chunks=len(parts) - 1)))
    path.write_bytes(b"".join(parts))
    return path


def chunk_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each complete TraceFile.chunk field, walked independently
    of profiler/ (a chunk cut short at the end of `data` is left out)."""
    spans, pos = [], len(MAGIC)
    while pos < len(data):
        assert data[pos] == 0x12, f"no chunk tag at {pos}"
        length, shift, p = 0, 0, pos + 1
        while p < len(data):
            b = data[p]
            p += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if p + length > len(data):
            break
        spans.append((pos, p + length))
        pos = p + length
    return spans


def chunk_kinds(data: bytes) -> list[str]:
    """Payload kind of each chunk, by the official classes."""
    return [c.WhichOneof("payload") for c in pb.TraceFile.FromString(data).chunk]


def crc_ok(c: pb.Chunk) -> bool:
    """Whether a chunk's crc32 is the CRC of its payload field, as the .proto defines it."""
    payload = pb.Chunk()
    payload.CopyFrom(c)
    payload.ClearField("crc32")
    return zlib.crc32(payload.SerializeToString(deterministic=True)) == c.crc32


def snapshot(db: Path | str) -> dict:
    """Row counts of every table, and the runs themselves, read without Store."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        counts = {t.name: con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0] for t in TABLES}
        runs = con.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
    finally:
        con.close()
    return {"counts": counts, "runs": runs}


def file_sha256(path: Path | str) -> str:
    """sha256 of a file's bytes (a store or output that a refusal must leave as it was)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def listing(root: Path) -> list[str]:
    """Every file and folder under `root`, relative."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def trial_rows(db: Path | str) -> int:
    """Rows of the store's whatif_trials, read without Store."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM whatif_trials").fetchall()[0][0]
    finally:
        con.close()


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


def cli(capsys, *argv: object) -> CliResult:
    """Run `scprof argv...` in-process; exit code and captured output."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def assert_one_error(result: CliResult, *needles: str) -> str:
    """Exit 2 and exactly one `scprof: error:` line on stderr containing every needle."""
    assert result.code == 2, f"exit {result.code}, stderr: {result.err!r}"
    assert len(result.err_lines) == 1, f"want one stderr line, got: {result.err!r}"
    line = result.err_lines[0]
    assert line.startswith("scprof: error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def record_small(path, run_name="small", run_id=None, chunk_rows=65536):
    """A small trace with known contents: 4 events (2 with args), counters, steps, stats."""
    with Recorder(
        str(path),
        run_name=run_name,
        run_id=run_id or f"uuid-{run_name}",
        start_time_unix_ns=1_700_000_000_000_000_000,
        chunk_rows=chunk_rows,
        hardware={"generation": "v5p", "num_chips": 2, "vendor_note": "x"},
        config={"max_ids_per_partition": 256},
        tags={"team": "emb"},
    ) as rec:
        tc = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", chip=0, core=0)
        sc = rec.track("/device:TPU:0 SparseCore 1", "Sparse Core Ops", "sparsecore", chip=0, core=1)
        heap = rec.track("/device:TPU:0", "HBM heap", "counter", chip=0, unit="bytes")
        rec.emit(
            track=[tc, tc],
            name=["fusion.1", "dot.2"],
            start_ps=[0, 2_000_000],
            dur_ps=[1_500_000, 900_000],
            step=[0, 0],
            flops=[1000, None],
        )
        rec.emit(
            track=[sc, sc],
            name=["gather", "gather"],
            start_ps=[100, 5_000],
            dur_ps=[4_000, 4_000],
            step=[0, 1],
            table=["table_a", "table_b"],
            sc=[1, 1],
            ids=[64, 80],
            unique_ids=[40, 50],
            args={"note": ["first", None], "ratio": [0.5, 1.25]},
        )
        rec.counters(track=[heap, heap], ts_ps=[0, 2_000_000], value=[1024.0, 4096.0])
        rec.steps(track=[tc, tc], step=[0, 1], start_ps=[0, 3_000_000], dur_ps=[3_000_000, 3_000_000])
        rec.partition_stats(
            step=[0], chip=[0], sc=[1], table=["table_a"], ids=[64], unique_ids=[40], max_ids_per_partition=[256]
        )
    return path

"""The reader on damaged files: every cut and every flipped byte is a clear TraceFormatError,
never a crash or silently wrong data."""

from __future__ import annotations

import pytest

from profiler import scprof_trace_pb2 as pb
from profiler.errors import TraceFormatError, TruncatedTraceError
from profiler.reader import read_header, read_trace
from tests.tracekit import chunk_spans, record_small


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "small.sctrace"
    return record_small(path, chunk_rows=1).read_bytes()  # many small chunks


def test_every_cut_keeps_exactly_the_complete_chunks(tmp_path, small):
    spans = chunk_spans(small)
    header_end = spans[0][1]
    path = tmp_path / "cut.sctrace"
    for cut in range(len(small)):
        path.write_bytes(small[:cut])
        if cut < header_end:  # not even a header: nothing to keep
            with pytest.raises(TraceFormatError):
                read_trace(str(path), allow_truncated=True)
            continue
        with pytest.raises(TruncatedTraceError, match=str(path)):
            read_trace(str(path))
        complete_end = max(end for _, end in spans if end <= cut)
        trace = read_trace(str(path), allow_truncated=True)
        assert trace.cut is not None and trace.cut.offset == complete_end, cut
        want = pb.TraceFile.FromString(small[:complete_end])
        want_starts = [v for c in want.chunk if c.WhichOneof("payload") == "events" for v in c.events.start_ps]
        events = trace.data["events"]
        assert (events["start_ps"].tolist() if "start_ps" in events else []) == want_starts, cut


def test_every_flipped_byte_is_detected(tmp_path, small):
    path = tmp_path / "flipped.sctrace"
    for i in range(len(small)):
        data = bytearray(small)
        data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(TraceFormatError, match=str(path)):
            read_trace(str(path))


def test_read_header_reads_only_the_header(tmp_path, small):
    path = tmp_path / "h.sctrace"
    path.write_bytes(small[: chunk_spans(small)[0][1]])
    assert read_header(str(path)).run_name == "small"

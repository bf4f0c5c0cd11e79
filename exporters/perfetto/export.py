"""The Perfetto export's entry and pipeline: plan (windows, tracks, interning, breakdown, flows), then
stream the run window by window through the encoder into the file.

`scprof export perfetto`, the UI's download and the benchmarks call export_run / write_trace; each
job lives in its own module of exporters/perfetto/ and this one puts them in order.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pyarrow as pa

from exporters.perfetto.breakdown import plan_breakdown
from exporters.perfetto.context import ExportContext, ExportStats
from exporters.perfetto.encoding import STREAM_SCHEMA, Encoder, descriptor_packets, head_packets
from exporters.perfetto.flows import Flows
from exporters.perfetto.interning import Interning
from exporters.perfetto.order import _values
from exporters.perfetto.prefetch import _prefetch
from exporters.perfetto.stream import (
    _BREAKDOWN,
    _COUNTER,
    _EVENT,
    _INF_PS,
    _MARKER,
    CHUNK_ROWS,
    WINDOW_ROWS,
    WindowReader,
    plan_windows,
)
from exporters.perfetto.tracks import TrackLayout
from profiler.errors import ScprofError
from profiler.safe_output import open_output, store_owned_paths
from profiler.store import Store


class ExportCheckError(Exception):
    """The written file breaks a Perfetto rule (an exporter bug: exit code 1)."""


def export_run(store: Store, run_id: int, path: str, steps: tuple[int, int] | None, check: bool) -> str:
    """Write run `run_id` to `path` as a Perfetto trace; returns a one-line summary."""
    progress = sys.stderr.isatty() and sys.stdout.isatty()
    stats = write_trace(store, run_id, path, steps, progress=progress)
    line = (
        f"wrote {path}: {stats.events:,} events, {stats.markers:,} step markers, "
        f"{stats.counters:,} counter samples, {stats.flows:,} flows, {stats.breakdown:,} step-breakdown "
        f"slices on {stats.tracks} tracks "
        f"({stats.bytes / 1e6:.1f} MB, {stats.bytes / max(stats.events, 1):.1f} B/event, "
        f"{stats.seconds:.1f} s)"
    )
    if check:
        from exporters.perfetto.validate import validate_file

        problems = validate_file(path)
        if problems:
            first = "; ".join(str(p) for p in problems[:3])
            raise ExportCheckError(f"{path}: written, but {len(problems)} problem(s) found: {first}")
        line += "; checked: valid"
    return line + "; open it at https://ui.perfetto.dev"


def write_trace(
    store: Store,
    run_id: int,
    path: str,
    steps: tuple[int, int] | None = None,
    progress: bool = False,
    window_rows: int = WINDOW_ROWS,
    chunk_rows: int = CHUNK_ROWS,
    breakdown: bool = True,
) -> ExportStats:
    """Export to `path` (written to a temporary name, then renamed); returns figures.

    `path` is refused (profiler.safe_output) when it is the store, its WAL, a stored run's
    source, another DuckDB database or scprof trace, a directory or a special file.

    `breakdown=False` leaves out the "Step breakdown" tracks (and the analysis they need).
    """
    t0 = time.perf_counter()
    with open_output(path, store_owned_paths(store)) as f:  # refused outputs: before any work
        writer = _Writer(store, run_id, f, steps, window_rows, chunk_rows, progress, breakdown)
        writer.run()
    st = writer.stats
    st.bytes = os.path.getsize(path)
    st.seconds = time.perf_counter() - t0
    return st


class _Writer:
    """One export into the open file `f`: the plans, then the stream of batches and its figures."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        f,
        steps,
        window_rows: int,
        chunk_rows: int,
        progress: bool,
        breakdown: bool = True,
    ):
        self.f = f
        self.ex = ExportContext(store, run_id, steps, breakdown)  # checks --steps
        self.stats = self.ex.stats
        self.window_rows, self.chunk_rows, self.progress = window_rows, chunk_rows, progress
        self.last_ts = 0  # the latest timestamp written (ns): new lanes are described no earlier

    def run(self) -> None:
        """Plan windows, tracks, interning, breakdown and flows; write the head, then every window."""
        ex = self.ex
        first_ps = ex.filtered("first_ps")[0][0]
        if first_ps is None:
            raise ScprofError(f"run {ex.run_id} has no events, step markers or counters to export")
        if first_ps < 0:
            raise ScprofError(f"run {ex.run_id} has negative timestamps; Perfetto needs times >= 0")
        first_ns = first_ps // 1000
        cuts = plan_windows(ex, self.window_rows)
        self.layout = layout = TrackLayout(ex)
        interning = Interning(ex)
        # the breakdown's split costs per call: it is computed over windows of twice the rows
        plan_breakdown(ex, layout, interning.bd_name_iid, cuts[1::2])
        self.encoder = Encoder(layout, interning, Flows(ex), self.chunk_rows)
        self.f.write(head_packets(first_ns, interning.interned, layout.default_uuid, layout.unwritten()))
        reader = WindowReader(ex, self.chunk_rows, interning.arg_key_iid if interning.has_args else None)
        total = layout.events_total
        done = 0
        bounds = zip([0, *cuts], [*cuts, _INF_PS // 1000], strict=True)
        # the next window is fetched and sorted in a thread while this one is encoded
        for batches, args in _prefetch(reader.window(lo * 1000, hi * 1000) for lo, hi in bounds):
            while batches:  # each batch freed once written
                done += self._chunk(batches.pop(0), args)
            del batches, args
            if self.progress and total:
                print(f"\rexport perfetto: {100 * done // total:3d}%", end="", file=sys.stderr, flush=True)
        self.f.write(self.encoder.flush_ends())
        if self.progress:
            print("\r" + " " * 30 + "\r", end="", file=sys.stderr, flush=True)

    def _chunk(self, batch: pa.RecordBatch, args) -> int:
        """Encode and write one batch of the stream; returns its number of events."""
        n = batch.num_rows
        if n == 0:
            return 0
        if batch.schema != STREAM_SCHEMA:
            raise TypeError(f"stream batch has schema {batch.schema}, expected {STREAM_SCHEMA}")
        kind = _values(batch, "kind")
        track = _values(batch, "track_id")
        start_ps = _values(batch, "start_ps")
        s_ns = start_ps // 1000
        e_ns = (start_ps + _values(batch, "dur_ps")) // 1000
        is_mk, is_ct, is_bd = kind == _MARKER, kind == _COUNTER, kind == _BREAKDOWN
        uuid = self.layout.uuids(track, s_ns, e_ns, is_mk, is_ct, is_bd)
        new = self.layout.unwritten()
        if new:  # new lanes, described before their first event
            self.f.write(descriptor_packets(max(int(s_ns[0]), self.last_ts), new))
            self.stats.tracks = len(self.layout.descriptors)
        self.f.write(self.encoder.encode(batch, uuid, args))
        self.last_ts = max(self.last_ts, int(s_ns[-1]))
        counts = np.bincount(kind, minlength=4)
        self.stats.events += int(counts[_EVENT])
        self.stats.markers += int(counts[_MARKER])
        self.stats.counters += int(counts[_COUNTER])
        self.stats.breakdown += int(counts[_BREAKDOWN])
        return int(counts[_EVENT])

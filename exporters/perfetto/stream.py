"""The export's stream: events, step markers, counter samples and breakdown slices in time windows.

Rows come from DuckDB in windows of about WINDOW_ROWS events (planned from a histogram of start
times), unsorted; each window is put in Perfetto's order with numpy and gathered into batches of
CHUNK_ROWS, so memory follows the window, not the run (this runs in the reader thread).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from exporters.perfetto.context import ExportContext
from exporters.perfetto.encoding import STREAM_SCHEMA, encode_event_args
from exporters.perfetto.order import _gather, _window_order

WINDOW_ROWS = 1 << 19  # rows fetched and sorted at a time
CHUNK_ROWS = 1 << 16  # rows encoded at a time (small enough to stay in cache)
_INF_PS = 1 << 62

# Row kinds of the merged stream.
_EVENT, _MARKER, _COUNTER, _BREAKDOWN = 0, 1, 2, 3

# Rows of one time window, merged: export.perfetto's stream (generated from ANNOTATED), unsorted
# (DuckDB's sort of all 16 columns cost more than the rest of the scan): _window_order puts them in
# Perfetto's order, STREAM_ORDER.
# Perfetto's order of the stream, as SQL (the reference _window_order reproduces, tests use it):
# start nanosecond, then longer first (parents before children), then events before markers
# before counters, then id and track.
STREAM_ORDER = "ORDER BY start_ps // 1000, (start_ps + dur_ps) // 1000 DESC, kind, id, track_id"


def plan_windows(ex: ExportContext, window_rows: int) -> list[int]:
    """Cut points (ns) so that each window holds about window_rows events."""
    lo_hi = ex.filtered("event_extent")[0]
    if lo_hi[2] <= window_rows:
        return []
    cuts: list[int] = []
    _split(ex, window_rows, lo_hi[0] // 1000, lo_hi[1] // 1000 + 1, cuts, 0)
    return cuts


def _split(ex: ExportContext, window_rows: int, lo_ns: int, hi_ns: int, cuts: list[int], depth: int) -> None:
    width = max(1, -(-(hi_ns - lo_ns) // 256))
    hist = ex.filtered("start_histogram", lo_ns=lo_ns, width_ns=width, lo_ps=lo_ns * 1000, hi_ps=hi_ns * 1000)
    acc = 0
    for b, c in hist:
        b_lo = lo_ns + b * width
        if c > 2 * window_rows and width > 1 and depth < 8:
            if acc:
                cuts.append(b_lo)
                acc = 0
            _split(ex, window_rows, b_lo, min(b_lo + width, hi_ns), cuts, depth + 1)
            cuts.append(min(b_lo + width, hi_ns))
            continue
        if acc and acc + c > window_rows:
            cuts.append(b_lo)
            acc = 0
        acc += c
    # drop duplicates / unordered cuts from recursion edges
    cuts[:] = sorted(set(cuts))


class WindowReader:
    """Reads one stream window at a time: its rows in stream order and batches, and its event_args."""

    def __init__(self, ex: ExportContext, chunk_rows: int, arg_key_iid: dict[str, int] | None):
        self.ex, self.chunk_rows = ex, chunk_rows
        self.arg_key_iid = arg_key_iid  # None: the run has no event_args

    def window(self, lo_ps: int, hi_ps: int) -> tuple[list[pa.RecordBatch], tuple | None]:
        """One window's rows in stream order, in batches of chunk_rows, and its event_args (for the encoder).

        Runs in the reader thread (_prefetch) while the previous window is encoded. The rows come
        unsorted (a plain scan), are ordered in numpy (_window_order) and gathered batch by batch;
        memory: the window about twice at the peak (DuckDB's batches and their concatenation),
        then once (one column is gathered at a time and its source freed).
        """
        args = self._window_args(lo_ps, hi_ps) if self.arg_key_iid is not None else None
        table = self.ex.q("stream", {"breakdown": self.ex.breakdown_slices}, **self.ex.filter, lo=lo_ps, hi=hi_ps)
        if table.schema != STREAM_SCHEMA:
            raise TypeError(f"stream has schema {table.schema}, expected {STREAM_SCHEMA}")
        if table.num_rows == 0:
            return [], args
        rows = table.combine_chunks().to_batches()[0]  # take() on a chunked table concatenates at every call
        del table
        order = _window_order(rows)
        cols = rows.columns
        del rows
        picks = [order[a : a + self.chunk_rows] for a in range(0, len(order), self.chunk_rows)]
        parts: list[list[pa.Array]] = []
        for i in range(len(cols)):
            parts.append(_gather(cols[i], picks))
            cols[i] = None  # the window's column freed once gathered
        return [
            pa.RecordBatch.from_arrays([c[j] for c in parts], schema=STREAM_SCHEMA) for j in range(len(picks))
        ], args

    def _window_args(self, lo_ps: int, hi_ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The window's event_args as DebugAnnotation fields: (sorted event_ids, blob, offsets), or None."""
        t = self.ex.q("window_args", **self.ex.filter, lo=lo_ps, hi=hi_ps)
        if t.num_rows == 0:
            return None
        return encode_event_args(t, self.arg_key_iid)

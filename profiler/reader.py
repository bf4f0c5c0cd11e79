"""Reading scprof traces: stream batches as numpy columns, validated chunk by chunk.

`TraceReader` walks a file once, keeping the header, string and track tables it
meets, and yields each data chunk as a `Batch` of numpy columns (zero-copy views
on the chunk bytes). Every check that would otherwise let bad data into the store
(unknown ids, negative durations, ragged columns, a missing footer) raises a
TraceFormatError naming the file and the chunk's byte offset.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from profiler import scprof_trace_pb2 as pb
from profiler.errors import TraceFormatError, TruncatedTraceError
from profiler.json_text import check_json
from profiler.recorder import BATCH_COLUMNS, STRING_COLUMNS
from profiler.trace_file import FORMAT_VERSION, Cut, RawChunk, iter_chunks
from profiler.wire import NULL_I64, WireError, decode_batch, decode_batch_with_protobuf

I32_MAX, I64_MAX = (1 << 31) - 1, (1 << 63) - 1
# Event columns the store sums (profiler/summaries.py: per timeline bin and step cell): the
# trace's total of their absolute values must fit int64, so that no sum of a subset overflows.
SUMMED_EVENT_COLUMNS = ("dur_ps", "ids", "unique_ids", "dropped_ids")
_HW_INT32 = ("num_chips", "sparsecores_per_chip", "tiles_per_sparsecore", "simd_width")
_HW_INT64 = ("hbm_bytes", "spmem_bytes_per_tile")
_HW_DOUBLE = ("hbm_bandwidth_bytes_per_s", "tc_peak_flops", "ici_bandwidth_bytes_per_s")

REQUIRED = {
    "events": ("track", "name", "start_ps", "dur_ps"),
    "counters": ("track", "ts_ps", "value"),
    "steps": ("track", "step", "start_ps", "dur_ps"),
    "partition_stats": ("step", "chip", "sc", "table", "ids", "unique_ids"),
}
ARG_COLUMNS = ("arg_event", "arg_key", "arg_kind", "arg_int", "arg_double", "arg_string")
BATCH_MESSAGES = {
    "events": pb.EventBatch,
    "counters": pb.CounterBatch,
    "steps": pb.StepBatch,
    "partition_stats": pb.PartitionStatsBatch,
}


@dataclass
class Batch:
    """One data chunk: its kind, file offset and numpy columns of one length `rows`."""

    kind: str
    offset: int
    columns: dict[str, np.ndarray]
    rows: int


@dataclass
class TraceReader:
    """Streams one trace file. Call `batches()` once; tables fill in as it goes."""

    path: str
    allow_truncated: bool = False
    header: pb.Header | None = None
    strings: list[str] = field(default_factory=lambda: [""])
    tracks: list[pb.Track] = field(default_factory=list)
    footer: pb.Footer | None = None
    cut: Cut | None = None
    chunks: int = 0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SUMMED_EVENT_COLUMNS, 0.0))

    def batches(self) -> Iterator[Batch]:
        """Yield data batches in file order; header/strings/tracks/footer are absorbed."""
        track_ids: set[int] = set()
        counts = dict.fromkeys(BATCH_COLUMNS, 0)
        for item in iter_chunks(self.path):
            if isinstance(item, Cut):
                if self.header is None:  # nothing worth keeping, even with allow_truncated
                    raise TruncatedTraceError(f"{item.message()} (inside the header chunk)")
                self._cut_short(item)
                return
            if self.footer is not None:
                raise TraceFormatError(f"{self.path}: chunk at byte {item.offset} follows the footer")
            if self.header is None and item.kind != "header":
                raise TraceFormatError(f"{self.path}: first chunk (byte {item.offset}) is not a header")
            self.chunks += 1
            if item.kind in BATCH_COLUMNS:
                batch = self._decode(item, track_ids)
                counts[item.kind] += batch.rows
                yield batch
            else:
                self._absorb(item, track_ids)
        if self.header is None:
            raise TraceFormatError(f"{self.path}: trace has no header chunk")
        if self.footer is None:
            self._cut_short(
                Cut(self.path, os.path.getsize(self.path), "no footer: the recorder did not close the file")
            )
            return
        expected = {k: getattr(self.footer, k) for k in counts}
        if expected != counts:
            raise TraceFormatError(f"{self.path}: footer totals {expected} do not match the file's {counts}")

    def _cut_short(self, cut: Cut) -> None:
        self.cut = cut
        if not self.allow_truncated:
            raise TruncatedTraceError(
                f"{cut.message()} ({self.chunks} complete chunks before it; pass --allow-truncated to ingest them)"
            )

    def _absorb(self, item: RawChunk, track_ids: set[int]) -> None:
        """Take in a header, string table, track table or footer chunk."""
        try:
            msg = getattr(pb.Chunk(), item.kind).FromString(bytes(item.body))
        except Exception:  # protobuf's DecodeError and friends
            raise TraceFormatError(
                f"{self.path}: chunk at byte {item.offset} is not a valid {item.kind} message"
            ) from None
        if item.kind == "header":
            if self.header is not None:
                raise TraceFormatError(f"{self.path}: second header at byte {item.offset}")
            if msg.format_version != FORMAT_VERSION:
                raise TraceFormatError(
                    f"{self.path}: unsupported trace format version {msg.format_version} (this scprof reads {FORMAT_VERSION})"
                )
            if msg.clock_unit not in ("", "ps"):
                raise TraceFormatError(f"{self.path}: clock unit {msg.clock_unit!r} is not 'ps'")
            _check_header(f"{self.path}: header", msg)
            self.header = msg
        elif item.kind == "strings":
            if msg.first_id != len(self.strings):
                raise TraceFormatError(
                    f"{self.path}: string table at byte {item.offset} starts at id {msg.first_id}, expected {len(self.strings)}"
                )
            self.strings.extend(msg.value)
        elif item.kind == "tracks":
            for t in msg.track:
                if t.id > I32_MAX:
                    raise TraceFormatError(f"{self.path}: track id {t.id} at byte {item.offset} is beyond int32")
                if t.id == 0 or t.id in track_ids:
                    raise TraceFormatError(
                        f"{self.path}: track id {t.id} at byte {item.offset} is zero or declared twice"
                    )
                track_ids.add(t.id)
                self.tracks.append(t)
        elif item.kind == "footer":
            self.footer = msg

    def _decode(self, item: RawChunk, track_ids: set[int]) -> Batch:
        spec = BATCH_COLUMNS[item.kind]
        where = f"{self.path}: {item.kind} chunk at byte {item.offset}"
        try:
            cols = decode_batch(spec, item.body)
            if cols is None:
                cols = decode_batch_with_protobuf(spec, BATCH_MESSAGES[item.kind], item.body)
        except (WireError, Exception) as e:
            raise TraceFormatError(f"{where}: not a valid {item.kind} batch ({e})") from None
        missing = [c for c in REQUIRED[item.kind] if c not in cols]
        if missing:
            raise TraceFormatError(f"{where}: missing columns {missing}")
        data_cols = {k: v for k, v in cols.items() if k not in ARG_COLUMNS}
        lengths = {len(v) for v in data_cols.values()}
        if len(lengths) != 1:
            raise TraceFormatError(f"{where}: columns have different lengths")
        rows = lengths.pop()
        self._check_ids(where, cols, item.kind, track_ids, rows)
        return Batch(item.kind, item.offset, cols, rows)

    def _check_ids(self, where: str, cols: dict[str, np.ndarray], kind: str, track_ids: set[int], rows: int) -> None:
        """Vectorised referential checks: tracks and strings known, durations >= 0."""
        if "track" in cols and rows:
            lo, hi = int(cols["track"].min()), int(cols["track"].max())
            contiguous = len(track_ids) == max(track_ids, default=0)
            if (
                lo < 1
                or hi > max(track_ids, default=0)
                or (not contiguous and not np.isin(cols["track"], list(track_ids)).all())
            ):
                bad = cols["track"][~np.isin(cols["track"], list(track_ids))][0]
                raise TraceFormatError(f"{where}: unknown track id {bad}")
        string_cols = STRING_COLUMNS.get(kind, ()) + (("arg_key", "arg_string") if kind == "events" else ())
        for name in string_cols:
            if name in cols and len(cols[name]) and int(cols[name].max()) >= len(self.strings):
                raise TraceFormatError(f"{where}: unknown string id {int(cols[name].max())} in column {name}")
        if "dur_ps" in cols and rows:
            if int(cols["dur_ps"].min()) < 0:
                raise TraceFormatError(f"{where}: negative duration ({int(cols['dur_ps'].min())} ps)")
            # The store computes end_ps = start_ps + dur_ps in int64.
            if np.any(cols["start_ps"] > np.iinfo(np.int64).max - cols["dur_ps"]):
                raise TraceFormatError(f"{where}: an event ends past the int64 picosecond range")
        if kind == "events":
            self._add_sums(where, cols)
        if kind == "events" and "arg_event" in cols:
            lengths = {len(cols[c]) for c in ARG_COLUMNS if c in cols}
            if len(lengths) != 1 or any(c not in cols for c in ("arg_event", "arg_key", "arg_kind")):
                raise TraceFormatError(f"{where}: argument columns are incomplete")
            if len(cols["arg_event"]) and int(cols["arg_event"].max()) >= rows:
                raise TraceFormatError(f"{where}: argument refers to event {int(cols['arg_event'].max())} of {rows}")

    def _add_sums(self, where: str, cols: dict[str, np.ndarray]) -> None:
        """Running totals of the summed columns' absolute values; refuse when they reach int64."""
        for name in SUMMED_EVENT_COLUMNS:
            v = cols.get(name)
            if v is not None and len(v):
                self.sums[name] += abs_total(v)
                if self.sums[name] >= SUM_LIMIT:
                    raise TraceFormatError(
                        f"{where}: the {name} of the trace's events sum past int64 "
                        "(the store sums them per step and timeline bin)"
                    )


SUM_LIMIT = float(I64_MAX - (1 << 40))  # a float total this close to int64's end counts as past it


def abs_total(v: np.ndarray) -> float:
    """Sum of |v| over an int64 column, nulls (NULL_I64 = -2^63) left out, as a float.

    Common case, exact in three vectorised passes without a copy: no negative value but the
    null sentinel, and len(v) * max(v) < 2^63, so the true sum S < 2^63 and numpy's wrapping
    int64 sum is S + nulls * 2^63, i.e. S mod 2^63. Otherwise a float sum of a masked copy
    (relative error far below SUM_LIMIT's 2^40 margin).
    """
    if not len(v):
        return 0.0
    nonneg = v.dtype == np.int64 and int(v.view(np.uint64).max()) <= 1 << 63  # or null
    if nonneg and len(v) * max(int(v.max()), 0) < 1 << 63:
        return float(int(v.sum()) % (1 << 63))
    return float(np.abs(v[v != NULL_I64].astype(np.float64)).sum())


def _check_header(where: str, h: pb.Header) -> None:
    """Header values that the runs table cannot hold, or JSON it would refuse."""
    hw = h.hardware
    for name, hi in [(n, I32_MAX) for n in _HW_INT32] + [(n, I64_MAX) for n in _HW_INT64]:
        if getattr(hw, name) > hi:
            raise TraceFormatError(f"{where}: hardware.{name} = {getattr(hw, name)} is beyond {hi}")
    for name in _HW_DOUBLE:
        v = getattr(hw, name)
        if not math.isfinite(v) or v < 0:
            raise TraceFormatError(f"{where}: hardware.{name} = {v} is not a finite number >= 0")
    for name, text in (("config_json", h.config_json), ("hardware.extra_json", hw.extra_json)):
        if text:
            check_json(where, name, text)


def read_header(path: str) -> pb.Header:
    """The header of a trace, reading only its first chunk."""
    reader = TraceReader(path)
    for item in iter_chunks(path):
        if isinstance(item, RawChunk) and item.kind == "header":
            reader._absorb(item, set())
            return reader.header
        break
    raise TraceFormatError(f"{path}: first chunk is not a header (or the file ends before it)")


@dataclass
class Trace:
    """A whole trace in memory (for tests and small files): tables and concatenated columns."""

    header: pb.Header
    strings: list[str]
    tracks: list[pb.Track]
    data: dict[str, dict[str, np.ndarray]]
    cut: Cut | None


def read_trace(path: str, allow_truncated: bool = False) -> Trace:
    """Read a whole trace; columns of each kind concatenated (missing optional columns omitted)."""
    reader = TraceReader(path, allow_truncated)
    parts: dict[str, list[Batch]] = {k: [] for k in BATCH_COLUMNS}
    for batch in reader.batches():
        parts[batch.kind].append(batch)
    data = {}
    for kind, batches in parts.items():
        data[kind] = concat_batches(kind, batches)
    return Trace(reader.header, reader.strings, reader.tracks, data, reader.cut)


def concat_batches(kind: str, batches: list[Batch]) -> dict[str, np.ndarray]:
    """Concatenate batches' columns; optional columns absent from some batches become nulls.

    Generic-argument rows get `arg_event` rebased to the concatenated event index.
    """
    from profiler.recorder import null_of

    spec = BATCH_COLUMNS[kind]
    names = set().union(*(b.columns for b in batches)) if batches else set()
    out = {}
    offsets = np.cumsum([0] + [b.rows for b in batches])
    for name in sorted(names, key=lambda n: spec[n].number):
        dtype = spec[name].dtype
        pieces = []
        for b, off in zip(batches, offsets, strict=False):
            if name in b.columns:
                col = b.columns[name]
                pieces.append(col.astype(np.int64) + off if name == "arg_event" else col)
            elif name not in ARG_COLUMNS:
                pieces.append(np.full(b.rows, null_of(dtype), dtype))
        out[name] = np.concatenate(pieces) if pieces else np.zeros(0, dtype)
    return out

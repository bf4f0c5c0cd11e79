"""Recording API: one `Recorder` session writes one trace file.

Two ways in: `span()` times instrumented host Python code on the wall clock;
`emit()`, `counters()`, `steps()` and `partition_stats()` take whole numpy
columns from producers that run on a simulated clock (the emulator). Data is
buffered up to `chunk_rows` rows per kind and written as self-contained chunks,
so memory stays bounded and a crash loses at most the unwritten buffers.

    with Recorder("run.sctrace", run_name="demo") as rec:
        tc = rec.track("/device:TPU:0", "XLA Ops", kind="tensorcore", chip=0, core=0)
        rec.emit(track=[tc, tc], name=["fusion", "matmul"], start_ps=[0, 10], dur_ps=[5, 7])
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from profiler import scprof_trace_pb2 as pb
from profiler.trace_fields import EVENT_CORE, TYPED_FIELDS, TYPED_NAMES
from profiler.trace_file import FORMAT_VERSION, MAGIC, frame_chunk
from profiler.wire import NULL_I32, NULL_I64, columns_of, encode_batch, read_varint

EVENT_COLUMNS = columns_of(pb.EventBatch.DESCRIPTOR)
COUNTER_COLUMNS = columns_of(pb.CounterBatch.DESCRIPTOR)
STEP_COLUMNS = columns_of(pb.StepBatch.DESCRIPTOR)
PARTITION_COLUMNS = columns_of(pb.PartitionStatsBatch.DESCRIPTOR)

BATCH_COLUMNS = {
    "events": EVENT_COLUMNS,
    "counters": COUNTER_COLUMNS,
    "steps": STEP_COLUMNS,
    "partition_stats": PARTITION_COLUMNS,
}

# Columns holding interned string ids, per batch kind.
STRING_COLUMNS = {
    "events": ("name", *(f.name for f in TYPED_FIELDS if f.is_string)),
    "partition_stats": ("table",),
}
ARG_KIND_INT, ARG_KIND_DOUBLE, ARG_KIND_STRING = 1, 2, 3

TRACK_KINDS = {
    "host": pb.TRACK_KIND_HOST,
    "tensorcore": pb.TRACK_KIND_TENSORCORE,
    "sparsecore": pb.TRACK_KIND_SPARSECORE,
    "sc_tile": pb.TRACK_KIND_SC_TILE,
    "counter": pb.TRACK_KIND_COUNTER,
}


def null_of(dtype: np.dtype) -> int | float:
    """The null sentinel of a column type: NaN for doubles, 0 (the empty string) for ids."""
    if dtype.kind == "f":
        return float("nan")
    if dtype.kind == "u":
        return 0
    return NULL_I32 if dtype.itemsize == 4 else NULL_I64


class _Span:
    """Context manager returned by Recorder.span(); kept tiny because it is on hot paths.

    A finished span is stored as one tuple of five ints (name, track, step, t0, t1), which
    the cyclic garbage collector soon stops tracking: buffered spans then cost it nothing;
    args, when given, are a sixth element.
    """

    __slots__ = ("_rec", "_name", "_track", "_step", "_args", "_t0")

    def __init__(self, rec: Recorder, name: int, track: int, step: int, args: dict[str, Any] | None):
        self._rec, self._name, self._track, self._step, self._args = rec, name, track, step, args

    def __enter__(self) -> _Span:
        self._t0 = _now()
        return self

    def __exit__(self, *exc: object) -> None:
        t1 = _now()
        rec = self._rec
        spans = rec._spans
        if self._args is None:
            spans.append((self._name, self._track, self._step, self._t0, t1))
        else:
            spans.append((self._name, self._track, self._step, self._t0, t1, self._args))
            rec._spans_with_args += 1
        if len(spans) >= rec.chunk_rows:
            rec._flush_spans()


_now = time.perf_counter_ns


class Recorder:
    """A recording session that owns one trace file (use as a context manager)."""

    def __init__(
        self,
        path: str,
        run_name: str,
        producer: str = "scprof",
        hardware: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        run_id: str | None = None,
        start_time_unix_ns: int | None = None,
        chunk_rows: int = 65536,
    ):
        self.path = path
        self.chunk_rows = chunk_rows
        self.run_id = run_id or str(uuid.uuid4())
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._strings: dict[str, int] = {"": 0}
        self._pending_strings: list[str] = []
        self._tracks: dict[tuple[str, str], int] = {}
        self._pending_tracks: list[pb.Track] = []
        self._buffers: dict[str, list[dict[str, np.ndarray]]] = {k: [] for k in BATCH_COLUMNS}
        self._buffered_rows = dict.fromkeys(BATCH_COLUMNS, 0)
        self._totals = dict.fromkeys(BATCH_COLUMNS, 0)
        self._chunks = 0
        self._spans: list[tuple] = []  # (name, track, step, t0, t1[, args])
        self._spans_with_args = 0  # how many of them carry args
        self._perf0 = time.perf_counter_ns()
        self._closed = False
        # A fixed start time (as the emulator passes) makes the file byte-for-byte reproducible.
        self._fixed_clock = start_time_unix_ns is not None
        header = pb.Header(
            format_version=FORMAT_VERSION,
            run_id=self.run_id,
            run_name=run_name,
            producer=producer,
            clock_unit="ps",
            config_json=json.dumps(config or {}, sort_keys=True),
            start_time_unix_ns=time.time_ns() if start_time_unix_ns is None else start_time_unix_ns,
            tags=dict(tags or {}),
        )
        self._start_ns = header.start_time_unix_ns
        hw = dict(hardware or {})
        extra = {k: hw.pop(k) for k in list(hw) if k not in pb.Hardware.DESCRIPTOR.fields_by_name}
        header.hardware.CopyFrom(pb.Hardware(**hw, extra_json=json.dumps(extra, sort_keys=True) if extra else ""))
        self._file.write(MAGIC)
        # deterministic: map fields (tags) in key order, so equal inputs give equal bytes
        self._write("header", header.SerializeToString(deterministic=True))

    # -- strings and tracks -------------------------------------------------

    def intern(self, s: str) -> int:
        """Id of a string in this trace's string table (added on first use)."""
        sid = self._strings.get(s)
        if sid is None:
            sid = self._strings[s] = len(self._strings)
            self._pending_strings.append(s)
        return sid

    def intern_array(self, values: Sequence[str] | np.ndarray) -> np.ndarray:
        """Vectorised intern: string ids (uint32) for an array of strings."""
        # Python strings stay objects: numpy's fixed-width str dtype drops trailing NULs.
        arr = values if isinstance(values, np.ndarray) else np.array([str(v) for v in values], dtype=object)
        if arr.size == 0:
            return np.zeros(0, np.uint32)
        uniq, inverse = np.unique(arr, return_inverse=True)
        ids = np.fromiter((self.intern(str(u)) for u in uniq), np.uint32, len(uniq))
        return ids[inverse.reshape(-1)]

    def track(
        self,
        plane: str,
        line: str,
        kind: str,
        chip: int = -1,
        core: int = -1,
        tile: int = -1,
        unit: str = "",
    ) -> int:
        """Id of the track (plane, line), declaring it on first use.

        `kind` is one of host, tensorcore, sparsecore, sc_tile, counter.
        """
        key = (plane, line)
        tid = self._tracks.get(key)
        if tid is None:
            if kind not in TRACK_KINDS:
                raise ValueError(f"track kind must be one of {sorted(TRACK_KINDS)}, not {kind!r}")
            tid = self._tracks[key] = len(self._tracks) + 1
            self._pending_tracks.append(
                pb.Track(
                    id=tid, plane=plane, line=line, kind=TRACK_KINDS[kind], chip=chip, core=core, tile=tile, unit=unit
                )
            )
        return tid

    # -- bulk data on a simulated clock --------------------------------------

    def emit(self, *, args: Mapping[str, Sequence | np.ndarray] | None = None, **columns: Any) -> None:
        """Append complete events given as equal-length columns.

        Required: track, name (strings or string ids), start_ps, dur_ps (>= 0).
        Optional: step, category and the typed arguments (table, sc, minibatch,
        ids, unique_ids, dropped_ids, bytes, flops); `args` holds further per-event
        columns by key (int, float or str; None/NaN = no value).
        """
        missing = [c for c in EVENT_CORE if c not in columns]
        if missing:
            raise ValueError(f"emit() needs columns {missing}")
        cols = self._columns("events", columns)
        if np.any(cols["dur_ps"] < 0):
            raise ValueError("emit(): dur_ps must be >= 0")
        if args:
            cols.update(self._encode_args(args, len(cols["track"])))
        self._append("events", cols)

    def counters(self, **columns: Any) -> None:
        """Append counter samples: track, ts_ps, value."""
        self._append("counters", self._columns("counters", columns))

    def steps(self, **columns: Any) -> None:
        """Append step markers: track, step, start_ps, dur_ps."""
        self._append("steps", self._columns("steps", columns))

    def partition_stats(self, **columns: Any) -> None:
        """Append per-step SparseCore partition statistics (see PartitionStatsBatch)."""
        self._append("partition_stats", self._columns("partition_stats", columns))

    # -- host code on the wall clock ------------------------------------------

    def span(self, name: str, track: int, step: int | None = None, **args: Any) -> _Span:
        """Time a block of host code as an event on `track` (wall clock since start)."""
        sid = self._strings.get(name)
        return _Span(
            self, self.intern(name) if sid is None else sid, track, NULL_I32 if step is None else step, args or None
        )

    def _flush_spans(self) -> None:
        if not self._spans:
            return
        spans, self._spans = self._spans, []
        with_args, self._spans_with_args = self._spans_with_args, 0
        n = len(spans)
        args: tuple = ()
        if with_args:  # columns by transposing the tuples (spans without args get None)
            if with_args < n:
                spans = [s if len(s) == 6 else (*s, None) for s in spans]
            name, track, step, t0, t1, args = zip(*spans, strict=True)
            a = np.array([name, track, step, t0, t1], np.int64).T
        else:  # one pass over the buffered ints into an [n, 5] array: name, track, step, t0, t1
            a = np.fromiter(itertools.chain.from_iterable(spans), np.int64, count=5 * n).reshape(n, 5)
        if a[:, 2].min() < np.iinfo(np.int32).min or a[:, 2].max() > np.iinfo(np.int32).max:
            raise ValueError("span: step does not fit in int32")
        cols: dict[str, Any] = {
            "track": a[:, 1],
            "name": a[:, 0],
            "start_ps": (a[:, 3] - self._perf0) * 1000,
            "dur_ps": (a[:, 4] - a[:, 3]) * 1000,
            "step": a[:, 2].astype(np.int32),
        }
        generic: dict[str, list] = {}
        for key in {k for d in args if d for k in d}:
            values = [d.get(key) if d else None for d in args]
            (cols if key in TYPED_NAMES else generic)[key] = values
        self.emit(args=generic or None, **cols)

    # -- encoding --------------------------------------------------------------

    def _columns(self, kind: str, columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Validate and convert user columns to the batch's dtypes (strings interned)."""
        spec = BATCH_COLUMNS[kind]
        out: dict[str, np.ndarray] = {}
        for name, values in columns.items():
            col = spec.get(name)
            if col is None or name.startswith("arg_"):
                raise ValueError(f"{kind}: unknown column {name!r}")
            if name in STRING_COLUMNS.get(kind, ()):
                out[name] = self._string_column(values)
            else:
                out[name] = self._number_column(values, col.dtype)
        lengths = {len(v) for v in out.values()}
        if len(lengths) > 1:
            raise ValueError(f"{kind}: columns differ in length: { {k: len(v) for k, v in out.items()} }")
        if "track" in out and len(out["track"]) and (out["track"].min() < 1 or out["track"].max() > len(self._tracks)):
            raise ValueError(f"{kind}: track id not declared with track()")
        return out

    def _string_column(self, values: Any) -> np.ndarray:
        arr = values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
        if arr.dtype == object and len(arr) and all(isinstance(v, int | np.integer) for v in arr):
            arr = arr.astype(np.int64)  # a list of string ids
        if arr.dtype.kind in "iu":
            if len(arr) and (arr.min() < 0 or arr.max() >= len(self._strings)):
                raise ValueError("string id not interned by this recorder")
            return arr.astype(np.uint32, copy=False)
        if arr.dtype == object:
            arr = np.array(["" if v is None else str(v) for v in arr], dtype=object)
        return self.intern_array(arr)

    @staticmethod
    def _number_column(values: Any, dtype: np.dtype) -> np.ndarray:
        if isinstance(values, list) and any(v is None for v in values):
            null = null_of(dtype)
            values = [null if v is None else v for v in values]
        return np.asarray(values).astype(dtype, copy=False)

    def _encode_args(self, args: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
        """Generic key/value arguments as the arg_* side-table columns (nulls skipped)."""
        parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("arg_event", "arg_key", "arg_kind", "arg_int", "arg_double", "arg_string")
        }
        for key, values in sorted(args.items()):
            arr = np.asarray(values, dtype=object if isinstance(values, list) else None)
            if len(arr) != n:
                raise ValueError(f"emit(): argument {key!r} has {len(arr)} values for {n} events")
            if arr.dtype == object:
                present = np.array([v is not None and v == v for v in arr], dtype=bool)
                kinds = {type(v) for v in arr[present]}
                if kinds <= {int, bool, np.int64}:
                    arr = np.where(present, arr, 0).astype(np.int64)
                elif kinds <= {int, float, np.float64}:
                    arr = np.where(present, arr, 0.0).astype(np.float64)
                else:
                    arr = np.array([str(v) if p else "" for v, p in zip(arr, present, strict=True)], dtype=object)
            elif arr.dtype.kind == "f":
                present = ~np.isnan(arr)
            else:
                present = np.ones(n, dtype=bool)
            idx = np.flatnonzero(present).astype(np.uint32)
            m = len(idx)
            zeros_i, zeros_f, zeros_s = np.zeros(m, np.int64), np.zeros(m, np.float64), np.zeros(m, np.uint32)
            if arr.dtype.kind in "iub":
                kind, vi, vf, vs = ARG_KIND_INT, arr[idx].astype(np.int64), zeros_f, zeros_s
            elif arr.dtype.kind == "f":
                kind, vi, vf, vs = ARG_KIND_DOUBLE, zeros_i, arr[idx].astype(np.float64), zeros_s
            else:
                kind, vi, vf, vs = ARG_KIND_STRING, zeros_i, zeros_f, self.intern_array(arr[idx])
            parts["arg_event"].append(idx)
            parts["arg_key"].append(np.full(m, self.intern(key), np.uint32))
            parts["arg_kind"].append(np.full(m, kind, np.uint32))
            parts["arg_int"].append(vi)
            parts["arg_double"].append(vf)
            parts["arg_string"].append(vs)
        return {k: np.concatenate(v) for k, v in parts.items()}

    # -- buffering and writing -------------------------------------------------

    def _append(self, kind: str, cols: dict[str, np.ndarray]) -> None:
        n = len(next(iter(cols.values()))) if cols else 0
        if n == 0:
            return
        if kind == "events" and "arg_event" in cols:
            # Events with side-table rows are written as they come (the row indices are
            # batch-local), still in chunks of at most chunk_rows events.
            self._flush(kind)
            arg_event = cols["arg_event"]
            for s in range(0, n, self.chunk_rows):
                e = min(s + self.chunk_rows, n)
                rows = (arg_event >= s) & (arg_event < e)
                part = {k: v[rows] if k.startswith("arg_") else v[s:e] for k, v in cols.items()}
                part["arg_event"] = part["arg_event"] - np.uint32(s)
                self._write_batch(kind, part)
            return
        self._buffers[kind].append(cols)
        self._buffered_rows[kind] += n
        if self._buffered_rows[kind] >= self.chunk_rows:
            self._flush(kind)

    def _flush(self, kind: str) -> None:
        """Write the buffered rows of one kind as chunks of at most chunk_rows rows."""
        parts = self._buffers[kind]
        if not parts:
            return
        self._buffers[kind], self._buffered_rows[kind] = [], 0
        names = set().union(*parts)
        n_total = sum(len(next(iter(p.values()))) for p in parts)
        merged = {}
        for name in names:
            dtype = BATCH_COLUMNS[kind][name].dtype
            merged[name] = np.concatenate(
                [p[name] if name in p else np.full(len(next(iter(p.values()))), null_of(dtype), dtype) for p in parts]
            )
        for s in range(0, n_total, self.chunk_rows):
            self._write_batch(kind, {k: v[s : s + self.chunk_rows] for k, v in merged.items()})

    def _write_batch(self, kind: str, cols: dict[str, np.ndarray]) -> None:
        self._write_pending_tables()
        self._write(kind, encode_batch(BATCH_COLUMNS[kind], cols))
        self._totals[kind] += len(next(iter(cols.values())))

    def _write_pending_tables(self) -> None:
        if self._pending_strings:
            first = len(self._strings) - len(self._pending_strings)
            self._write("strings", pb.StringTable(first_id=first, value=self._pending_strings).SerializeToString())
            self._pending_strings = []
        if self._pending_tracks:
            self._write("tracks", pb.TrackTable(track=self._pending_tracks).SerializeToString())
            self._pending_tracks = []

    def _write(self, kind: str, body: bytes) -> None:
        self._file.write(frame_chunk(kind, body))
        self._chunks += 1

    def flush(self) -> None:
        """Write everything buffered so far (the file stays open)."""
        self._flush_spans()
        for kind in BATCH_COLUMNS:
            self._flush(kind)
        self._write_pending_tables()
        self._file.flush()

    def close(self) -> None:
        """Flush, write the footer and close the file. Idempotent."""
        if self._closed:
            return
        self.flush()
        footer = pb.Footer(
            events=self._totals["events"],
            counters=self._totals["counters"],
            steps=self._totals["steps"],
            partition_stats=self._totals["partition_stats"],
            chunks=self._chunks,
            end_time_unix_ns=self._start_ns if self._fixed_clock else time.time_ns(),
        )
        self._write("footer", footer.SerializeToString())
        self._file.close()
        self._closed = True

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            # Keep what was recorded, but leave the file without a footer: readers
            # then report it as cut short, which is what happened.
            try:
                self.flush()
            finally:
                self._file.close()
            self._closed = True


def rewrite_tags(src: str, dst: str, tags: Mapping[str, str]) -> None:
    """Copy the trace `src` to `dst` with its header's tags replaced by `tags`.

    For a producer that learns the run's outcome (say, a failure) only after streaming
    it: every chunk after the header is copied as it is (string and track ids do not
    depend on the header), so the copy holds the same data under the final tags.
    """
    with open(src, "rb") as f, open(dst, "wb") as out:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{src}: not an scprof trace")
        head = f.read(11)  # the header chunk's tag and length
        length, used = read_varint(head, 1, len(head))
        f.seek(len(MAGIC) + used)
        chunk = pb.Chunk.FromString(f.read(length))
        if chunk.WhichOneof("payload") != "header":
            raise ValueError(f"{src}: first chunk is not a header")
        header = chunk.header
        header.tags.clear()
        header.tags.update(tags)
        out.write(MAGIC)
        out.write(frame_chunk("header", header.SerializeToString(deterministic=True)))
        shutil.copyfileobj(f, out, 1 << 20)

"""Ingest Chrome trace JSON (PyTorch Kineto `*.pt.trace.json(.gz)`, XProf / JAX `*.trace.json.gz`,
other Chrome traces) into the store, mapped as an XSpace capture is.

    file -> NDJSON blocks (profiler/chrome_json_scan.py) -> DuckDB's JSON reader -> a table of events
    -> planes, lines, times, typed fields, arguments and counters in SQL (one statement each)
    -> a Decoded, as an XSpace import makes -> xspace_store.insert_decoded (kinds, steps, rows)

The parse and the mapping run in a DuckDB connection of their own (in memory, spilling to disk
past its memory limit), in SQL: no Python object or step per event. The mapping
(docs/trace-format.md, "Chrome trace JSON mapping"):

- a process is a plane: its `process_name` when it is an XProf plane name (`/device:TPU:0`,
  `/host:CPU`: XProf's and JAX's JSON), `/device:GPU:N` for Kineto's GPU processes (label
  `GPU N`, or kernels and memcpys), else `/host:CPU`; a thread is a line, named by its
  `thread_name` (threads of one name merge, as lines do in an XSpace);
- `X` events are events; `B`/`E` pairs (per thread, nested) are events; instants (`i`, `I`,
  `R`) are zero-length events; `C` samples are counter tracks (`<name> <key>`); metadata (`M`)
  names the planes and lines; flows, async and object events are counted in the run's tags;
- `ts` and `dur` (microseconds, read as decimal text) become picoseconds after the earliest
  event's start; `runs.start_time_unix_ns` is `baseTimeNanoseconds` (Kineto) plus that start,
  or the start itself when it reads as microseconds since 1970;
- `args` are the event's stats: `group_id`, `step_num`, `flops`, `bytes*`, ... fill the typed
  columns as XSpace stats do (numbers may be written as strings), the others, and `cat`, are
  event_args rows;
- steps: Kineto's `ProfilerStep#N` is step N's marker on the host's `Steps` line, events with a
  `step_num` arg (jax.profiler.StepTraceAnnotation) are markers as in an XSpace; Kineto's GPU
  annotations (`gpu_user_annotation`) and profiler spans (`Trace`) go to an `Annotations` line,
  which holds no ops (profiler/sql/stdlib/ops.sql: op_tracks);
- a Kineto trace without GPUs ran its model on the CPU: the threads running `cpu_op` events are
  the CPU device (kind `cpu`, as JAX's XLA threads are), their ops `device_compute`, except ops
  inside a DataLoader's (input) span, which are the input pipeline's (`host_preprocess`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile

import duckdb
import numpy as np
import pyarrow as pa

from profiler import chrome_json_scan as scan
from profiler import sqltree
from profiler.errors import TraceFormatError, one_line
from profiler.xspace import store as xspace_store
from profiler.xspace.check import MAX_TIME_PS, NULL
from profiler.xspace.decode import Decoded, Interner, Tracks
from profiler.xspace.map_kinds import CATEGORY_RULES
from profiler.xspace.map_names import STRING_COLUMNS, TYPED_FIELDS, plane_kind
from profiler.xspace.read import session_run_name

JSON_SUFFIXES = (".json", ".json.gz")
SOURCE = "chrome-json"
# spans over ops (GPU annotations, profiler spans): no ops of their own; these two line names are
# written in profiler/sql/ingest/chrome_json.sql (lines, event_columns)
ANNOTATIONS_LINE = "Annotations"
STEPS_LINE = "Steps"
_INPUT_RE = dict(CATEGORY_RULES["host"])["host_preprocess"]
_Q = "ingest.chrome_json."  # the import's SQL: profiler/sql/ingest/chrome_json.sql


def is_json_path(path: str) -> bool:
    """A Chrome trace JSON file: named `*.json` / `*.json.gz`, or any file whose text starts as JSON."""
    return os.path.isfile(path) and (path.endswith(JSON_SUFFIXES) or scan.sniff(path))


def run_name(path: str) -> str:
    """The run's default name: the file's name without `.pt.trace.json.gz` and the like, or its
    profiler session's name for a file of `.../plugins/profile/<session>/` (xspace/read.py's rule)."""
    base = os.path.basename(path)
    for suffix in (".gz", ".json", ".trace", ".pt"):
        base = base.removesuffix(suffix)
    return session_run_name(path, base or "trace", JSON_SUFFIXES)


def ingest_json_run(con, run_id: int, name: str | None, path: str, insert_arrow) -> dict:
    """Insert the Chrome trace at `path` as run `run_id` (inside the caller's transaction);
    returns the run facts (as xspace_store's, with source, producer and start time set)."""
    d, meta, skipped = decode_json(path)
    facts = xspace_store.insert_decoded(con, run_id, name or run_name(path), d, [path], insert_arrow)
    facts["producer"] = _producer(meta, d)
    facts["start_time_unix_ns"] = _start_ns(meta, d.origin_ns)
    extra = {
        k: meta[k]
        for k in (
            "deviceProperties",
            "distributedInfo",
            "displayTimeUnit",
            "schemaVersion",
            "traceName",
            "baseTimeNanoseconds",
            "metadata",
        )
        if k in meta
    }
    facts["hardware_extra"] = json.dumps({"chrome_trace": extra}, default=str, sort_keys=True)
    tags = json.loads(facts["tags"])
    if skipped:
        tags["json_skipped_events"] = ", ".join(f"{ph}: {n}" for ph, n in sorted(skipped.items()))
    facts["tags"] = json.dumps(tags, sort_keys=True)
    return facts


def _producer(meta: dict, d: Decoded) -> str:
    if "schemaVersion" in meta or "deviceProperties" in meta or "baseTimeNanoseconds" in meta:
        return "pytorch-kineto"
    if any(r["plane"].startswith(("/device:", "/host:")) and r["plane"] != "/host:CPU" for r in d.tracks.rows) or (
        meta.get("metadata", {}).get("highres-ticks") if isinstance(meta.get("metadata"), dict) else False
    ):
        return "xprof-trace-json"
    return "chrome-trace-json"


def _start_ns(meta: dict, origin_us_ns: int) -> int:
    """Wall-clock start: Kineto's baseTimeNanoseconds plus the first event's ts, or the ts itself
    when it reads as an epoch time (after 2001 in microseconds), else 0 (unknown)."""
    base = meta.get("baseTimeNanoseconds")
    if isinstance(base, int) and 0 <= base < 1 << 62:
        return base + origin_us_ns
    return origin_us_ns if origin_us_ns > 10**18 else 0


def decode_json(path: str) -> tuple[Decoded, dict, dict[str, int]]:
    """The trace's events as a Decoded (what an XSpace decode gives), its top-level metadata and
    the events of phases it does not store, counted by phase."""
    meta: dict = {}
    digest = hashlib.sha1()
    with tempfile.TemporaryDirectory(prefix="scprof-json-") as tmp:
        con = duckdb.connect(":memory:")
        try:
            sqltree.execute(con, _Q + "no_progress_bar")
            # its tables spill to the temporary directory past the limit (an in-memory database has none)
            sqltree.execute(con, _Q + "spill_to", dir=os.path.join(tmp, "spill"))
            sqltree.execute(con, _Q + "memory_limit")  # 1GB
            sqltree.execute(con, _Q + "create_raw")
            block_path = os.path.join(tmp, "block.ndjson")
            for block in scan.ndjson_blocks(path, meta, digest):
                with open(block_path, "wb") as f:
                    f.write(block)
                try:
                    sqltree.execute(con, _Q + "read_block", path=block_path)
                except duckdb.Error as e:
                    raise TraceFormatError(f"{path}: not valid trace JSON ({_clean(one_line(e), tmp)})") from None
            if os.path.exists(block_path):  # the blocks are in the table: free the disk for its spill
                os.remove(block_path)
            return _map(con, path, digest.digest(), meta)
        finally:
            con.close()


def _clean(message: str, tmp: str) -> str:
    """DuckDB's message without our temporary file's name."""
    return message.replace(os.path.join(tmp, "block.ndjson"), "the trace")[:300]


def _arrow(con, path: str, name: str, **params) -> pa.Table:
    """The query `name` of ingest.chrome_json as an Arrow table (errors as _sql's)."""
    try:
        return sqltree.query(con, _Q + name, **params)
    except duckdb.Error as e:
        raise TraceFormatError(f"{path}: {one_line(e)[:300]}") from None


def _sql(con, path: str, name: str, **params):
    """Run the statement or query `name` of ingest.chrome_json; a DuckDB error is the trace's."""
    try:
        return sqltree.execute(con, _Q + name, **params)
    except duckdb.Error as e:
        raise TraceFormatError(f"{path}: {one_line(e)[:300]}") from None


def _map(con, path: str, sha1: bytes, meta: dict) -> tuple[Decoded, dict, dict[str, int]]:
    """The table `raw` mapped onto a Decoded."""
    for name in ("planes", "threads", "events", "lines"):  # step 1: planes and lines; step 2: the events
        _sql(con, path, name)
    skipped = dict(_sql(con, path, "skipped").fetchall())
    skipped = {str(k): int(v) for k, v in skipped.items()}
    n, bad = _sql(con, path, "event_count").fetchall()[0]
    counters = _sql(con, path, "counter_count").fetchall()[0][0]
    if bad is not None:
        raise TraceFormatError(f"{path}: event {bad}: ts is missing or not a number")
    if not n and not counters:
        raise TraceFormatError(f"{path}: the trace holds no events")
    origin = _sql(con, path, "origin").fetchall()[0][0]
    _times(con, path, origin)
    d = Decoded(int(origin * 1000), [sha1])
    d.host_prefixes = [""]
    typed = _typed(con, path)
    _strings(con, path, d)
    tracks = _tracks(con, path, d)
    ev = _event_columns(con, path, d, tracks, typed, n)
    _categories(con, path, d, ev, tracks)
    d.events, d.n_events, d.capacity = ev, n, n
    _args(con, path, d, typed)
    _counters(con, path, d, origin)
    return d, meta, skipped


def _times(con, path: str, origin) -> None:
    """Start and duration in ps after the origin, checked (as the XSpace import's limits)."""
    _sql(con, path, "times", origin=origin)
    row = _sql(con, path, "bad_time", max_time_ps=MAX_TIME_PS).fetchall()
    if row:
        i, start, dur = row[0]
        what = (
            f"dur = {dur / 1e6:g} us: negative"
            if dur < 0
            else f"ends {(start + dur) / 1e6:g} us after the first event (over 2^62 ps)"
        )
        raise TraceFormatError(f"{path}: event {i}: {what}")


def _typed(con, path: str) -> dict[str, str]:
    """Every arg as a row, parsed once (table `arg_rows`: i, key, int, double or text value, and
    whether it fills a typed column), and the typed columns' values (table `typed`: i, field, int
    or string value; the stat names read per field, later names winning, numbers written as strings
    read too). Returns field -> 'int' or 'str'."""
    for name in ("create_typed_names", "typed_names", "arg_rows"):
        _sql(con, path, name)
    _sql(con, path, "untyped_args", null_int=NULL)
    _sql(con, path, "typed")
    strings = set(STRING_COLUMNS)
    return {f.name: ("str" if f.name in strings else "int") for f in TYPED_FIELDS}


def _strings(con, path: str, d: Decoded) -> None:
    """Every string the run stores, interned in SQL (table `strs`: s, id) and in d.strings."""
    _sql(con, path, "strings")
    values = [""] + [None] * _sql(con, path, "string_count").fetchall()[0][0]
    t = _arrow(con, path, "string_ids")
    for i, s in zip(t.column("id").to_pylist(), t.column("s").to_pylist(), strict=True):
        values[i] = s
    d.strings = Interner(values, dict(zip(values, range(len(values)), strict=True)))


def _tracks(con, path: str, d: Decoded) -> dict[tuple[str, str], int]:
    """One track per (plane, line); a Kineto trace without GPUs: its op threads are the CPU device."""
    rows = _sql(con, path, "tracks").fetchall()
    cpu_device = not any(plane_kind(p)[0] != "host" for p, *_ in rows)
    d.tracks = Tracks()
    for plane, line, _, ops in rows:
        kind, chip, core = plane_kind(plane)
        if cpu_device and ops and line not in (STEPS_LINE, ANNOTATIONS_LINE):
            kind, chip, core = "cpu", 0, 0
        d.tracks(plane, line, kind, chip, core)
    t = [(tid, r["plane"], r["line"]) for r in d.tracks.rows for tid in [r["track_id"]]]
    _sql(con, path, "create_track_ids")
    con.executemany(sqltree.get(_Q + "track_id").sql, [{"track": tid, "plane": p, "line": ln} for tid, p, ln in t])
    return {(p, ln): tid for tid, p, ln in t}


def _event_columns(con, path: str, d: Decoded, tracks, typed: dict[str, str], n: int) -> dict[str, np.ndarray]:
    """The Decoded's events columns, in file order (event_id = position)."""
    _sql(con, path, "event_columns")  # a column f_<field> per typed field (tools/gen_sql.py writes it)
    a = _arrow(con, path, "event_rows")
    col = {c: a.column(c).to_numpy(zero_copy_only=False) for c in a.column_names}

    def ints(c: str) -> np.ndarray:
        return a.column(c).cast(pa.int64()).fill_null(NULL).to_numpy().copy()

    ev = {
        "track": col["track"].astype(np.int32),
        "name": np.where(
            a.column("name").is_null().to_numpy(zero_copy_only=False), 0, a.column("name").fill_null(0).to_numpy()
        ).astype(np.int64),
        "start_ps": col["start_ps"].astype(np.int64),
        "dur_ps": col["dur_ps"].astype(np.int64),
        "plane_id": col["plane_id"].astype(np.int64),
        "is_step_line": col["is_step_line"].astype(bool),
        "only_marker": np.zeros(n, bool),
    }
    for f in typed:
        ev[f] = ints(f"f_{f}")
    prof = ints("profiler_step")
    ev["step"] = np.where(ev["is_step_line"] & (prof != NULL), prof, ev["step"])
    ev["has_step_num"] = col["has_step_num"].astype(bool) & (ev["step"] != NULL)
    return ev


def _categories(con, path: str, d: Decoded, ev: dict[str, np.ndarray], tracks) -> None:
    """On a Kineto CPU device: ops are device_compute, ops inside an input span host_preprocess
    (the rest is profiler/xspace/map_kinds.py's classify, by name, as for any capture)."""
    cpu_tracks = [r["track_id"] for r in d.tracks.rows if r["kind"] == "cpu"]
    if not cpu_tracks:
        return
    cat = _arrow(con, path, "cpu_ops")
    is_op = cat.column("op").fill_null(False).to_numpy(zero_copy_only=False) & np.isin(ev["track"], cpu_tracks)
    uniq, inv = np.unique(ev["name"], return_inverse=True)
    named = np.array([bool(re.search(_INPUT_RE, d.strings.values[s])) for s in uniq.tolist()], bool)
    is_input = named[inv.ravel()] & np.isin(ev["track"], cpu_tracks)
    ev["category"][is_op & (ev["category"] == NULL)] = d.strings("device_compute")
    end = ev["start_ps"] + ev["dur_ps"]
    for t in cpu_tracks:  # per track: input spans sorted by start, each op looked up among them
        spans = np.flatnonzero(is_input & (ev["track"] == t))
        ops = np.flatnonzero(is_op & (ev["track"] == t))
        if not spans.size or not ops.size:
            continue
        spans = spans[np.argsort(ev["start_ps"][spans], kind="stable")]
        reach = np.maximum.accumulate(end[spans])  # the furthest end of any span starting before
        k = np.searchsorted(ev["start_ps"][spans], ev["start_ps"][ops], side="right") - 1
        inside = (k >= 0) & (end[ops] <= reach[np.maximum(k, 0)])
        ev["category"][ops[inside]] = d.strings("host_preprocess")


def _args(con, path: str, d: Decoded, typed: dict[str, str]) -> None:
    """Every arg not read into a typed column, and `cat`, as event_args rows."""
    t = _arrow(con, path, "args")
    if not len(t):
        return
    iv = t.column("int_value")
    d.args = {
        "event_id": [t.column("event_id").to_numpy().astype(np.int64)],
        "key": [t.column("key").to_numpy().astype(np.int64)],
        "int_value": [iv.fill_null(NULL).to_numpy().astype(np.int64)],
        "double_value": [t.column("double_value").fill_null(np.nan).to_numpy().astype(np.float64)],
        "string_id": [t.column("string_id").fill_null(0).to_numpy().astype(np.int64)],
    }


def _counters(con, path: str, d: Decoded, origin) -> None:
    """`C` events: one counter track per (plane, name and key), a sample per event and key."""
    _sql(con, path, "samples", origin=origin)
    if (i := _sql(con, path, "bad_sample", max_time_ps=MAX_TIME_PS).fetchall()[0][0]) is not None:
        raise TraceFormatError(f"{path}: event {i}: a counter sample's ts is missing or out of range")
    for plane, counter in _sql(con, path, "counters").fetchall():
        track = d.tracks(plane, counter, "counter", plane_kind(plane)[1], -1)
        t = _arrow(con, path, "counter_samples", plane=plane, counter=counter)
        d.add_counter(track, t.column("ts").to_numpy(), t.column("value").to_numpy())

"""Ingest a native scprof trace into the store, in one transaction per run.

Events stream from the file in groups of about a million rows, each grouped by
track and handed to DuckDB as an Arrow table, so memory stays bounded and no
Python code runs per event. Nulls travel as sentinels and become
SQL NULL in the INSERT. Any error rolls the whole run back.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from profiler import chrome_json_to_store, sqltree
from profiler import scprof_trace_pb2 as pb
from profiler.errors import StoreError
from profiler.reader import Batch, TraceReader, concat_batches, read_header
from profiler.store import Store
from profiler.summaries import build_summaries
from profiler.trace_fields import TYPED_FIELDS
from profiler.xspace import read as xspace_read
from profiler.xspace import store as xspace_store

GROUP_ROWS = 1 << 20

TRACK_KIND_NAMES = {
    pb.TRACK_KIND_UNSPECIFIED: "unknown",
    pb.TRACK_KIND_HOST: "host",
    pb.TRACK_KIND_TENSORCORE: "tensorcore",
    pb.TRACK_KIND_SPARSECORE: "sparsecore",
    pb.TRACK_KIND_SC_TILE: "sc_tile",
    pb.TRACK_KIND_COUNTER: "counter",
}

# `table` is a SQL keyword: its Arrow column is `tbl` (profiler/sql/ingest/trace.sql)
_ARROW_NAME = {"table": "tbl"}
_Q = "ingest.trace."  # the store's writes of an ingest: profiler/sql/ingest/trace.sql

JSON = "json"  # ingest_traces' header of a Chrome trace JSON path

EVENT_DEFAULTS = {f.name: f.null for f in TYPED_FIELDS}  # a typed column a batch lacks: all null


@dataclass
class IngestResult:
    """What an ingest added to the store."""

    run_id: int
    name: str
    uuid: str
    events: int
    status: str
    cut_message: str | None


def ingest_traces(
    store: Store,
    paths: list[str],
    name: str | None = None,
    replace: bool = False,
    allow_truncated: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[IngestResult]:
    """Ingest trace files as new runs, all in one transaction: all land or none.

    `progress(done_bytes, total_bytes)` is called as the files are read.

    A path is a native scprof trace, an XProf capture: a `.xplane.pb` file, a run
    directory `plugins/profile/<run>/` (one file per host) or a logdir holding such
    run directories (each becomes a run), which go to profiler/xspace/store.py, or a
    Chrome trace JSON file (profiler/chrome_json_to_store.py).
    """
    if name is not None and len(paths) != 1:
        raise StoreError("--name: give one trace file when naming the run")
    headers = []  # cheap checks before any write; None: an XProf capture, JSON: a Chrome trace
    for p in paths:
        if xspace_store.is_xplane_path(p):
            xspace_store.check_path(p)
            headers.append(None)
        elif chrome_json_to_store.is_json_path(p):
            headers.append(JSON)
        else:
            headers.append(read_header(p))
    _refuse_repeats(paths, headers)
    sizes = [_size(p) for p in paths]
    store.con.begin()
    try:
        results = []
        added: dict[int, str] = {}  # run_id -> path, runs of this call
        for i, (p, h) in enumerate(zip(paths, headers, strict=True)):
            done = sum(sizes[:i])
            report = None if progress is None else (lambda b, d=done: progress(d + b, sum(sizes)))
            if h is None:
                results += _ingest_xplane(store, p, name, replace, added)
            elif h is JSON:
                results.append(_ingest_json(store, p, name, replace, added))
            else:
                results.append(_ingest_one(store, p, h, name, replace, allow_truncated, report, added))
        if progress is not None:
            progress(sum(sizes), sum(sizes))
        store.con.commit()
    except BaseException:
        # A COMMIT the disk refused has ended the transaction already: keep its error, not ROLLBACK's.
        with contextlib.suppress(duckdb.Error):
            store.con.rollback()
        raise
    return results


def ingest_trace(
    store: Store, path: str, name: str | None = None, replace: bool = False, allow_truncated: bool = False
) -> IngestResult:
    """Ingest one trace file as a new run; all or nothing."""
    return ingest_traces(store, [path], name, replace, allow_truncated)[0]


def _refuse_repeats(paths: list[str], headers: list) -> None:
    """The same file given twice (directly, through a link, or inside a run directory) would import twice."""
    seen: dict[tuple[int, int], str] = {}
    for p, h in zip(paths, headers, strict=True):
        for f in xspace_read.files_of(p) if h is None else [p]:  # (a JSON file is one file)
            st = os.stat(f)
            key = (st.st_dev, st.st_ino)
            if key in seen:
                raise StoreError(f"{f}: given twice (also as {seen[key]}); each capture imports once")
            seen[key] = f


def _size(path: str) -> int:
    """Bytes under a path (a file, or the files of an XProf run directory)."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def _ingest_one(
    store: Store,
    path: str,
    header: pb.Header,
    name: str | None,
    replace: bool,
    allow_truncated: bool,
    progress: Callable[[int], None] | None = None,
    added: dict[int, str] | None = None,
) -> IngestResult:
    name = name or header.run_name or header.run_id
    con = store.con
    _make_room(store, header.run_id, name, replace, path, added)
    run_id = sqltree.execute(con, _Q + "next_run_id").fetchall()[0][0]
    reader = TraceReader(path, allow_truncated)
    progress = _ingest_batches(con, run_id, reader, progress)
    strings = pa.table({"string_id": np.arange(len(reader.strings), dtype=np.int32), "value": reader.strings})
    _insert_arrow(con, _Q + "insert_strings", run_id, strings)
    _insert_tracks(con, run_id, reader.tracks)
    for kind in ("partition_stats", "args"):
        for t in progress.deferred[kind]:
            _insert_arrow(con, _Q + "insert_" + kind, run_id, t)
    _insert_run(con, run_id, name, path, reader)
    build_summaries(con, run_id)
    if added is not None:
        added[run_id] = path
    cut = reader.cut
    return IngestResult(run_id, name, header.run_id, progress.rows, run_status(reader), cut.message() if cut else None)


def _ingest_xplane(
    store: Store, path: str, name: str | None, replace: bool, added: dict[int, str] | None = None
) -> list[IngestResult]:
    """Ingest the XProf run(s) at `path` (inside the caller's transaction)."""
    runs = xspace_store.find_runs(path)
    if name is not None and len(runs) > 1:
        raise StoreError(f"--name: {path} holds {len(runs)} runs; name them one at a time")
    results = []
    for run_name, files in runs:
        con = store.con
        run_id = sqltree.execute(con, _Q + "next_run_id").fetchall()[0][0]
        facts = xspace_store.ingest_xplane_run(con, run_id, run_name, files, _insert_arrow)
        facts["name"] = name or facts["name"]
        _make_room(store, facts["uuid"], facts["name"], replace, path, added)
        events = _insert_imported_run(con, run_id, facts, "xplane", path)
        build_summaries(con, run_id)
        if added is not None:
            added[run_id] = path
        results.append(IngestResult(run_id, facts["name"], facts["uuid"], events, "ok", None))
    return results


def _ingest_json(
    store: Store, path: str, name: str | None, replace: bool, added: dict[int, str] | None = None
) -> IngestResult:
    """Ingest the Chrome trace JSON at `path` as one run (inside the caller's transaction)."""
    con = store.con
    run_id = sqltree.execute(con, _Q + "next_run_id").fetchall()[0][0]
    facts = chrome_json_to_store.ingest_json_run(con, run_id, name, path, _insert_arrow)
    _make_room(store, facts["uuid"], facts["name"], replace, path, added)
    events = _insert_imported_run(con, run_id, facts, chrome_json_to_store.SOURCE, path)
    build_summaries(con, run_id)
    if added is not None:
        added[run_id] = path
    return IngestResult(run_id, facts["name"], facts["uuid"], events, "ok", None)


def _insert_imported_run(con, run_id: int, f: dict, source: str, path: str) -> int:
    """The runs row of an imported capture (its facts `f`: profiler/xspace/map_facts.py's run_facts); returns its events."""
    figures = dict(zip(("events", "first_ps", "last_ps", "steps"), _run_figures(con, run_id), strict=True))
    sqltree.execute(
        con,
        _Q + "insert_run",
        run_id=run_id,
        uuid=f["uuid"],
        name=f["name"],
        source=source,
        source_path=path,
        producer=f["producer"],
        format_version=None,
        status="ok",
        truncated_at_byte=None,
        start_time_unix_ns=f["start_time_unix_ns"],
        **{k: f[k] for k in _HARDWARE},
        hardware_extra=f["hardware_extra"],
        config=f["config"],
        tags=f["tags"],
        **figures,
    )
    return figures["events"]


_HARDWARE = (
    "generation",
    "num_chips",
    "sparsecores_per_chip",
    "tiles_per_sparsecore",
    "simd_width",
    "hbm_bytes",
    "hbm_bandwidth_bytes_per_s",
    "tc_peak_flops",
    "ici_bandwidth_bytes_per_s",
    "spmem_bytes_per_tile",
)


def _run_figures(con, run_id: int) -> tuple:
    """A run's events, first start, last end and distinct steps, once its rows are in."""
    return sqltree.execute(con, _Q + "run_figures", run=run_id).fetchall()[0]


def _make_room(
    store: Store, uuid: str, name: str, replace: bool, path: str = "", added: dict[int, str] | None = None
) -> None:
    """Refuse (or with replace, delete) runs with the same uuid or name; a run of this same call
    (`added`: run_id -> path) is never replaced: two paths of one command hold the same run."""
    clash = sqltree.execute(store.con, _Q + "clashes", uuid=uuid, name=name).fetchall()
    if not clash:
        return
    for run_id, _, old_uuid in clash:
        if added and run_id in added:
            if old_uuid == uuid:
                raise StoreError(f"{path}: the same run as {added[run_id]}, given on the same command")
            raise StoreError(
                f"{path}: run name {name!r} is also that of {added[run_id]}, given on the same "
                "command; ingest them one at a time (with --name)"
            )
    if not replace:
        run_id, old_name, old_uuid = clash[0]
        if old_uuid == uuid:
            raise StoreError(f"{store.path}: already holds this run (uuid {uuid}, run_id {run_id}); pass --replace")
        raise StoreError(
            f"{store.path}: already holds a run named {name!r} (run_id {run_id}); pass --replace or --name"
        )
    for run_id, _, _ in clash:
        delete_run(store, run_id)


def delete_run(store: Store, run_id: int) -> None:
    """Remove a run's rows from every table (inside the caller's transaction)."""
    from profiler.schema import TABLES

    for t in TABLES:
        if any(c.name == "run_id" for c in t.columns):
            sqltree.execute(store.con, f"{_Q}delete_{t.name}", run=run_id)  # one statement per table


@dataclass
class _Progress:
    rows: int
    deferred: dict[str, list[pa.Table]]


def _ingest_batches(con, run_id: int, reader: TraceReader, report: Callable[[int], None] | None = None) -> _Progress:
    """Stream all data batches into their tables; string-resolving ones are deferred."""
    progress = _Progress(0, {"partition_stats": [], "args": []})
    pending: dict[str, list[Batch]] = {"events": [], "counters": [], "steps": []}
    pending_rows = dict.fromkeys(pending, 0)
    for batch in reader.batches():
        if report is not None:
            report(batch.offset)
        if batch.kind == "partition_stats":
            progress.deferred["partition_stats"].append(_partition_table(batch))
            continue
        pending[batch.kind].append(batch)
        pending_rows[batch.kind] += batch.rows
        if pending_rows[batch.kind] >= GROUP_ROWS:
            _flush(con, run_id, batch.kind, pending, progress)
            pending_rows[batch.kind] = 0
    for kind in pending:
        _flush(con, run_id, kind, pending, progress)
    return progress


def _flush(con, run_id: int, kind: str, pending: dict[str, list[Batch]], progress: _Progress) -> None:
    batches, pending[kind] = pending[kind], []
    if not batches:
        return
    cols = concat_batches(kind, batches)
    if kind == "events":
        n = len(cols["track"])
        # Rows are stored grouped by track within each group (file order kept within a track,
        # event_id still the file order): a scan then reads each track's events in long runs,
        # which the analyzers' per-track searches (analyzers/op_arrays.py) gather cheaply.
        order = _grouping(cols["track"])
        dest = np.empty_like(order)  # each row's position in the grouped order
        dest[order] = np.arange(n)

        def grouped(col: np.ndarray) -> np.ndarray:
            # a scatter: reads in file order and writes one stream per track, about twice
            # as fast as gathering by `order` (which jumps between tracks on every read)
            out = np.empty_like(col)
            out[dest] = col
            return out

        data = {
            "event_id": progress.rows + order,
            "track": grouped(cols["track"]),
            "name": grouped(cols["name"]),
            "start_ps": grouped(cols["start_ps"]),
            "dur_ps": grouped(cols["dur_ps"]),
        }
        for col, null in EVENT_DEFAULTS.items():
            key = _ARROW_NAME.get(col, col)
            data[key] = (
                grouped(cols[col]) if col in cols else pa.nulls(n, pa.int64()) if null else pa.nulls(n, pa.uint32())
            )
        _insert_arrow(con, _Q + "insert_events", run_id, pa.table(data))
        if "arg_event" in cols:
            progress.deferred["args"].append(
                pa.table(
                    {
                        "event_id": cols["arg_event"].astype(np.int64) + progress.rows,
                        "key": cols["arg_key"],
                        "kind": cols["arg_kind"],
                        "int_value": cols["arg_int"],
                        "double_value": cols["arg_double"],
                        "string_id": cols["arg_string"],
                    }
                )
            )
        progress.rows += n
    elif kind == "counters":
        _insert_arrow(con, _Q + "insert_counters", run_id, pa.table(cols))
    elif kind == "steps":
        _insert_arrow(con, _Q + "insert_steps", run_id, pa.table(cols))


def _grouping(track: np.ndarray) -> np.ndarray:
    """The row order that groups rows by track, keeping their order within a track (int64 indices)."""
    if len(track) and int(track.max()) < 1 << 16:
        return np.argsort(track.astype(np.uint16), kind="stable").astype(np.int64)  # a radix sort
    return np.argsort(track, kind="stable").astype(np.int64)


def _partition_table(batch: Batch) -> pa.Table:
    cols = concat_batches("partition_stats", [batch])
    n = batch.rows
    names = (
        "step",
        "chip",
        "sc",
        "table",
        "ids",
        "unique_ids",
        "max_ids_per_partition",
        "max_unique_ids_per_partition",
        "minibatches",
        "dropped_ids",
    )
    data = {}
    for name in names:
        key = "tbl" if name == "table" else name
        data[key] = cols[name] if name in cols else pa.nulls(n, pa.int64())
    return pa.table(data)


def _insert_arrow(con, statement: str, run_id: int, table: pa.Table) -> None:
    """Run the tree's INSERT `statement` (module.name: one @input b, one @param run) with the
    Arrow table as `b`."""
    sqltree.execute(con, statement, {"b": table}, run=run_id)


def _insert_tracks(con, run_id: int, tracks: list[pb.Track]) -> None:
    table = pa.table(
        {
            "track_id": [t.id for t in tracks],
            "plane": [t.plane for t in tracks],
            "line": [t.line for t in tracks],
            "kind": [TRACK_KIND_NAMES.get(t.kind, "unknown") for t in tracks],
            "chip": [t.chip for t in tracks],
            "core": [t.core for t in tracks],
            "tile": [t.tile for t in tracks],
            "unit": [t.unit for t in tracks],
        }
    )
    _insert_arrow(con, _Q + "insert_tracks", run_id, table)


def run_status(reader: TraceReader) -> str:
    """truncated (file cut short), failed (the producer tagged a failure: compile error, OOM), or ok."""
    if reader.cut:
        return "truncated"
    return "failed" if reader.header.tags.get("status") == "failed" else "ok"


def _insert_run(con, run_id: int, name: str, path: str, reader: TraceReader) -> None:
    h = reader.header
    hw = h.hardware
    events, first_ps, last_ps, steps = _run_figures(con, run_id)
    sqltree.execute(
        con,
        _Q + "insert_run",
        run_id=run_id,
        uuid=h.run_id,
        name=name,
        source="scprof-trace",
        source_path=path,
        producer=h.producer,
        format_version=h.format_version,
        status=run_status(reader),
        truncated_at_byte=reader.cut.offset if reader.cut else None,
        start_time_unix_ns=h.start_time_unix_ns,
        **{k: getattr(hw, k) or None for k in _HARDWARE},  # proto3 zero means "unknown"
        hardware_extra=hw.extra_json or "{}",
        config=h.config_json or "{}",
        tags=json.dumps(dict(h.tags), sort_keys=True),
        events=events,
        first_ps=first_ps,
        last_ps=last_ps,
        steps=steps,
    )

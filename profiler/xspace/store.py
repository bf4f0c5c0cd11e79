"""Ingest XProf captures (`.xplane.pb` XSpace files) into the store as runs.

    logdir/plugins/profile/<run>/<host>.xplane.pb  ->  runs, tracks, events, steps, counters

Called by `trace_to_store.ingest_traces` inside its transaction, so a bad file
leaves the store as it was. The mapping (both directions) is documented in
docs/trace-format.md, "XSpace mapping", and its names are profiler/xspace/map_names.py's;
in short:

- each plane line is a track (plane name, line name); kind, chip and core come from
  XProf's plane names (`/device:TPU:N`, `/device:TPU:N SparseCore M`, `/host:...`);
- event time is `line.timestamp_ns * 1000 + offset_ps`, stored relative to the
  run's `start_time_unix_ns` (the earliest line origin) so it fits int64 ps;
- stats on the event and on its event metadata are resolved through the plane's
  stat metadata; names in `TYPED_FIELDS` fill typed columns, all others become
  event_args (bytes values as a `<N bytes>` placeholder), none are dropped;
- steps come from `group_id` / `step_num` stats and `Steps` / `Sparse Core Steps`
  lines; events without a step inherit the step whose marker contains them;
- `_counters_` lines and `MemoryAllocation` / `MemoryDeallocation` events give
  counter tracks.

Decoding (files -> columns) is profiler/xspace/decode.py's; this module derives the steps
and inserts the rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from profiler.errors import TraceFormatError
from profiler.xspace import check as chk
from profiler.xspace import source
from profiler.xspace.check import NULL
from profiler.xspace.decode import Decoded, decode_files
from profiler.xspace.map_facts import run_facts
from profiler.xspace.map_kinds import classify, host_index
from profiler.xspace.map_names import HOST_PLANE_PREFIX, TYPED_FIELDS
from profiler.xspace.read import check_path, find_runs, is_xplane_path  # noqa: F401 - trace_to_store's


def ingest_xplane_run(con, run_id: int, name: str, files: list[str], insert_arrow) -> dict:
    """Insert one decoded capture as run `run_id` (inside the caller's transaction).

    Returns the run facts (uuid, events, ...). `insert_arrow(con, statement, run_id, table)`
    is trace_to_store's helper.
    """
    return insert_decoded(con, run_id, name, decode_files(files), files, insert_arrow)


def insert_decoded(con, run_id: int, name: str, d: Decoded, files: list[str], insert_arrow) -> dict:
    """Insert a capture decoded into store-shaped columns (an XSpace's, or a Chrome trace JSON's:
    profiler/chrome_json_to_store.py) as run `run_id`: kinds and categories, steps, the rows."""
    ev = dict(d.events)
    if "start_ps" not in ev or not len(ev["start_ps"]):
        raise TraceFormatError(f"{files[0]}: XSpace holds no events")
    n = len(ev["start_ps"])
    ev["step_num_marker"] = _step_num_markers(d, ev, n)
    only_marker = ev.pop("only_marker")
    ev["is_step_line"] = ev["is_step_line"] | only_marker
    chk.check_totals(files[0], ev)
    classify(d, ev)
    step, markers = _steps(d, ev, files[0])
    keep = ~only_marker
    if not keep.all():
        n = int(keep.sum())
        if d.args:
            new_id = np.cumsum(keep) - 1
            old = np.concatenate(d.args["event_id"])
            ok = keep[old]
            d.args = {k: [np.concatenate(v)[ok]] for k, v in d.args.items()}
            d.args["event_id"] = [new_id[old[ok]]]
    column = _kept_rows(keep)
    table = pa.table(
        {
            "event_id": np.arange(n, dtype=np.int64),
            "track_id": column(ev["track"]),
            "name_id": column(ev["name"]),
            "start_ps": column(ev["start_ps"]),
            "dur_ps": column(ev["dur_ps"]),
            "step": column(step, True),
            **{f.column: column(ev[f.name], True) for f in TYPED_FIELDS if f.name != "step"},
        }
    )
    insert_arrow(con, "ingest.xspace.insert_events", run_id, table)
    if d.kept is not None and keep.all():  # (events dropped as markers would shift the kept events' ids)
        source.insert(con, run_id, d.kept, insert_arrow)
    if d.args:
        a = {k: np.concatenate(v) for k, v in d.args.items()}
        args = pa.table(
            {
                "event_id": a["event_id"],
                "key": a["key"],
                "int_value": _nullable(a["int_value"]),
                "double_value": pa.array(a["double_value"], mask=np.isnan(a["double_value"])),
                "string_id": a["string_id"],
            }
        )
    if d.counters:
        c = {k: np.concatenate(v) for k, v in d.counters.items()}
        insert_arrow(con, "ingest.trace.insert_counters", run_id, pa.table(c))
    if len(markers["start_ps"]):
        m = pa.table({k: np.asarray(markers[k], np.int64) for k in ("track", "step", "start_ps", "dur_ps")})
        insert_arrow(con, "ingest.trace.insert_steps", run_id, m)
    strings = pa.table({"string_id": np.arange(len(d.strings.values), dtype=np.int32), "value": d.strings.values})
    insert_arrow(con, "ingest.trace.insert_strings", run_id, strings)
    if d.args:
        insert_arrow(con, "ingest.xspace.insert_args", run_id, args)
    tracks = pa.Table.from_pylist(d.tracks.rows)
    insert_arrow(con, "ingest.trace.insert_tracks", run_id, tracks)
    return run_facts(d, files, name, d.digests)


def _nullable(a: np.ndarray) -> pa.Array:
    """An int64 column whose NULL sentinel rows are null (the values are not copied)."""
    return pa.array(a, pa.int64(), mask=(a == NULL))


_MAX_RUNS = 64  # runs of kept events inserted as slices (no copy); more: the kept rows are gathered


def _kept_rows(keep: np.ndarray):
    """`column(values, nulls=False)`: an events column's rows where `keep` (NULL as null with `nulls`),
    as Arrow. Dropped rows (step markers only) come in a few blocks (Steps lines): the kept runs
    between them are zero-copy slices of the decoded columns, a chunked array."""

    def arrow(a: np.ndarray, nulls: bool = False):
        return _nullable(a) if nulls else a

    if keep.all():
        return arrow
    edges = np.flatnonzero(np.diff(np.concatenate([[0], keep.view(np.int8), [0]])))
    runs = list(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))
    if len(runs) > _MAX_RUNS:
        return lambda a, nulls=False: arrow(a[keep], nulls)
    return lambda a, nulls=False: pa.chunked_array(
        [arrow(a[lo:hi], nulls) for lo, hi in runs], pa.int64() if nulls else pa.from_numpy_dtype(a.dtype)
    )


def _step_num_markers(d: Decoded, ev: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Events carrying a `step_num` stat (e.g. jax.profiler.StepTraceAnnotation) mark a step."""
    return ev.pop("has_step_num") if "has_step_num" in ev else np.zeros(n, bool)


def _steps(d: Decoded, ev: dict[str, np.ndarray], files_hint: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """events.step (filled by containment) and the step markers."""
    n = len(ev["start_ps"])
    step = ev["step"] if "step" in ev else np.full(n, NULL, np.int64)
    step = step.copy()
    has_num = ev.get("step_num_marker", np.zeros(n, bool))
    is_marker = ev["is_step_line"] | has_num
    mk = np.flatnonzero(is_marker)
    m_step = step[mk].copy()
    # Steps-line events without a step stat: XProf names them by step number.
    missing = np.flatnonzero(m_step == NULL)
    if missing.size:  # one Python step per distinct name
        uniq, first, inv = np.unique(ev["name"][mk[missing]], return_index=True, return_inverse=True)
        track_of = {r["track_id"]: r for r in d.tracks.rows}

        def where(i: int) -> str:
            t = track_of[int(ev["track"][mk[missing[first[i]]]])]
            return f"{files_hint}: plane {t['plane']!r} line {t['line']!r}"

        num = chk.step_numbers([d.strings.values[i] for i in uniq.tolist()], where)[inv.ravel()]
        m_step[missing] = np.where(num >= 0, num, missing)
        step[mk] = m_step
    markers = {
        "track": ev["track"][mk],
        "step": m_step,
        "start_ps": ev["start_ps"][mk],
        "dur_ps": ev["dur_ps"][mk],
        "plane": ev["plane_id"][mk],
    }
    if not mk.size and (step != NULL).any():
        # Only group_id stats: one marker per plane and step, spanning its events.
        sel = np.flatnonzero(step != NULL)
        key = np.stack([ev["plane_id"][sel], step[sel]], 1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.ravel()
        lo = np.full(len(uniq), np.iinfo(np.int64).max)
        hi = np.full(len(uniq), np.iinfo(np.int64).min)
        np.minimum.at(lo, inv, ev["start_ps"][sel])
        np.maximum.at(hi, inv, ev["start_ps"][sel] + ev["dur_ps"][sel])
        first_track = np.zeros(len(uniq), np.int64)
        first_track[inv[::-1]] = ev["track"][sel][::-1]
        markers = {"track": first_track, "step": uniq[:, 1], "start_ps": lo, "dur_ps": hi - lo, "plane": uniq[:, 0]}
    # Containment: an event without a step takes the step of its plane's marker around its start.
    todo = step == NULL
    if todo.any() and len(markers["start_ps"]):
        for plane in np.unique(markers["plane"]).tolist():
            _contain(ev, step, np.flatnonzero(todo & (ev["plane_id"] == plane)), markers, markers["plane"] == plane)
    _host_steps(d, ev, step, markers)
    return step, markers


def _contain(
    ev: dict[str, np.ndarray], step: np.ndarray, sel: np.ndarray, markers: dict[str, np.ndarray], chosen: np.ndarray
) -> None:
    """Events `sel` take the step of the `chosen` marker whose span contains their start, if any."""
    order = np.argsort(markers["start_ps"][chosen], kind="stable")
    ms, mstep = markers["start_ps"][chosen][order], markers["step"][chosen][order]
    me = ms + markers["dur_ps"][chosen][order]
    k = np.searchsorted(ms, ev["start_ps"][sel], side="right") - 1
    ok = (k >= 0) & (ev["start_ps"][sel] < me[np.maximum(k, 0)])
    step[sel[ok]] = mstep[k[ok]]


def _host_steps(d: Decoded, ev: dict[str, np.ndarray], step: np.ndarray, markers: dict[str, np.ndarray]) -> None:
    """An event of a plane without step markers of its own (a GPU's streams) takes the step of its
    host's step marker around its start: the device work a host step launched belongs to it."""
    todo = step == NULL
    if not todo.any() or not len(markers["start_ps"]):
        return
    plane_name = d.strings.values
    own = set(np.unique(markers["plane"]).tolist())
    host_planes = {}  # host prefix -> its host planes that hold markers
    for p in own:
        if HOST_PLANE_PREFIX in plane_name[p]:
            host_planes.setdefault(host_index(d, plane_name[p]), []).append(p)
    for plane in np.unique(ev["plane_id"][todo]).tolist():
        src = host_planes.get(host_index(d, plane_name[plane]))
        if plane in own or not src:
            continue
        _contain(ev, step, np.flatnonzero(todo & (ev["plane_id"] == plane)), markers, np.isin(markers["plane"], src))

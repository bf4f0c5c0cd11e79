"""Export a run as an XProf XSpace (`.xplane.pb`) that XProf / TensorBoard open.

    scprof export xspace RUN -o run.xplane.pb

Conventions XProf reads (see docs/trace-format.md, "XSpace mapping"):
- one plane per track plane: `/device:TPU:N` (TensorCore), `/device:TPU:N SparseCore M`,
  `/host:CPU`; one line per track (`Steps`, `XLA Modules`, `XLA Ops`, `Sparse Core Steps`,
  `Sparse Core Modules`, `Sparse Core Ops`, ...), counters on a `_counters_` line;
- step markers are events on their track's `Steps` line, named by the step number;
  every event of a step carries `group_id` = step (XProf groups steps by it);
- event metadata per (plane, name, category) carries `hlo_category`, `flops` and
  `bytes_accessed` (the first event's values; events that differ carry their own);
- TensorCore planes carry `device_type_string`, `peak_teraflops_per_second` and
  `peak_hbm_bw_gigabytes_per_second`; the space carries `hostnames`;
- a line-less `/host:scprof` plane keeps the run's own facts (uuid, name, config,
  hardware) so `scprof ingest` of the file gives the run back.

Names and which stat carries which typed field are profiler/xspace/map_names.py's (shared with
the import); events are encoded column-wise with profiler/xspace/encode.py, not one object each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exporters.xspace_kept import export_kept, has_kept_space
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.safe_output import check_output_path, open_output, store_owned_paths
from profiler.wire import encode_varint
from profiler.xspace import encode as enc
from profiler.xspace import wire as xf
from profiler.xspace import xplane_pb2 as xp
from profiler.xspace.map_facts import written_facts
from profiler.xspace.map_names import (
    COUNTER_LINE,
    COUNTER_VALUE_STAT,
    DEVICE_TYPE_STAT,
    FIELD,
    HOSTNAME,
    MARKER_STAT,
    MEMORY_SIZE_STAT,
    PEAK_HBM_BW_STAT,
    PEAK_TFLOPS_STAT,
    SCPROF_PLANE,
    STRING,
    TPU_PLANE_RE,
    TYPED_FIELDS,
    UNIT_STAT,
    device_type,
)

# Typed fields written on event metadata, one per (plane, name, category): the category, and the
# first event's flops and bytes (events that differ carry their own). The others go on events.
_ON_METADATA = ("category", "flops", "bytes")
_CATEGORY, _FLOPS, _BYTES = (FIELD[c].xspace_written for c in _ON_METADATA)
_GROUP_ID = FIELD["step"].xspace_written  # also on step markers


def export_run(store, run_id: int, path: str, steps: tuple[int, int] | None = None, check: bool = False) -> str:
    """Write run `run_id` to `path` as an XSpace; returns a one-line summary. An imported capture that
    kept its XSpace is written as it came (exporters/xspace_kept.py)."""
    if has_kept_space(store, run_id):
        return export_kept(store, run_id, path, steps, check)
    owned = store_owned_paths(store)
    check_output_path(path, owned)  # before the work: a refused output costs nothing
    run = sqltree.query(store.con, "export.xspace.run", run=run_id).to_pylist()[0]
    space = build_space(store, run_id, run, steps)
    with open_output(path, owned) as f:  # a temporary file renamed over `path` at the end
        f.write(space["bytes"])
    line = (
        f"wrote {path}: {space['events']:,} events, {space['steps']:,} step markers, "
        f"{space['counters']:,} counter samples on {space['planes']} planes"
    )
    if check:
        with open(path, "rb") as f:
            msg = xp.XSpace.FromString(f.read())
        n = sum(len(ln.events) for p in msg.planes for ln in p.lines)
        want = space["events"] + space["steps"] + space["counters"]
        if n != want:
            raise ScprofError(f"{path}: check failed: file holds {n} events, expected {want}")
        line += " (checked)"
    return line


def _col(store, name: str, **params) -> dict[str, np.ndarray]:
    """The columns of the query export.xspace.`name` as numpy arrays."""
    t = sqltree.query(store.con, "export.xspace." + name, **params)
    return {name: t.column(name).to_numpy(zero_copy_only=False) for name in t.column_names}


@dataclass
class _RunRows:
    """The rows of a run an export writes: events of the chosen steps, their args, markers, counters."""

    origin_ns: int  # the lines' timestamp_ns (runs.start_time_unix_ns)
    svals: dict[int, str]  # string id -> value
    tracks: list[dict]
    ev: dict[str, np.ndarray]  # events by track, then start; NULL as -1 (string ids: 0)
    null_mask: dict[str, np.ndarray]  # which values of the nullable integer columns are NULL
    args_by_event: dict[int, list[dict]]
    markers: dict[str, np.ndarray]  # steps rows by track, then start
    counters: dict[str, np.ndarray]  # counter samples by track, then time


def _read_run(store, run_id: int, run: dict, steps: tuple[int, int] | None) -> _RunRows:
    strings = sqltree.query(store.con, "export.xspace.strings", run=run_id)
    svals = dict(zip(strings.column("string_id").to_pylist(), strings.column("value").to_pylist(), strict=True))
    tracks = sqltree.query(store.con, "export.xspace.tracks", run=run_id).to_pylist()
    kept = {"run": run_id, "all_steps": not steps, "step_a": steps[0] if steps else None}
    kept["step_b"] = steps[1] if steps else None
    ev = _col(store, "events", **kept)
    null_mask = _col(store, "event_nulls", **kept)
    args = sqltree.query(store.con, "export.xspace.event_args", **kept).to_pylist()
    span = bool(steps and len(ev["start_ps"]))  # with --steps, the counter samples inside the events' span
    counters = _col(
        store,
        "counters",
        run=run_id,
        all_samples=not span,
        ts_a=int(ev["start_ps"].min()) if span else None,
        ts_b=int((ev["start_ps"] + ev["dur_ps"]).max()) if span else None,
    )
    markers = _col(store, "markers", **kept)
    args_by_event: dict[int, list] = {}
    for a in args:
        args_by_event.setdefault(a["event_id"], []).append(a)
    return _RunRows(int(run["start_time_unix_ns"] or 0), svals, tracks, ev, null_mask, args_by_event, markers, counters)


def build_space(store, run_id: int, run: dict, steps: tuple[int, int] | None) -> dict:
    """The XSpace of run `run_id` (events of steps [steps[0], steps[1]) when given): its bytes and counts."""
    rows = _read_run(store, run_id, run, steps)
    ev, markers, counters = rows.ev, rows.markers, rows.counters
    by_plane: dict[str, list[dict]] = {}
    for t in rows.tracks:
        by_plane.setdefault(t["plane"], []).append(t)

    out = bytearray()
    totals = {"events": 0, "steps": 0, "counters": 0}
    device_ids = _plane_ids(list(by_plane))
    for plane_name, ptracks in by_plane.items():
        plane = xp.XPlane(id=device_ids[plane_name], name=plane_name)
        ctx = _PlaneCtx(plane)
        _plane_stats(ctx, plane_name, run)
        lines = bytearray()
        for line_id, t in enumerate([t for t in ptracks if t["kind"] != "counter"], start=1):
            sel = np.flatnonzero(ev["track_id"] == t["track_id"])
            msel = np.flatnonzero(markers["track_id"] == t["track_id"])
            lines += _line(ctx, rows, line_id, t["line"], sel, msel)
            totals["events"] += len(sel)
            totals["steps"] += len(msel)
        ctracks = [t for t in ptracks if t["kind"] == "counter"]
        if ctracks:
            lines += _counter_line(ctx, rows, len(ptracks) + 1, ctracks)
            totals["counters"] += int(np.isin(counters["track_id"], [t["track_id"] for t in ctracks]).sum())
        shell = plane.SerializeToString()
        body = shell + bytes(lines)
        out += enc.key(xf.SPACE_PLANES, 2) + encode_varint(len(body)) + body
    facts = xp.XPlane(id=len(device_ids) + 10_000, name=SCPROF_PLANE)
    fctx = _PlaneCtx(facts)
    for k, v in written_facts(run):
        facts.stats.add(metadata_id=fctx.stat_id(k), **({"str_value": v} if isinstance(v, str) else {"int64_value": v}))
    body = facts.SerializeToString()
    out += enc.key(xf.SPACE_PLANES, 2) + encode_varint(len(body)) + body
    host = HOSTNAME.encode()
    out += enc.key(xf.SPACE_HOSTNAMES, 2) + encode_varint(len(host)) + host
    return {"bytes": bytes(out), "planes": len(by_plane), **totals}


def _plane_ids(planes: list[str]) -> dict[str, int]:
    """TensorCore planes keep their device ordinal as id; others get distinct ids after them."""
    ids = {}
    for p in planes:
        if m := TPU_PLANE_RE.match(p):
            ids[p] = int(m[1])
    nxt = max(ids.values(), default=-1) + 1
    for p in planes:
        if p not in ids:
            ids[p] = nxt
            nxt += 1
    return ids


class _PlaneCtx:
    """Metadata ids of one plane: stat names (and ref strings) and event metadata."""

    def __init__(self, plane: xp.XPlane):
        self.plane = plane
        self.stats: dict[str, int] = {}
        self.events: dict[tuple, int] = {}

    def stat_id(self, name: str) -> int:
        i = self.stats.get(name)
        if i is None:
            i = self.stats[name] = len(self.stats) + 1
            self.plane.stat_metadata[i].id = i
            self.plane.stat_metadata[i].name = name
        return i

    def event_id(self, key: tuple, name: str) -> tuple[int, bool]:
        i = self.events.get(key)
        if i is not None:
            return i, False
        i = self.events[key] = len(self.events) + 1
        self.plane.event_metadata[i].id = i
        self.plane.event_metadata[i].name = name
        return i, True


def _plane_stats(ctx: _PlaneCtx, plane_name: str, run: dict) -> None:
    if not TPU_PLANE_RE.match(plane_name):
        return
    p = ctx.plane
    gen = run["generation"]
    p.stats.add(metadata_id=ctx.stat_id(DEVICE_TYPE_STAT), str_value=device_type(gen))
    if run["tc_peak_flops"]:
        p.stats.add(metadata_id=ctx.stat_id(PEAK_TFLOPS_STAT), double_value=run["tc_peak_flops"] / 1e12)
    if run["hbm_bandwidth_bytes_per_s"]:
        p.stats.add(metadata_id=ctx.stat_id(PEAK_HBM_BW_STAT), double_value=run["hbm_bandwidth_bytes_per_s"] / 1e9)
    if run["hbm_bytes"]:
        p.stats.add(metadata_id=ctx.stat_id(MEMORY_SIZE_STAT), uint64_value=int(run["hbm_bytes"]))


def _line_header(line_id: int, name: str, origin_ns: int) -> bytes:
    return xp.XLine(id=line_id, display_id=line_id, name=name, timestamp_ns=origin_ns).SerializeToString()


class _StatRows:
    """A line's per-event stats as rows (event, stat id, kind, int, double), encoded at the end."""

    def __init__(self, ctx: _PlaneCtx):
        self.ctx = ctx
        self.ev: list = []
        self.id: list = []
        self.kind: list = []
        self.int: list = []
        self.dbl: list = []

    def add(self, rows, stat: str, values, kind: int = xf.KIND_INT) -> None:
        """Stat `stat` with `values` on events `rows` (positions in the line)."""
        if len(rows):
            self.ev.append(rows)
            self.id.append(np.full(len(rows), self.ctx.stat_id(stat), np.int64))
            self.kind.append(np.full(len(rows), kind, np.int8))
            self.int.append(np.asarray(values, np.int64) if kind != xf.KIND_DOUBLE else np.zeros(len(rows), np.int64))
            self.dbl.append(np.asarray(values, np.float64) if kind == xf.KIND_DOUBLE else np.zeros(len(rows)))

    def encode(self, rank: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Encoded `stats` fields of each of n events (event i goes to row rank[i]): (bytes, row offsets)."""
        if not self.ev:
            return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
        ev_row = rank[np.concatenate(self.ev).astype(np.int64)]
        sid, kind = np.concatenate(self.id), np.concatenate(self.kind)
        ival, dval = np.concatenate(self.int), np.concatenate(self.dbl)
        order = np.argsort(ev_row, kind="stable")
        ev_row, sid, kind, ival, dval = ev_row[order], sid[order], kind[order], ival[order], dval[order]
        m = len(ev_row)
        is_int, is_dbl, is_ref = kind == xf.KIND_INT, kind == xf.KIND_DOUBLE, kind == xf.KIND_REF
        stat = enc.encode_rows(
            m,
            [
                ("const", enc.key(xf.ST_METADATA_ID, 0), None),
                ("varint", sid, None),
                ("const", enc.key(xf.ST_INT64, 0), is_int),
                ("varint", ival, is_int),
                ("const", enc.key(xf.ST_DOUBLE, 1), is_dbl),
                ("fixed64", dval, is_dbl),
                ("const", enc.key(xf.ST_REF, 0), is_ref),
                ("varint", ival, is_ref),
            ],
        )
        buf, offs = enc.encode_rows(m, enc.message_pieces(xf.EV_STATS, stat))
        counts = np.bincount(ev_row, minlength=n)
        return buf, offs[np.concatenate([[0], np.cumsum(counts)])]


def _line(ctx: _PlaneCtx, rows: _RunRows, line_id: int, name: str, sel: np.ndarray, msel: np.ndarray) -> bytes:
    """One line: the track's events `sel`, plus its step markers `msel` as events flagged MARKER_STAT."""
    ev, null_mask, svals, markers = rows.ev, rows.null_mask, rows.svals, rows.markers
    n = len(sel)
    meta = np.zeros(n, np.int64)
    flops, nbytes = ev["flops"][sel], ev["bytes"][sel]
    fl_null, by_null = null_mask["flops"][sel], null_mask["bytes"][sel]
    over_flops = np.zeros(n, bool)
    over_bytes = np.zeros(n, bool)
    first: dict[int, tuple] = {}
    names, cats = ev["name_id"][sel], ev["category_id"][sel]
    keys = names.astype(np.int64) * (1 << 32) + cats.astype(np.int64)
    uniq, first_idx, inv = np.unique(keys, return_index=True, return_inverse=True)
    for u, fi in zip(range(len(uniq)), first_idx.tolist(), strict=True):
        nm, cat = int(names[fi]), int(cats[fi])
        mid, new = ctx.event_id(("ev", nm, cat), svals.get(nm, ""))
        md = ctx.plane.event_metadata[mid]
        if new:
            if cat:
                md.stats.add(metadata_id=ctx.stat_id(_CATEGORY), str_value=svals.get(cat, ""))
            if not fl_null[fi]:
                md.stats.add(metadata_id=ctx.stat_id(_FLOPS), int64_value=int(flops[fi]))
            if not by_null[fi]:
                md.stats.add(metadata_id=ctx.stat_id(_BYTES), int64_value=int(nbytes[fi]))
        vals = {s.metadata_id: s.int64_value for s in md.stats}
        first[u] = (mid, vals.get(ctx.stats.get(_FLOPS)), vals.get(ctx.stats.get(_BYTES)))
    meta_flops = np.array([first[u][1] if first[u][1] is not None else -(2**62) for u in range(len(uniq))], np.int64)
    meta_bytes = np.array([first[u][2] if first[u][2] is not None else -(2**62) for u in range(len(uniq))], np.int64)
    meta = np.array([first[u][0] for u in range(len(uniq))], np.int64)[inv] if n else meta
    if n:
        over_flops = ~fl_null & (flops != meta_flops[inv])
        over_bytes = ~by_null & (nbytes != meta_bytes[inv])
    stats = _StatRows(ctx)
    for f in TYPED_FIELDS:  # on events: step (as group_id), table (a ref_value), sc, minibatch, ids, ...
        if f.name in _ON_METADATA:
            continue
        if f.holds == STRING:  # a string id, 0 for none
            sid = ev[f.column][sel]
            at = np.flatnonzero(sid)
            if at.size:
                uniq_s, inv_s = np.unique(sid[at], return_inverse=True)
                refs = np.array([ctx.stat_id(svals.get(int(t), "")) for t in uniq_s.tolist()], np.int64)
                stats.add(at, f.xspace_written, refs[inv_s], xf.KIND_REF)
        else:
            has = ~null_mask[f.name][sel]
            stats.add(np.flatnonzero(has), f.xspace_written, ev[f.name][sel][has])
    stats.add(np.flatnonzero(over_flops), _FLOPS, flops[over_flops])
    stats.add(np.flatnonzero(over_bytes), _BYTES, nbytes[over_bytes])
    if rows.args_by_event:
        pos = {int(e): i for i, e in enumerate(ev["event_id"][sel].tolist())}
        for eid, i in pos.items():
            for a in rows.args_by_event.get(eid, ()):
                if a["int_value"] is not None:
                    stats.add([i], a["key"], [a["int_value"]])
                elif a["double_value"] is not None:
                    stats.add([i], a["key"], [a["double_value"]], xf.KIND_DOUBLE)
                else:
                    stats.add([i], a["key"], [ctx.stat_id(a["string_value"] or "")], xf.KIND_REF)
    start = ev["start_ps"][sel].astype(np.int64)
    dur = ev["dur_ps"][sel].astype(np.int64)
    if len(msel):  # step markers: events named by the step, flagged as markers, with group_id
        m_meta = []
        for st in markers["step"][msel].tolist():
            mid, new = ctx.event_id(("marker", st), str(st))
            if new:
                ctx.plane.event_metadata[mid].stats.add(metadata_id=ctx.stat_id(MARKER_STAT), int64_value=1)
            m_meta.append(mid)
        base = n
        meta = np.concatenate([meta, np.array(m_meta, np.int64)])
        start = np.concatenate([start, markers["start_ps"][msel]])
        dur = np.concatenate([dur, markers["dur_ps"][msel]])
        stats.add(base + np.arange(len(msel)), _GROUP_ID, markers["step"][msel])
        n += len(msel)
    order = np.argsort(start, kind="stable")  # XProf expects a line's events in time order
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    events = enc.encode_rows(
        n,
        [
            ("const", enc.key(xf.EV_METADATA_ID, 0), None),
            ("varint", meta[order], None),
            ("const", enc.key(xf.EV_OFFSET_PS, 0), None),
            ("varint", start[order], None),
            ("const", enc.key(xf.EV_DURATION_PS, 0), dur[order] != 0),
            ("varint", dur[order], dur[order] != 0),
            ("blob", stats.encode(rank, n)),
        ],
    )
    region = enc.encode_rows(n, enc.message_pieces(xf.LINE_EVENTS, events))[0]
    return _wrap_line(_line_header(line_id, name, rows.origin_ns) + region.tobytes())


def _wrap_line(line: bytes) -> bytes:
    return enc.key(xf.PLANE_LINES, 2) + encode_varint(len(line)) + line


def _counter_line(ctx: _PlaneCtx, rows: _RunRows, line_id: int, ctracks: list[dict]) -> bytes:
    """Samples of counter tracks `ctracks` on XProf's `_counters_` line: zero-length events named by the counter."""
    counters = rows.counters
    tids = np.array([t["track_id"] for t in ctracks])
    sel = np.flatnonzero(np.isin(counters["track_id"], tids))
    meta_of = {}
    for t in ctracks:
        mid, new = ctx.event_id(("counter", t["track_id"]), t["line"])
        if new and t["unit"]:
            ctx.plane.event_metadata[mid].stats.add(metadata_id=ctx.stat_id(UNIT_STAT), str_value=t["unit"])
        meta_of[t["track_id"]] = mid
    n = len(sel)
    meta = np.array([meta_of[int(t)] for t in counters["track_id"][sel].tolist()], np.int64)
    ts = counters["ts_ps"][sel].astype(np.int64)
    order = np.argsort(ts, kind="stable")
    val = counters["value"][sel].astype(np.float64)[order]
    cid = ctx.stat_id(COUNTER_VALUE_STAT)
    stat = enc.encode_rows(
        n,
        [
            ("const", enc.key(xf.ST_METADATA_ID, 0) + encode_varint(cid), None),
            ("const", enc.key(xf.ST_DOUBLE, 1), None),
            ("fixed64", val, None),
        ],
    )
    events = enc.encode_rows(
        n,
        [
            ("const", enc.key(xf.EV_METADATA_ID, 0), None),
            ("varint", meta[order], None),
            ("const", enc.key(xf.EV_OFFSET_PS, 0), None),
            ("varint", ts[order], None),
            *enc.message_pieces(xf.EV_STATS, stat),
        ],
    )
    region = enc.encode_rows(n, enc.message_pieces(xf.LINE_EVENTS, events))[0]
    return _wrap_line(_line_header(line_id, COUNTER_LINE, rows.origin_ns) + region.tobytes())

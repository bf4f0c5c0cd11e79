"""The trace viewer's JSON API under /api/trace/ (docs/ui.md "Timeline"):
meta, tile, event, area, find, highlight and flows of a run, for ui/assets/trace_viewer*.js.

Registered on the Dash app's Flask server (ui/app.py create_app), so ui/auth.py's access checks
apply. Reads go through the UI's read-only StoreAccess; the SQL is in profiler/sql/ui/timeline.sql (and the
flows rule in profiler/flows.py, shared with the Perfetto export). Arguments are checked here:
a bad one is HTTP 400 with `{"error": "<argument>: <problem>"}` on one line, an unknown run 404;
nothing else (no traceback) leaves the server. Tiles are computed per track in SQL and numpy
(no Python loop per event), those at or above a run's tile pyramid base level from the sums
ingest stored (`tile_sums`), and cached per (run content, level, tile, track).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from flask import Flask, Response, request

from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from ui.store_access import KeyedCache, StoreAccess, run_memo
from ui.trace_derived import LINE, NO_DERIVED_STEPS, DerivedSteps, derived_steps
from ui.trace_derived import tiles as derived_tiles

log = logging.getLogger("scprof.ui")

BUCKETS = 1024  # buckets per tile
TILE_SHIFT = 10  # log2(BUCKETS)
EXACT_LIMIT = 2000  # events + markers of a track in a tile at or below which it is sent exact
MAX_LEVEL = 62
MAX_TRACKS = 256
MAX_Q_CHARS = 200
MAX_MATCHES = 10_000
MAX_AREA_NAMES = 500
MAX_HL_CHARS = 2000
MAX_HL_TERMS = 64
HL_KEYS = ("table", "chip", "category", "name", "track")
TIME_LIMIT_PS = 1 << 62  # times beyond this are refused (int64 arithmetic stays exact)


class ApiError(Exception):
    """A refused request: HTTP `status` with a one-line `message` naming the argument."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = " ".join(str(message).split())


@dataclass(frozen=True)
class RunFacts:
    """What every request of a run needs, computed once per run content."""

    key: tuple
    run_id: int
    name: str
    status: str
    first_ps: int
    last_ps: int
    max_event_dur_ps: int
    max_marker_dur_ps: int
    name_base: int  # a step marker's name id is name_base + step
    marker_tracks: frozenset[int]
    track_ids: frozenset[int]
    tile_level: int | None = None  # tiles of this level and above come from tile_sums (None: none stored)
    derived: DerivedSteps = NO_DERIVED_STEPS  # the viewer's own Steps rows (ui/trace_derived.py)


FACTS = KeyedCache(size=64)
TILES = KeyedCache(size=16_384)  # one entry per (run content, k, i, track)


# ---------------------------------------------------------------- arguments


def _arg(name: str, required: bool = True) -> str | None:
    value = request.args.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"{name}: missing")
        return None
    return value


def int_arg(name: str, lo: int | None = None, hi: int | None = None, required: bool = True) -> int | None:
    """An integer query argument in [lo, hi]; 400 naming it when absent (if required) or bad."""
    text = _arg(name, required)
    if text is None:
        return None
    if len(text) > 24:
        raise ApiError(400, f"{name}: not an integer (too long)")
    try:
        value = int(text, 10)
    except ValueError:
        raise ApiError(400, f"{name}: not an integer: {text[:24]!r}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ApiError(400, f"{name}: {value} is out of range [{lo}, {hi}]")
    return value


def tracks_arg(required: bool) -> list[int] | None:
    """`tracks=9,10,11`: at most MAX_TRACKS integers; None when absent and not required."""
    text = _arg("tracks", required)
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) > MAX_TRACKS:
        raise ApiError(400, f"tracks: {len(parts)} tracks, at most {MAX_TRACKS}")
    out = []
    for p in parts:
        p = p.strip()
        if not p or len(p) > 11 or not p.lstrip("-").isdigit():
            raise ApiError(400, f"tracks: not a list of integers: {p[:24]!r}")
        out.append(int(p))
    return list(dict.fromkeys(out))


def window_args(facts: RunFacts, required: bool) -> tuple[int, int]:
    """t0 and t1 (ps); the run's whole extent when absent and not required; 400 unless t0 < t1."""
    t0 = int_arg("t0", -TIME_LIMIT_PS, TIME_LIMIT_PS, required)
    t1 = int_arg("t1", -TIME_LIMIT_PS, TIME_LIMIT_PS, required)
    t0 = facts.first_ps if t0 is None else t0
    t1 = facts.last_ps + 1 if t1 is None else t1
    if t1 <= t0:
        raise ApiError(400, f"t1: must be greater than t0 ({t1} <= {t0})")
    return t0, t1


# ---------------------------------------------------------------- tracks


@dataclass
class Track:
    """One track of a run with events or step markers, and how many (from the timeline summary)."""

    track_id: int
    plane: str
    line: str
    kind: str
    chip: int
    n: int

    @property
    def label(self) -> str:
        plane = self.plane.removeprefix("/device:").removeprefix("/host:")
        plane = plane.replace(" SparseCore ", " SC")
        return f"{plane} · {self.line}"


def run_tracks(store: Store, run_id: int) -> list[Track]:
    """The run's tracks with events or step markers, in display order."""

    def compute() -> list[Track]:
        rows = sqltree.query(store.con, "ui.timeline.timeline_tracks", run=run_id).to_pylist()
        tracks = [Track(r["track_id"], r["plane"], r["line"], r["kind"], r["chip"], r["n"]) for r in rows]
        for tid, plane, kind, chip, n in derived_steps(store, run_id).tracks:  # first in its chip's rows
            at = next((i for i, t in enumerate(tracks) if t.chip == chip), len(tracks))
            tracks.insert(at, Track(tid, plane, LINE, kind, chip, n))
        return tracks

    return run_memo(store, run_id, "tracks", None, compute)


# ---------------------------------------------------------------- run facts


def run_facts(store: Store, run_id: int) -> RunFacts:
    """The run's facts (404 when the run is not in the store)."""
    rows = sqltree.query(store.con, "ui.runs.run_key", run=run_id).to_pylist()
    if not rows:
        raise ApiError(404, f"run {run_id} is not in this store")
    key = (store.path, run_id, rows[0]["uuid"], rows[0]["ingested_at"])

    def compute() -> RunFacts:
        r = sqltree.query(store.con, "ui.timeline.trace_run", run=run_id).to_pylist()[0]
        max_dur = r["max_event_dur_ps"]
        if max_dur is None:
            max_dur = sqltree.query(store.con, "ui.timeline.max_event_dur", run=run_id).to_pylist()[0]["d"]
        markers = frozenset(
            sqltree.query(store.con, "ui.timeline.marker_tracks", run=run_id).column("track_id").to_pylist()
        )
        tracks = frozenset(
            sqltree.execute(store.con, "ui.timeline.track_ids", run=run_id).fetchnumpy()["track_id"].tolist()
        )
        tile_level = sqltree.query(store.con, "ui.timeline.tile_level", run=run_id).to_pylist()[0]["level"]
        derived = derived_steps(store, run_id)
        min_step = min(int(r["min_step"] or 0), int(derived.step.min(initial=0)))  # name ids: name_base + step
        firsts = [v for v in (r["first_ps"], r["first_marker_ps"]) if v is not None]
        lasts = [v for v in (r["last_ps"], r["last_marker_ps"]) if v is not None]
        return RunFacts(
            key=key,
            run_id=run_id,
            name=r["name"],
            status=r["status"],
            first_ps=int(min(firsts)) if firsts else 0,
            last_ps=int(max(lasts)) if lasts else 0,
            max_event_dur_ps=int(max_dur or 0),
            max_marker_dur_ps=int(r["max_marker_dur_ps"] or 0),
            name_base=int(r["name_base"]) - min(0, min_step),
            marker_tracks=markers | derived.track_ids,
            track_ids=tracks | derived.track_ids,
            tile_level=tile_level,
            derived=derived,
        )

    return FACTS.get_or_compute(key, compute)


def max_level(last_ps: int) -> int:
    """The smallest level k whose tile 0, [0, 2^(k+10)), holds the whole run."""
    return max(0, int(last_ps).bit_length() - TILE_SHIFT)


# ---------------------------------------------------------------- meta


_DEVICE_RE = re.compile(r"/(?:device|host):(\S+)")  # "/device:TPU:0 SparseCore 1" -> TPU:0
DEVICE_NOUNS = {"gpu": "GPU", "cpu": "CPU", "device": "device"}  # a track kind's device; the others: a TPU chip


def _group_of(plane: str, kind: str, chip: int) -> tuple[str, str]:
    """(group id, label) of a track: its chip's device ("TPU:0", "GPU:1", "CPU"), or the host; the
    label numbers it as what it is: "TPU:0 (chip 0)", "GPU:1 (GPU 1)"."""
    if chip < 0 or kind == "host":
        return "host", "Host"
    noun = DEVICE_NOUNS.get(kind, "chip")
    m = _DEVICE_RE.search(plane)
    if m is None:
        return f"{noun} {chip}", f"{noun} {chip}"
    host = plane[: m.start()].strip()  # a pod's capture: "<host> /device:GPU:0", one group per host's device
    device = f"{host} {m.group(1)}" if host else m.group(1)
    return device, f"{device} ({noun} {chip})"


def meta_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    tracks, groups = [], {}
    for t in run_tracks(store, facts.run_id):
        gid, glabel = _group_of(t.plane, t.kind, t.chip)
        group = groups.setdefault(gid, {"id": gid, "label": glabel, "tracks": []})
        group["tracks"].append(t.track_id)
        tracks.append(
            {
                "id": t.track_id,
                "plane": t.plane,
                "line": t.line,
                "kind": t.kind,
                "chip": t.chip,
                "label": t.label,
                "group": gid,
                "n": int(t.n),
                "steps": t.track_id in facts.marker_tracks,
            }
        )
    ordered = [g for gid, g in groups.items() if gid != "host"] + ([groups["host"]] if "host" in groups else [])
    position = {tid: n for n, tid in enumerate(tid for g in ordered for tid in g["tracks"])}
    tracks.sort(key=lambda t: position[t["id"]])
    return {
        "run": facts.run_id,
        "name": facts.name,
        "status": facts.status,
        "first_ps": facts.first_ps,
        "last_ps": facts.last_ps,
        "tracks": tracks,
        "groups": ordered,
        "bucket_count": BUCKETS,
        "exact_limit": EXACT_LIMIT,
        "max_level": max_level(facts.last_ps),
    }


# ---------------------------------------------------------------- tiles


def _split(table: pa.Table, track_ids: list[int]) -> dict[int, pa.Table]:
    """The rows of `table` (sorted by track_id) per track."""
    tr = table.column("track_id").to_numpy()
    out = {}
    for t in track_ids:
        lo, hi = np.searchsorted(tr, t, "left"), np.searchsorted(tr, t, "right")
        out[t] = table.slice(lo, hi - lo)
    return out


def _columns(table: pa.Table, names: tuple[str, ...]) -> dict[str, list]:
    return {n: table.column(n).to_pylist() for n in names}


def compute_tiles(store: Store, facts: RunFacts, k: int, i: int, track_ids: list[int]) -> dict[int, dict]:
    """Each track's tile (k, i): its JSON object plus the name ids it uses, under "_names"."""
    t0, t1, bw = i << (k + TILE_SHIFT), (i + 1) << (k + TILE_SHIFT), 1 << k
    run, maxdur, maxmarker, name_base = facts.run_id, facts.max_event_dur_ps, facts.max_marker_dur_ps, facts.name_base
    derived = facts.derived
    out: dict[int, dict] = derived_tiles(
        derived, [t for t in track_ids if t in derived.track_ids], k, t0, t1, name_base, EXACT_LIMIT
    )
    track_ids = [t for t in track_ids if t not in derived.track_ids]
    if not track_ids:
        return out
    from_sums = facts.tile_level is not None and k >= facts.tile_level
    if from_sums:  # the tile pyramid's base (ui.timeline's *_from_sums): its bounds in base buckets
        level = facts.tile_level
        lo, hi = t0 >> level, t1 >> level
        counted = sqltree.query(
            store.con,
            "ui.timeline.tile_counts_from_sums",
            run=run,
            tracks=track_ids,
            t0=t0,
            maxdur=maxdur,
            maxmarker=maxmarker,
            lo=lo,
            hi=hi,
        )
    else:
        counted = sqltree.query(
            store.con,
            "ui.timeline.tile_counts",
            run=run,
            tracks=track_ids,
            t0=t0,
            t1=t1,
            maxdur=maxdur,
            maxmarker=maxmarker,
        )
    counts = dict(zip(*counted.to_pydict().values(), strict=True))
    exact = [t for t in track_ids if 0 < counts.get(t, 0) <= EXACT_LIMIT]
    agg = [t for t in track_ids if counts.get(t, 0) > EXACT_LIMIT]
    ev_cols = ("id", "start", "dur", "name")
    for t in track_ids:
        if counts.get(t, 0) == 0:
            ev = {c: [] for c in ev_cols + (("step",) if t in facts.marker_tracks else ())}
            out[t] = {"mode": "exact", "ev": ev, "_names": np.zeros(0, np.int64)}
    for mode, chosen, minlen in (("exact", exact, 0), ("agg", agg, bw)):
        if not chosen:
            continue
        rows = _split(
            sqltree.query(
                store.con,
                "ui.timeline.tile_slices",
                run=run,
                tracks=chosen,
                t0=t0,
                t1=t1,
                maxdur=maxdur,
                maxmarker=maxmarker,
                name_base=name_base,
                minlen=minlen,
            ),
            chosen,
        )
        for t in chosen:
            cols = ev_cols + (("step",) if t in facts.marker_tracks else ())
            out[t] = {"mode": mode, "ev": _columns(rows[t], cols), "_names": rows[t].column("name").to_numpy()}
    if agg:
        if from_sums:
            bucketed = sqltree.query(
                store.con,
                "ui.timeline.tile_buckets_from_sums",
                run=run,
                tracks=agg,
                t0=t0,
                bw=bw,
                name_base=name_base,
                k=k,
                level=level,
                lo=lo,
                hi=hi,
                b0=i << TILE_SHIFT,
            )
        else:
            bucketed = sqltree.query(
                store.con,
                "ui.timeline.tile_buckets",
                run=run,
                tracks=agg,
                t0=t0,
                t1=t1,
                bw=bw,
                name_base=name_base,
                k=k,
            )
        buckets = _split(bucketed, agg)
        for t in agg:
            b = buckets[t]
            out[t]["bk"] = _columns(b, ("b", "name", "busy", "n"))
            out[t]["_names"] = np.concatenate([out[t]["_names"], b.column("name").to_numpy()])
    for t in track_ids:
        out[t]["_names"] = np.unique(out[t]["_names"].astype(np.int64))
    return out


def names_of(store: Store, facts: RunFacts, ids: np.ndarray) -> dict[str, str]:
    """{str(id): name} of name ids: strings, and "step N" for step markers' ids."""
    ids = np.unique(ids.astype(np.int64))
    steps = ids[ids >= facts.name_base]
    strings = ids[ids < facts.name_base]
    out = {str(s): f"step {s - facts.name_base}" for s in steps.tolist()}
    if len(strings):
        t = sqltree.query(store.con, "ui.runs.names_of", run=facts.run_id, ids=strings.tolist())
        out.update(zip(map(str, t.column("string_id").to_pylist()), t.column("value").to_pylist(), strict=True))
    return out


def tile_json(store: Store, facts: RunFacts, k: int, i: int, track_ids: list[int]) -> dict[str, Any]:
    cached = {t: TILES.get((facts.key, k, i, t)) for t in track_ids}
    missing = [t for t, v in cached.items() if v is None]
    if missing:
        computed = compute_tiles(store, facts, k, i, missing)
        used = {t: v.pop("_names") for t, v in computed.items()}
        every = names_of(store, facts, np.concatenate(list(used.values())))  # one query for all tracks
        for t, v in computed.items():
            names = {key: every[key] for key in map(str, used[t].tolist()) if key in every}
            cached[t] = (v, names)
            TILES.get_or_compute((facts.key, k, i, t), lambda v=v, names=names: (v, names))
    names: dict[str, str] = {}
    for _, n in cached.values():
        names.update(n)
    t0 = i << (k + TILE_SHIFT)
    return {
        "k": k,
        "i": i,
        "t0": t0,
        "t1": t0 + (BUCKETS << k),
        "tracks": {str(t): v[0] for t, v in cached.items()},
        "names": names,
    }


# ---------------------------------------------------------------- routes


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status=status, mimetype="application/json")


def register(server: Flask, access: StoreAccess) -> None:
    """Add the /api/trace/ routes to `server`."""

    def route(path: str) -> Callable:
        def wrap(fn: Callable[[Store, RunFacts], Any]) -> Callable:
            def handler() -> Response:
                try:
                    run_id = int_arg("run", 0, 2**31 - 1)
                    with access.open() as store:
                        return _json(200, fn(store, run_facts(store, run_id)))
                except ApiError as e:
                    return _json(e.status, {"error": e.message})
                except ScprofError as e:
                    return _json(400, {"error": " ".join(str(e).split())})
                except duckdb.InterruptException:
                    return _json(503, {"error": "query interrupted"})
                except Exception:
                    log.exception("trace API %s failed", path)
                    return _json(500, {"error": f"internal error in {path} (logged on the server)"})

            handler.__name__ = "trace_api_" + path.strip("/").replace("/", "_")
            server.add_url_rule(path, handler.__name__, handler)
            return fn

        return wrap

    @route("/api/trace/meta")
    def meta(store: Store, facts: RunFacts) -> Any:
        return meta_json(store, facts)

    @route("/api/trace/tile")
    def tile(store: Store, facts: RunFacts) -> Any:
        k = int_arg("k", 0, MAX_LEVEL)
        i = int_arg("i", 0, None)
        assert k is not None and i is not None
        if (i + 1) << (k + TILE_SHIFT) > TIME_LIMIT_PS:
            raise ApiError(400, f"i: tile {i} at level {k} ends past 2^62 ps")
        tracks = tracks_arg(required=True) or []
        return tile_json(store, facts, k, i, tracks)

    from ui import trace_details

    for name, answer in (
        ("event", trace_details.event_json),
        ("area", trace_details.area_json),
        ("find", trace_details.find_json),
        ("highlight", trace_details.highlight_json),
        ("flows", trace_details.flows_json),
    ):
        route(f"/api/trace/{name}")(answer)

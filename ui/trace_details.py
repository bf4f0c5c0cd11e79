"""The trace viewer API's answers beyond tiles: one event's details, an area's aggregation per
name, find by name, a finding's highlight and flows (routes in ui/trace_api.py, SQL in
profiler/sql/ui/timeline.sql, the flows rule in profiler/flows.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from flask import request

from profiler import sqltree
from profiler.flows import FLOW_KINDS, flows_of_step
from profiler.store import Store
from profiler.trace_fields import TYPED_FIELDS
from profiler.units import format_value
from ui.trace_api import (
    HL_KEYS,
    MAX_AREA_NAMES,
    MAX_HL_CHARS,
    MAX_HL_TERMS,
    MAX_MATCHES,
    MAX_Q_CHARS,
    ApiError,
    RunFacts,
    int_arg,
    tracks_arg,
    window_args,
)


def event_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    """Every field of one event, formatted with its unit, then its further arguments."""
    event_id = int_arg("id", -(2**63), 2**63 - 1)
    if event_id is not None and event_id < 0:
        raise ApiError(400, "id: step markers (id -1) have no details; their step and times are in the tile")
    rows = sqltree.query(store.con, "ui.timeline.event_row", run=facts.run_id, id=event_id).to_pylist()
    if not rows:
        raise ApiError(404, f"id: event {event_id} is not in run {facts.run_id}")
    r = rows[0]
    fields = [[f.name, format_value(r[f.name], f.unit)] for f in TYPED_FIELDS if r[f.name] is not None]
    args = sqltree.query(store.con, "ui.timeline.event_args", run=facts.run_id, id=event_id).to_pylist()
    return {
        "id": event_id,
        "track": r["track_id"],
        "name": r["name"],
        "start_ps": r["start_ps"],
        "dur_ps": r["dur_ps"],
        "fields": fields,
        "args": [[a["key"], a["value"]] for a in args],
    }


def _tracks_params(facts: RunFacts, tracks: list[int] | None) -> dict[str, Any]:
    return {"all_tracks": tracks is None, "tracks": tracks or []}


def area_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    """Perfetto's area aggregation: per name, count, time in the window, mean, max and share."""
    t0, t1 = window_args(facts, required=True)
    tracks = tracks_arg(required=False)
    t = sqltree.query(
        store.con,
        "ui.timeline.area",
        run=facts.run_id,
        t0=t0,
        t1=t1,
        maxdur=facts.max_event_dur_ps,
        limit=MAX_AREA_NAMES,
        **_tracks_params(facts, tracks),
    ).to_pydict()
    total = int(t["all_ps"][0]) if t["all_ps"] else 0
    rows = [
        {
            "name": name,
            "count": int(count),
            "total_ps": int(tot),
            "mean_ps": tot / count,
            "max_ps": int(mx),
            "share": tot / total if total else 0.0,
        }
        for name, count, tot, mx in zip(t["name"], t["count"], t["total_ps"], t["max_ps"], strict=True)
    ]
    return {"t0": t0, "t1": t1, "rows": rows, "total_ps": total, "names": int(t["names"][0]) if t["names"] else 0}


def _matches(store: Store, facts: RunFacts, events: pa.Table, total: int) -> dict[str, Any]:
    """find/highlight's answer: matches in time order, names by index into `names`."""
    name_ids = events.column("name").to_numpy().astype(np.int64)
    uniq, index = np.unique(name_ids, return_inverse=True)
    names: dict[int, str] = {}
    if len(uniq):
        n = sqltree.query(store.con, "ui.runs.names_of", run=facts.run_id, ids=uniq.tolist()).to_pydict()
        names = dict(zip(n["string_id"], n["value"], strict=True))
    return {
        "count": total,
        "names": [names.get(i, "") for i in uniq.tolist()],
        "ev": {
            "id": events.column("id").to_numpy().tolist(),
            "track": events.column("track").to_numpy().tolist(),
            "start": events.column("start").to_numpy().tolist(),
            "dur": events.column("dur").to_numpy().tolist(),
            "name": index.astype(np.int64).tolist(),
        },
    }


def find_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    """Events whose name contains q (case-insensitive, q is text, never a pattern)."""
    q = request.args.get("q", "")
    if not q:
        raise ApiError(400, "q: missing (1 to 200 characters)")
    if len(q) > MAX_Q_CHARS:
        raise ApiError(400, f"q: {len(q)} characters, at most {MAX_Q_CHARS}")
    tracks = tracks_arg(required=False)
    t0, t1 = window_args(facts, required=False)
    p = dict(run=facts.run_id, q=q, t0=t0, t1=t1, maxdur=facts.max_event_dur_ps, **_tracks_params(facts, tracks))
    total = int(sqltree.query(store.con, "ui.timeline.find_count", **p).column("n")[0].as_py())
    events = sqltree.query(store.con, "ui.timeline.find_events", limit=MAX_MATCHES, **p)
    return {"q": q, **_matches(store, facts, events, total)}


def parse_hl(spec: str) -> dict[str, list[str]]:
    """`table:t3;table:t4;chip:0` as {"table": ["t3", "t4"], "chip": ["0"]} (400 on a bad term)."""
    if len(spec) > MAX_HL_CHARS:
        raise ApiError(400, f"hl: {len(spec)} characters, at most {MAX_HL_CHARS}")
    terms = [t for t in spec.split(";") if t.strip()]
    if not terms:
        raise ApiError(400, "hl: missing (key:value terms separated by ;)")
    if len(terms) > MAX_HL_TERMS:
        raise ApiError(400, f"hl: {len(terms)} terms, at most {MAX_HL_TERMS}")
    out: dict[str, list[str]] = {}
    for term in terms:
        key, sep, value = term.partition(":")
        key = key.strip()
        if not sep or key not in HL_KEYS:
            raise ApiError(400, f"hl: {term[:40]!r} is not key:value with a key among {', '.join(HL_KEYS)}")
        out.setdefault(key, []).append(value)
    return out


def highlight_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    """Events a finding points at: hl's terms, OR within a key, AND across keys."""
    spec = parse_hl(request.args.get("hl", ""))
    t0, t1 = window_args(facts, required=False)
    ints: dict[str, set[int]] = {}
    for key in ("chip", "track"):
        if key in spec:
            try:
                ints[key] = {int(v) for v in spec[key]}
            except ValueError:
                raise ApiError(400, f"hl: {key} takes integers, not {spec[key]!r}"[:160]) from None
    tracks = None
    if ints:
        chips = ints.get("chip")
        rows = sqltree.execute(store.con, "ui.timeline.track_chips", run=facts.run_id).fetchall()
        tracks = [t for t, c in rows if (chips is None or c in chips) and ("track" not in ints or t in ints["track"])]
    ids: dict[str, list[int]] = {}
    for key in ("name", "table", "category"):
        if key in spec:
            found = (
                sqltree.query(store.con, "ui.runs.string_ids", run=facts.run_id, values=spec[key])
                .column("string_id")
                .to_pylist()
            )
            ids[key] = found or [-1]  # no such string: nothing matches
    p = dict(
        run=facts.run_id,
        t0=t0,
        t1=t1,
        maxdur=facts.max_event_dur_ps,
        any_name="name" not in ids,
        name_ids=ids.get("name", []),
        any_table="table" not in ids,
        table_ids=ids.get("table", []),
        any_category="category" not in ids,
        category_ids=ids.get("category", []),
        all_tracks=tracks is None,
        tracks=tracks or [-1],
    )
    total = int(sqltree.query(store.con, "ui.timeline.highlight_count", **p).column("n")[0].as_py())
    events = sqltree.query(store.con, "ui.timeline.highlight_events", limit=MAX_MATCHES, **p)
    return {"hl": request.args.get("hl", ""), **_matches(store, facts, events, total)}


def flows_json(store: Store, facts: RunFacts) -> dict[str, Any]:
    """Flows touching an event (within its step), or every flow of a step (profiler/flows.py)."""
    event_id = int_arg("event", -(2**63), 2**63 - 1, required=False)
    step = int_arg("step", -(2**31), 2**31 - 1, required=False)
    if (event_id is None) == (step is None):
        raise ApiError(400, "event: give exactly one of event=ID or step=N")
    if event_id is not None:
        rows = sqltree.query(store.con, "ui.timeline.event_step", run=facts.run_id, id=event_id).to_pylist()
        if not rows:
            raise ApiError(404, f"event: {event_id} is not in run {facts.run_id}")
        step = rows[0]["step"]
        if step is None:
            return {"flows": []}
    t = flows_of_step(store.con, facts.run_id, int(step))
    src, dst, kind = (t.column(c).to_numpy() for c in ("src", "dst", "dir"))
    if event_id is not None:
        keep = (src == event_id) | (dst == event_id)
        src, dst, kind = src[keep], dst[keep], kind[keep]
    if not len(src):
        return {"flows": []}
    ends = np.concatenate([src, dst]).astype(np.int64)
    e = sqltree.query(
        store.con, "ui.timeline.flow_ends", run=facts.run_id, ids=ends.tolist(), lo=int(ends.min()), hi=int(ends.max())
    ).to_pydict()
    where = {
        i: {"id": i, "track": tr, "start": s, "dur": d}
        for i, tr, s, d in zip(e["event_id"], e["track_id"], e["start_ps"], e["dur_ps"], strict=True)
    }
    return {
        "flows": [
            {"kind": FLOW_KINDS[int(k)], "src": where[int(s)], "dst": where[int(d)]}
            for s, d, k in zip(src.tolist(), dst.tolist(), kind.tolist(), strict=True)
        ]
    }

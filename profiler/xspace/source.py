"""What an imported XProf capture keeps of its XSpace, so that `scprof export xspace` writes it back
as XProf read it: the store's tables `xspace_files` and `xspace_events` (docs/schema.md).

The store's events, args and tracks are the capture *as scprof analyses it*: typed columns,
stats resolved to names (uint64 beyond int64 as text, bytes as a `<N bytes>` placeholder), event
metadata stats copied onto each event, planes without lines reduced to their stats. XProf reads
more: the stats' types, which stats sit on event metadata, display names, full HLO text, the
device type string, the metadata planes (`/host:metadata`, `Task Environment`), hostnames. So
the import keeps, beside the rows it maps:

- per file (host): the XSpace with the events of the lines that became store events taken out
  (`xspace_files.space`): every plane's stats, event and stat metadata with their stats, line
  ids, names and timestamps, the planes without lines, the hostnames; `_counters_` lines, whose
  events become counter samples, keep their events here;
- per store event: its XEvent message as the file encodes it (`xspace_events.xevent`: metadata id,
  offset, duration, its own stats with their value types) and the plane and line it sits on.

The export (exporters/xspace_kept.py) puts the events back into their lines. A capture scprof
exported itself (a `/host:scprof` plane) keeps nothing: its run facts give it back.

Decoding stays numpy: each line's events are cut out of the plane's bytes with one mask (the
native walk's spans), no Python step per event.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from profiler.wire import encode_varint
from profiler.xspace import encode as enc
from profiler.xspace import wire as xf
from profiler.xspace.map_names import COUNTER_LINE
from profiler.xspace.wire import XPlaneLite


@dataclass
class Kept:
    """A run's kept XSpace: per file its space less the events, per event its bytes and place."""

    files: list[tuple[int, str, bytes]] = field(default_factory=list)  # (host, file name, space)
    events: list[pa.Table] = field(default_factory=list)  # event_id, host, plane, line, xevent
    spaces: dict[int, bytearray] = field(default_factory=dict)  # host -> its space so far


def _field(number: int, payload: bytes) -> bytes:
    return enc.key(number, 2) + encode_varint(len(payload)) + payload


def _line_name(line) -> str:
    return line.name or line.display_name or f"line {line.id}"


def keep_plane(kept: Kept, host: int, index: int, plane, first_event: int) -> int:
    """Keep plane `index` of host `host` (a decode_native.Plane, decoded: its lines' events are
    store events `first_event`, ... in line order, but for `_counters_` lines). Returns the events kept."""
    lines = plane.lines
    msg = XPlaneLite()
    msg.CopyFrom(plane.msg)
    del msg.lines[:]
    out = bytearray(msg.SerializeToString())
    next_id = first_event
    for i, line in enumerate(lines):
        header = type(line)()
        header.CopyFrom(line)
        del header.events[:]
        body = header.SerializeToString()
        n = plane.events(i)
        if n and _line_name(line) == COUNTER_LINE:  # its events became counters: they stay in the space
            body += b"".join(_field(xf.LINE_EVENTS, e) for e in plane.event_bytes(i))
        elif n:
            data, offsets = _event_bytes(plane, i)
            kept.events.append(
                pa.table(
                    {
                        "event_id": np.arange(next_id, next_id + n, dtype=np.int64),
                        "host": np.full(n, host, np.int32),
                        "plane": np.full(n, index, np.int32),
                        "line": np.full(n, i, np.int32),
                        "xevent": pa.Array.from_buffers(
                            pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
                        ),
                    }
                )
            )
            next_id += n
        out += _field(xf.PLANE_LINES, body)
    kept.spaces.setdefault(host, bytearray()).extend(_field(xf.SPACE_PLANES, bytes(out)))
    return next_id - first_event


def _event_bytes(plane, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Line i's events as one buffer and n + 1 offsets (each event's XEvent message)."""
    if plane.spans is None:
        evs = plane.event_bytes(i)
        lens = np.fromiter((len(e) for e in evs), np.int64, len(evs))
        return np.frombuffer(b"".join(evs), np.uint8), np.concatenate([[0], np.cumsum(lens)])
    spans = plane.spans[i]
    lo, hi = int(spans[:, 0].min()), int(spans[:, 1].max())
    edge = np.zeros(hi - lo + 1, np.int8)  # +1 where an event starts, -1 where it ends: inside = running sum
    np.add.at(edge, spans[:, 0] - lo, 1)
    np.add.at(edge, spans[:, 1] - lo, -1)
    inside = np.cumsum(edge[:-1], dtype=np.int8).astype(bool)
    raw = np.frombuffer(plane.raw, np.uint8)[lo:hi]
    order = np.argsort(spans[:, 0], kind="stable")
    lens = (spans[:, 1] - spans[:, 0])[order]
    if not (order == np.arange(len(order))).all():  # events out of file order: gather one by one
        data = np.concatenate([raw[a - lo : b - lo] for a, b in spans.tolist()])
        return data, np.concatenate([[0], np.cumsum(spans[:, 1] - spans[:, 0])])
    return raw[inside], np.concatenate([[0], np.cumsum(lens)])


def finish(kept: Kept, files: list[str], hostnames: list[list[str]]) -> None:
    """Each host's space, with its hostnames, once all its planes are kept."""
    for host, path in enumerate(files):
        space = kept.spaces.pop(host, bytearray())
        for name in hostnames[host]:
            space += _field(xf.SPACE_HOSTNAMES, name.encode())
        kept.files.append((host, os.path.basename(path), bytes(space)))


def insert(con, run_id: int, kept: Kept, insert_arrow) -> None:
    """The kept space of each file and bytes of each event, into xspace_files and xspace_events."""
    if not kept.files:
        return
    files = pa.table(
        {
            "host": [h for h, _, _ in kept.files],
            "file": [f for _, f, _ in kept.files],
            "space": pa.array([s for _, _, s in kept.files], pa.large_binary()),
        }
    )
    insert_arrow(con, "ingest.xspace.insert_files", run_id, files)
    for t in kept.events:
        insert_arrow(con, "ingest.xspace.insert_kept_events", run_id, t)

"""The native XSpace event decoder (_events.c, _planes.c): lines' events straight from the file's bytes.

    plane bytes -> its fields, each line's fields, each line's event spans (parse_plane)
    -> each line's events as LineEvents (decode_line)

The Python decoder (decode_python.py) takes a line's events as Python bytes objects, one per
event, joined into one buffer, after protobuf's parse of the whole plane has made an entry per
event. Here the C walk splits each
line into its events, left where they are in the plane's bytes, and its other fields, which
protobuf parses alone; the events are decoded in one pass over the bytes, with the GIL
released. decode_line returns None for anything it does not decode exactly as protobuf does
(a group, an invalid wire type, a field cut short): the caller then decodes that line with
the Python decoder, which names the problem, so a malformed file is refused with the same
message either way.

Stats come out as LineEvents: events whose stats all hold integers,
refs or no value give stat columns (one per metadata id and kind), the others stat rows. An
event's stats are all columns or all rows, and stats whose metadata id shares its name with a
lower id stay rows (`row_mids`), so the store rows are those the Python decoder's rows give
(tests/xplane/test_decode_native.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler.xspace import _events as _c
from profiler.xspace import wire as xf
from profiler.xspace.columns import LineEvents, StatColumn
from profiler.xspace.wire import XLineLite, XPlaneLite

_OURS = {k: getattr(xf, k) for k in _c.FIELDS} | {k: getattr(xf, k) for k in _c.KINDS}
if _OURS != _c.FIELDS | _c.KINDS:  # the C walks' field numbers are copies of the .proto's
    raise ImportError(f"profiler/xspace/_wire.h is out of date with proto/xplane.proto: {_c.FIELDS | _c.KINDS}")

MAX_COLUMNS = _c.MAX_COLUMNS  # stat columns per line; events needing more are decoded as rows


@dataclass
class Plane:
    """One plane as the import reads it: its fields, its lines and each line's events."""

    msg: object  # the plane's fields (an XPlaneLite; its `lines` empty when `spans` is set)
    lines: list  # each line's fields (XLineLite; `events` empty when `spans` is set)
    raw: memoryview  # the plane's bytes
    spans: list[np.ndarray] | None  # each line's event spans in `raw` (int64 (events, 2)); None: in lines[i].events

    @property
    def name(self) -> str:
        return self.msg.name

    def events(self, i: int) -> int:
        """The events of line i."""
        return len(self.spans[i]) if self.spans is not None else len(self.lines[i].events)

    def event_bytes(self, i: int) -> list[bytes]:
        """Line i's events, one bytes object each (what protobuf's parse gives as line.events)."""
        if self.spans is None:
            return list(self.lines[i].events)
        return [bytes(self.raw[a:b]) for a, b in self.spans[i].tolist()]


def parse_plane(raw, native: bool = True) -> Plane:
    """A serialized XPlane (a view of the file), read with protobuf's rules.

    The native walk (plane_lines) splits each line into its events, left in `raw`, and its other
    fields, which protobuf parses alone, as it parses the plane's own fields: no object per
    event, no copy of the events. Whatever the walk or those parses refuse, and with
    native=False, protobuf parses the plane whole (XPlaneLite, the events as bytes objects),
    raising its own error.
    """
    got = _c.plane_lines(raw) if native else None
    if got is not None:
        rest, counts_b, spans_b, headers, ends_b = got
        ends = np.frombuffer(ends_b, np.int64).tolist()
        starts = [0, *ends[:-1]] if ends else []
        try:
            msg = XPlaneLite.FromString(rest)
            lines = [XLineLite.FromString(headers[a:b]) for a, b in zip(starts, ends, strict=True)]
        except Exception:  # protobuf's DecodeError: the whole parse below raises its own
            lines = None
        if lines is not None:
            bounds = np.concatenate([[0], np.cumsum(np.frombuffer(counts_b, np.int64))]).tolist()
            spans = np.frombuffer(spans_b, np.int64).reshape(-1, 2)
            return Plane(msg, lines, raw, [spans[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    msg = XPlaneLite.FromString(raw)
    return Plane(msg, list(msg.lines), raw, None)


def row_mids(stat_names: dict[int, str]) -> np.ndarray:
    """Stat metadata ids whose stats stay rows: those sharing their name with a lower id (the
    import reads a stat name's lowest id; its other ids become arguments)."""
    first: dict[str, int] = {}
    out = []
    for mid in sorted(stat_names):
        if stat_names[mid] in first:
            out.append(mid)
        else:
            first[stat_names[mid]] = mid
    return np.array(out, np.int64)


def decode_line(buf: np.ndarray, spans: np.ndarray, rows: np.ndarray, ranks: bool = True) -> LineEvents | None:
    """The events buf[spans[i, 0]:spans[i, 1]] (buf: uint8) as columns; None: decode them otherwise.

    `ranks=False` keeps no stat ranks in the columns (only LineEvents.as_rows reads them).
    """
    starts, ends = np.ascontiguousarray(spans[:, 0]), np.ascontiguousarray(spans[:, 1])
    got = _c.decode(buf, starts, ends, rows, ranks)
    if got is None:
        return None
    ev_b, rows_b, dbl_b, kind_b, keys_b, ints_b, index_b, ranks_b = got
    n, m = len(starts), len(kind_b)
    ev = np.frombuffer(ev_b, np.int64).reshape(4, n)
    r = np.frombuffer(rows_b, np.int64).reshape(6, m)
    ints, index = np.frombuffer(ints_b, np.int64), np.frombuffer(index_b, np.int64)
    rank = np.frombuffer(ranks_b, np.int32) if ranks else None
    keys = np.frombuffer(keys_b, np.int64).reshape(-1, 4).tolist()
    columns = []
    for c, (mid, kind, at, ev_at) in enumerate(keys):
        end = keys[c + 1][2] if c + 1 < len(keys) else len(ints)
        where = slice(0, n) if ev_at < 0 else index[ev_at : ev_at + end - at]
        columns.append(StatColumn(mid, kind, where, ints[at:end], None if rank is None else rank[at:end]))
    return LineEvents(
        ev[0],
        ev[1],
        ev[2],
        ev[3],
        r[0],
        r[1],
        np.frombuffer(kind_b, np.int8),
        r[2],
        np.frombuffer(dbl_b, np.float64),
        r[3],
        r[4],
        buf,
        r[5],
        columns,
    )

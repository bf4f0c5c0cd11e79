"""Check a Perfetto trace against the rules under which trace processor drops or misplaces data.

The file is re-read packet by packet with the official message classes of the
`perfetto` package; nothing here re-declares Perfetto's schema. One pass keeps
only per-sequence interning state, track descriptors, open slices and open
flows, so memory follows the number of tracks, not of events. `read_trace()`
does the same pass and also returns what a viewer would show (slices with
names, arguments and times; counter samples; flows) for round-trip tests.

Rules (RULES below, one test each in tests/exporters/test_perfetto_validate.py):
the trace processor keys incremental state by trusted_packet_sequence_id and
skips packets that need it while it is invalid (proto_trace_reader.cc); it
sorts packets by timestamp (stably) before building slices from BEGIN/END pairs
per track; flows join slices in that order. This validator is stricter in one
place: it asks track events to be in timestamp order in the file, so the file
order *is* the order trace processor parses them in.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from profiler.wire import WireError, read_varint

RULES = {
    "packet-sequence": "every packet has a trusted_packet_sequence_id and a timestamp; "
    "track events come in timestamp order",
    "incremental-state": "the first packet of a sequence clears incremental state "
    "(SEQ_INCREMENTAL_STATE_CLEARED); packets using interned data or packet "
    "defaults set SEQ_NEEDS_INCREMENTAL_STATE",
    "interned-ids": "every interned id is non-zero and defined on its sequence before use",
    "track-descriptors": "every track is described once before its first event, with a unique "
    "uuid and a known parent, and no cycles",
    "slice-nesting": "slices on one track nest strictly: every END closes an open slice, every "
    "slice ends, and at one timestamp ENDs precede BEGINs",
    "counter-values": "counter events carry a value and sit on counter tracks; slices do not",
    "flows": "every flow has a direction (starts before it is terminated, never both on one "
    "event) and an end (every started flow is terminated)",
}

_BEGIN, _END, _INSTANT, _COUNTER = (
    pt.TrackEvent.TYPE_SLICE_BEGIN,
    pt.TrackEvent.TYPE_SLICE_END,
    pt.TrackEvent.TYPE_INSTANT,
    pt.TrackEvent.TYPE_COUNTER,
)
_CLEARED = pt.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_NEEDS = pt.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
_INTERNED_KINDS = ("event_names", "event_categories", "debug_annotation_names", "debug_annotation_string_values")


@dataclass(frozen=True)
class Problem:
    """One broken rule at one packet (its index in the file)."""

    rule: str
    packet: int
    message: str

    def __str__(self) -> str:
        return f"packet {self.packet}: [{self.rule}] {self.message}"


@dataclass
class Slice:
    """A slice as a viewer shows it; end_ts is None for instants."""

    track_uuid: int
    ts: int
    end_ts: int | None
    name: str
    categories: tuple[str, ...]
    args: dict[str, object]
    flow_out: tuple[int, ...] = ()
    flow_in: tuple[int, ...] = ()


@dataclass
class Readback:
    """What read_trace() found: tracks by uuid, slices, counter samples, problems."""

    tracks: dict[int, pt.TrackDescriptor] = field(default_factory=dict)
    slices: list[Slice] = field(default_factory=list)
    counters: list[tuple[int, int, float, dict[str, object]]] = field(default_factory=list)  # uuid, ts, value, args
    problems: list[Problem] = field(default_factory=list)

    def path(self, uuid: int) -> list[str]:
        """Names from the root track down to `uuid` (process name for process tracks)."""
        out = []
        seen = set()
        while uuid and uuid in self.tracks and uuid not in seen:
            seen.add(uuid)
            d = self.tracks[uuid]
            out.append(d.process.process_name if d.HasField("process") else d.name)
            uuid = d.parent_uuid
        return out[::-1]


def iter_packets(path: str) -> Iterator[pt.TracePacket]:
    """The TracePackets of a trace file, parsed one at a time with the official class."""
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return
        f.seek(0)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield from iter_packets_bytes(mm)


def iter_packets_bytes(buf) -> Iterator[pt.TracePacket]:
    """The TracePackets of a serialized Trace message."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise ValueError(f"byte {pos}: field runs past the end of the file (truncated trace?)")
            if key >> 3 == 1:
                yield pt.TracePacket.FromString(bytes(buf[pos : pos + length]))
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"byte {pos}: not a Perfetto trace (wire type {wire} at top level)")


def _varint(buf, pos: int) -> tuple[int, int]:
    try:
        return read_varint(buf, pos, len(buf))
    except WireError:
        raise ValueError(f"byte {pos}: truncated varint") from None


def validate_file(path: str, max_problems: int = 100) -> list[Problem]:
    """The problems of a trace file (empty if it follows every rule)."""
    return _Pass(collect=False, max_problems=max_problems).run(iter_packets(path)).problems


def validate_packets(packets, max_problems: int = 100) -> list[Problem]:
    """The problems of a sequence of TracePackets (e.g. built in a test)."""
    return _Pass(collect=False, max_problems=max_problems).run(packets).problems


def read_trace(path: str) -> Readback:
    """Tracks, slices and counters of a trace file, with its problems."""
    return _Pass(collect=True, max_problems=1000).run(iter_packets(path))


@dataclass
class _Seq:
    interned: dict[str, dict[int, str]] = field(default_factory=lambda: {k: {} for k in _INTERNED_KINDS})
    default_track: int = 0


class _Pass:
    def __init__(self, collect: bool, max_problems: int):
        self.collect, self.max_problems = collect, max_problems
        self.out = Readback()
        self.seqs: dict[int, _Seq] = {}
        self.tracks: dict[int, tuple[pt.TrackDescriptor, int]] = {}
        self.open: dict[int, list[tuple[int, int, Slice | None]]] = {}  # uuid -> [(ts, packet, slice)]
        self.flows: dict[int, int] = {}  # open flow id -> packet that started it
        self.last_ts = -1
        self.i = 0

    def problem(self, rule: str, message: str) -> None:
        if len(self.out.problems) < self.max_problems:
            self.out.problems.append(Problem(rule, self.i, message))

    def run(self, packets) -> Readback:
        for self.i, pkt in enumerate(packets):
            self.packet(pkt)
        self.i = -1
        self.finish()
        return self.out

    # -- per packet -------------------------------------------------------------------

    def packet(self, p: pt.TracePacket) -> None:
        if not p.HasField("trusted_packet_sequence_id") or p.trusted_packet_sequence_id == 0:
            self.problem("packet-sequence", "no trusted_packet_sequence_id")
        if not p.HasField("timestamp"):
            self.problem("packet-sequence", "no timestamp")
        seq_id = p.trusted_packet_sequence_id
        cleared = bool(p.sequence_flags & _CLEARED) or p.incremental_state_cleared
        seq = self.seqs.get(seq_id)
        if seq is None:
            if not cleared:
                self.problem("incremental-state", f"first packet of sequence {seq_id} does not clear incremental state")
            seq = self.seqs[seq_id] = _Seq()
        elif cleared:
            self.seqs[seq_id] = seq = _Seq()
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            seq.default_track = d.track_event_defaults.track_uuid if d.HasField("track_event_defaults") else 0
        if p.HasField("interned_data"):
            self.intern(seq, p.interned_data)
        if p.HasField("track_descriptor"):
            self.descriptor(p.track_descriptor)
        if p.HasField("track_event"):
            self.event(p, seq)

    def intern(self, seq: _Seq, data: pt.InternedData) -> None:
        for kind in _INTERNED_KINDS:
            table = seq.interned[kind]
            for entry in getattr(data, kind):
                if entry.iid == 0:
                    self.problem("interned-ids", f"{kind} defines iid 0 (invalid)")
                    continue
                table[entry.iid] = entry.str.decode("utf-8", "replace") if kind.endswith("values") else entry.name

    def descriptor(self, d: pt.TrackDescriptor) -> None:
        if d.uuid == 0:
            self.problem("track-descriptors", "track descriptor without a uuid")
            return
        if d.uuid in self.tracks:
            self.problem(
                "track-descriptors", f"track {d.uuid} described twice (first at packet {self.tracks[d.uuid][1]})"
            )
            return
        self.tracks[d.uuid] = (d, self.i)
        if self.collect:
            self.out.tracks[d.uuid] = d

    def lookup(self, seq: _Seq, kind: str, iid: int, what: str) -> str | None:
        if iid == 0:
            self.problem("interned-ids", f"{what} uses iid 0 (invalid)")
            return None
        v = seq.interned[kind].get(iid)
        if v is None:
            self.problem("interned-ids", f"{what} uses {kind} iid {iid} before it is defined")
        return v

    def event(self, p: pt.TracePacket, seq: _Seq) -> None:
        te = p.track_event
        needs = bool(p.sequence_flags & _NEEDS)
        ts = p.timestamp
        if p.HasField("timestamp"):
            if ts < self.last_ts:
                self.problem(
                    "packet-sequence",
                    f"track event at {ts} after one at {self.last_ts} (keep track events in timestamp order)",
                )
            self.last_ts = max(self.last_ts, ts)
        uses_state = False
        if te.HasField("track_uuid"):
            uuid = te.track_uuid
        else:
            uuid = seq.default_track
            uses_state = True
        # interned references
        name = te.name if te.HasField("name") else None
        if te.HasField("name_iid"):
            uses_state = True
            name = self.lookup(seq, "event_names", te.name_iid, "event name")
        cats = list(te.categories)
        for c in te.category_iids:
            uses_state = True
            cats.append(self.lookup(seq, "event_categories", c, "category") or "")
        args: dict[str, object] = {}
        for a in te.debug_annotations:
            if a.HasField("name_iid"):
                uses_state = True
                key = self.lookup(seq, "debug_annotation_names", a.name_iid, "debug annotation name")
            else:
                key = a.name
            if a.HasField("string_value_iid"):
                uses_state = True
                value: object = self.lookup(
                    seq, "debug_annotation_string_values", a.string_value_iid, "debug annotation string value"
                )
            else:
                which = a.WhichOneof("value")
                value = getattr(a, which) if which else None
            if self.collect:
                args[key or ""] = value
        if uses_state and not needs:
            self.problem(
                "incremental-state",
                "track event uses interned data or packet defaults without SEQ_NEEDS_INCREMENTAL_STATE",
            )
        # track
        if uuid == 0:
            self.problem("track-descriptors", "track event without a track (no track_uuid, no default)")
            return
        desc = self.tracks.get(uuid)
        if desc is None:
            self.problem("track-descriptors", f"track event on track {uuid} before its descriptor")
            return
        is_counter_track = desc[0].HasField("counter")
        t = te.type
        if t == _COUNTER:
            if not is_counter_track:
                self.problem("counter-values", f"counter event on track {uuid}, which is not a counter track")
            if not (te.HasField("counter_value") or te.HasField("double_counter_value")):
                self.problem("counter-values", f"counter event on track {uuid} without a value")
            elif self.collect:
                v = te.double_counter_value if te.HasField("double_counter_value") else float(te.counter_value)
                self.out.counters.append((uuid, ts, v, args))
            return
        if is_counter_track and t in (_BEGIN, _END, _INSTANT):
            self.problem("counter-values", f"slice event on counter track {uuid}")
            return
        if t not in (_BEGIN, _END, _INSTANT):
            self.problem("slice-nesting", f"unsupported track event type {t}")
            return
        flows_out = tuple(te.flow_ids)
        flows_in = tuple(te.terminating_flow_ids)
        self.flow_check(flows_out, flows_in)
        stack = self.open.setdefault(uuid, [])
        if t == _END:
            if not stack:
                self.problem("slice-nesting", f"END on track {uuid} at {ts} with no open slice")
                return
            begin_ts, _, sl = stack.pop()
            if begin_ts == ts:
                self.problem(
                    "slice-nesting",
                    f"END at {ts} on track {uuid} closes a slice begun at the same "
                    "timestamp: ENDs must precede BEGINs (use TYPE_INSTANT for "
                    "zero-length slices)",
                )
            if sl is not None:
                sl.end_ts = ts
            return
        sl = Slice(uuid, ts, None, name or "", tuple(cats), args, flows_out, flows_in) if self.collect else None
        if sl is not None:
            self.out.slices.append(sl)
        if t == _BEGIN:
            stack.append((ts, self.i, sl))

    def flow_check(self, out: tuple[int, ...], inn: tuple[int, ...]) -> None:
        for fid in set(out) & set(inn):
            self.problem("flows", f"flow {fid} both continues and terminates on one event (no direction)")
        for fid in inn:
            if fid == 0:
                self.problem("flows", "flow id 0")
            elif self.flows.pop(fid, None) is None:
                self.problem("flows", f"flow {fid} terminates without having started (no direction)")
        for fid in out:
            if fid == 0:
                self.problem("flows", "flow id 0")
            elif fid not in inn:
                self.flows.setdefault(fid, self.i)

    # -- at the end ---------------------------------------------------------------------

    def finish(self) -> None:
        for uuid, (d, at) in self.tracks.items():
            if d.parent_uuid and d.parent_uuid not in self.tracks:
                self.out.problems.append(
                    Problem("track-descriptors", at, f"track {uuid} has unknown parent {d.parent_uuid}")
                )
        for uuid in self.tracks:
            seen = []
            u = uuid
            while u and u in self.tracks and u not in seen:
                seen.append(u)
                u = self.tracks[u][0].parent_uuid
            if u and u in seen:
                self.out.problems.append(
                    Problem("track-descriptors", self.tracks[uuid][1], f"track {uuid} is in a parent cycle {seen}")
                )
                break
        for uuid, stack in self.open.items():
            for ts, at, _ in stack:
                self.out.problems.append(
                    Problem("slice-nesting", at, f"slice on track {uuid} begun at {ts} never ends")
                )
        for fid, at in self.flows.items():
            self.out.problems.append(Problem("flows", at, f"flow {fid} never terminates (no end)"))

"""The validator: a valid hand-built trace passes; each rule rejects a trace broken on purpose."""

from __future__ import annotations

import copy

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.perfetto.validate import RULES, validate_packets

P = pt.TracePacket
TE = pt.TrackEvent


def valid() -> list[pt.TracePacket]:
    """Process 1 > slice track 2, counter track 3; two nested slices, an instant, a flow, a counter."""
    first = P(timestamp=0, trusted_packet_sequence_id=1, sequence_flags=3, first_packet_on_sequence=True)
    first.interned_data.event_names.add(iid=1, name="op")
    first.interned_data.event_categories.add(iid=1, name="tensorcore")
    first.interned_data.debug_annotation_names.add(iid=1, name="step")
    first.trace_packet_defaults.track_event_defaults.track_uuid = 2
    out = [first]
    out.append(
        P(
            timestamp=0,
            trusted_packet_sequence_id=1,
            track_descriptor=pt.TrackDescriptor(uuid=1, process=pt.ProcessDescriptor(pid=1, process_name="Chip 0")),
        )
    )
    out.append(
        P(
            timestamp=0,
            trusted_packet_sequence_id=1,
            track_descriptor=pt.TrackDescriptor(uuid=2, parent_uuid=1, name="XLA Ops"),
        )
    )
    out.append(
        P(
            timestamp=0,
            trusted_packet_sequence_id=1,
            track_descriptor=pt.TrackDescriptor(
                uuid=3, parent_uuid=1, name="HBM heap", counter=pt.CounterDescriptor(unit=3)
            ),
        )
    )

    def ev(ts, typ, **kw):
        p = P(timestamp=ts, trusted_packet_sequence_id=1)
        p.track_event.type = typ
        for k, v in kw.items():
            if k == "ann":
                p.track_event.debug_annotations.add(name_iid=1, int_value=v)
            elif k in ("flow_ids", "terminating_flow_ids", "category_iids"):
                getattr(p.track_event, k).extend(v)
            else:
                setattr(p.track_event, k, v)
        if kw.get("name_iid") or kw.get("ann") is not None or kw.get("category_iids") or "track_uuid" not in kw:
            p.sequence_flags = 2
        return p

    out += [
        ev(10, TE.TYPE_SLICE_BEGIN, name_iid=1, category_iids=[1], ann=0, flow_ids=[7]),  # default track
        ev(12, TE.TYPE_SLICE_BEGIN, name_iid=1, track_uuid=2),
        ev(12, TE.TYPE_INSTANT, name_iid=1, track_uuid=2),
        ev(15, TE.TYPE_SLICE_END, track_uuid=2),
        ev(20, TE.TYPE_SLICE_END, track_uuid=2),
        ev(20, TE.TYPE_SLICE_BEGIN, name_iid=1, track_uuid=2, terminating_flow_ids=[7]),
        ev(25, TE.TYPE_SLICE_END, track_uuid=2),
        ev(25, TE.TYPE_COUNTER, track_uuid=3, double_counter_value=1.5),
    ]
    return out


def rules_broken(packets) -> set[str]:
    return {p.rule for p in validate_packets(packets)}


def test_valid_trace_passes():
    assert validate_packets(valid()) == []


def _without(packet: pt.TracePacket, *fields: str) -> pt.TracePacket:
    p = copy.deepcopy(packet)
    for f in fields:
        p.ClearField(f)
    return p


def _breakers():
    """(rule, description, function valid packets -> broken packets)."""

    def set_at(i, fn):
        def go(ps):
            ps = copy.deepcopy(ps)
            fn(ps[i])
            return ps

        return go

    return [
        ("packet-sequence", "no sequence id", set_at(5, lambda p: p.ClearField("trusted_packet_sequence_id"))),
        ("packet-sequence", "no timestamp", set_at(2, lambda p: p.ClearField("timestamp"))),
        ("packet-sequence", "events out of order", set_at(11, lambda p: setattr(p, "timestamp", 5))),
        ("incremental-state", "first packet does not clear", set_at(0, lambda p: setattr(p, "sequence_flags", 2))),
        ("incremental-state", "interned name without NEEDS flag", set_at(5, lambda p: p.ClearField("sequence_flags"))),
        ("interned-ids", "undefined name iid", set_at(5, lambda p: setattr(p.track_event, "name_iid", 9))),
        ("interned-ids", "iid 0 used", set_at(5, lambda p: setattr(p.track_event, "name_iid", 0))),
        ("interned-ids", "iid 0 defined", set_at(0, lambda p: p.interned_data.event_names.add(iid=0, name="x"))),
        (
            "interned-ids",
            "undefined annotation name",
            set_at(4, lambda p: setattr(p.track_event.debug_annotations[0], "name_iid", 5)),
        ),
        ("track-descriptors", "event before its descriptor", lambda ps: [ps[0], *ps[4:], *ps[1:4]]),
        ("track-descriptors", "uuid described twice", lambda ps: [*ps[:4], copy.deepcopy(ps[2]), *ps[4:]]),
        ("track-descriptors", "unknown parent", set_at(2, lambda p: setattr(p.track_descriptor, "parent_uuid", 99))),
        ("track-descriptors", "parent cycle", set_at(1, lambda p: setattr(p.track_descriptor, "parent_uuid", 2))),
        ("track-descriptors", "no track", set_at(0, lambda p: p.ClearField("trace_packet_defaults"))),
        ("slice-nesting", "END with nothing open", lambda ps: [*ps[:5], *ps[6:]]),
        ("slice-nesting", "slice never ends", lambda ps: [*ps[:10], *ps[11:]]),
        ("slice-nesting", "BEGIN before END at one timestamp", lambda ps: [*ps[:8], ps[9], ps[8], *ps[10:]]),
        (
            "counter-values",
            "counter without value",
            set_at(11, lambda p: p.track_event.ClearField("double_counter_value")),
        ),
        ("counter-values", "counter on a slice track", set_at(11, lambda p: setattr(p.track_event, "track_uuid", 2))),
        ("counter-values", "slice on a counter track", set_at(5, lambda p: setattr(p.track_event, "track_uuid", 3))),
        ("flows", "flow terminates without start", set_at(4, lambda p: p.track_event.ClearField("flow_ids"))),
        ("flows", "flow never ends", set_at(9, lambda p: p.track_event.ClearField("terminating_flow_ids"))),
        (
            "flows",
            "flow starts and ends on one event",
            set_at(4, lambda p: p.track_event.terminating_flow_ids.append(7)),
        ),
    ]


@pytest.mark.parametrize("rule,what,breaker", _breakers(), ids=[f"{r}:{w}" for r, w, _ in _breakers()])
def test_broken_trace_is_rejected(rule, what, breaker):
    broken = breaker(valid())
    assert rule in rules_broken(broken), f"{what}: not reported as {rule}"


def test_every_rule_has_a_breaking_test():
    assert {r for r, _, _ in _breakers()} == set(RULES)

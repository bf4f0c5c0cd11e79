"""The export's track layout: Chip/Host processes, plane groups, tiles, line and counter tracks, lanes.

Each store track becomes a Perfetto slice track (events; a second one for its step markers) or a
counter track under its chip's or the host's process and its XProf plane. Descriptors are numbered
1, 2, ... in the order they are made; each batch's rows get their track uuid here (lanes included).
"""

from __future__ import annotations

import numpy as np
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from exporters.perfetto.context import ExportContext
from exporters.perfetto.interning import category_iids
from exporters.perfetto.lanes import _Lanes
from profiler.errors import ScprofError

_COUNTER_UNITS = {
    "bytes": pt.CounterDescriptor.UNIT_SIZE_BYTES,
    "count": pt.CounterDescriptor.UNIT_COUNT,
    "ns": pt.CounterDescriptor.UNIT_TIME_NS,
}


class TrackLayout:
    """The run's track descriptors, and per lane key (2 * track, + 1 for step markers; then one per
    chip's breakdown track from bd_key0) the uuid of lane 0 and where further lanes go."""

    def __init__(self, ex: ExportContext):
        self.ex = ex
        self.next_uuid = 1
        tracks = ex.rows("tracks", run=ex.run_id)
        self.tracks = {t[0]: t for t in tracks}
        max_tid = max(self.tracks, default=0)
        max_chip = max((t[4] for t in tracks if t[4] is not None and t[4] >= 0), default=-1)
        self.bd_key0 = 2 * (max_tid + 1)  # lane keys of the breakdown tracks: bd_key0 + chip
        self.n_keys = self.bd_key0 + max_chip + 1
        self.lanes = _Lanes(self.n_keys)  # every lane key: line, marker and breakdown tracks
        f = ex.filter
        ev_counts = dict(ex.filtered("track_events"))
        marker_tracks = [
            r[0]
            for r in ex.rows(
                "marker_tracks", run=ex.run_id, all_steps=f["all_steps"], step_a=f["step_a"], step_b=f["step_b"]
            )
        ]
        counter_tracks = [
            r[0]
            for r in ex.rows(
                "counter_tracks", run=ex.run_id, all_steps=f["all_steps"], span_a=f["span_a"], span_b=f["span_b"]
            )
        ]
        self.events_total = sum(ev_counts.values())
        self.descriptors: list[pt.TrackDescriptor] = []
        self.written = 0  # descriptors already on the wire
        self.groups: dict[tuple, int] = {}
        self.lane_uuids: dict[tuple[int, int], int] = {}  # (key, lane) -> uuid, lanes >= 1
        self.lane0 = np.zeros(self.n_keys, np.uint64)
        self.counter_uuid = np.zeros(max_tid + 1, np.uint64)
        self.key_parent: dict[int, tuple[int, str]] = {}
        self.category_of_track = category_iids(self.tracks, max_tid)
        used = sorted(set(ev_counts) | set(marker_tracks) | set(counter_tracks))
        for tid in used:
            if tid not in self.tracks:
                raise ScprofError(f"run {ex.run_id}: track {tid} is used but not declared")
        for tid in used:
            _, plane, line, kind, chip, core, tile, unit = self.tracks[tid]
            parent = self._group_of(plane, kind, chip, tile)
            rank = tid
            if tid in counter_tracks:
                unit_enum = _COUNTER_UNITS.get(unit or "")
                cd = pt.CounterDescriptor(unit=unit_enum) if unit_enum else pt.CounterDescriptor(unit_name=unit or "")
                self.counter_uuid[tid] = self.describe(
                    name=line, parent_uuid=parent, counter=cd, sibling_order_rank=rank
                )
            for is_marker, present in ((0, tid in ev_counts), (1, tid in marker_tracks)):
                if present:
                    key = 2 * tid + is_marker
                    self.key_parent[key] = (parent, line, rank)
                    self.lane0[key] = self.describe(name=line, parent_uuid=parent, sibling_order_rank=rank)
        ex.stats.tracks = len(self.descriptors)
        # default track of the sequence: the busiest line
        self.default_uuid = int(self.lane0[2 * max(ev_counts, key=ev_counts.get)]) if ev_counts else 0

    def describe(self, **kw) -> int:
        """A new track descriptor with the next uuid; returns the uuid."""
        uuid = self.next_uuid
        self.next_uuid += 1
        self.descriptors.append(pt.TrackDescriptor(uuid=uuid, **kw))
        return uuid

    def process_of(self, host: bool, chip: int | None) -> tuple[tuple, int]:
        """(key, uuid) of the process-like track of a chip or of the host, described on first use."""
        pkey = ("host",) if host else ("chip", chip)
        if pkey not in self.groups:
            name = "Host" if host else f"Chip {chip}"
            pid = 1 if host else 2 + chip
            self.groups[pkey] = self.describe(
                process=pt.ProcessDescriptor(pid=pid, process_name=name), child_ordering=pt.TrackDescriptor.EXPLICIT
            )
        return pkey, self.groups[pkey]

    def _group_of(self, plane: str, kind: str, chip: int, tile: int) -> int:
        host = plane.startswith("/host") or chip is None or chip < 0
        pkey, _ = self.process_of(host, chip)
        gkey = (*pkey, plane)
        if gkey not in self.groups:
            rank = len([k for k in self.groups if k[: len(pkey)] == pkey and len(k) == len(pkey) + 1])
            self.groups[gkey] = self.describe(
                name=plane,
                parent_uuid=self.groups[pkey],
                child_ordering=pt.TrackDescriptor.EXPLICIT,
                sibling_order_rank=rank,
            )
        if kind == "sc_tile" and tile is not None and tile >= 0:
            tkey = (*gkey, "tile", tile)
            if tkey not in self.groups:
                self.groups[tkey] = self.describe(
                    name=f"Tile {tile}",
                    parent_uuid=self.groups[gkey],
                    child_ordering=pt.TrackDescriptor.EXPLICIT,
                    sibling_order_rank=1_000_000 + tile,
                )
            return self.groups[tkey]
        return self.groups[gkey]

    def uuids(
        self,
        track: np.ndarray,
        s_ns: np.ndarray,
        e_ns: np.ndarray,
        is_mk: np.ndarray,
        is_ct: np.ndarray,
        is_bd: np.ndarray,
    ) -> np.ndarray:
        """Each row's track uuid: slices on lanes (keys: 2 * track (+1 for markers); breakdown: after
        those, by chip), samples on their counter track. New lanes are described on the way."""
        n = len(track)
        uuid = np.empty(n, np.uint64)
        sl = np.flatnonzero(~is_ct)
        key = 2 * track + is_mk
        if is_bd.any():
            key = np.where(is_bd, self.bd_key0 + track, key)
        lanes = self.lanes.assign(key[sl], s_ns[sl], e_ns[sl])
        uuid[sl] = self.lane0[key[sl]]
        for j in np.flatnonzero(lanes > 0).tolist():
            kk, ln = int(key[sl[j]]), int(lanes[j])
            u = self.lane_uuids.get((kk, ln))
            if u is None:
                parent, line, rank = self.key_parent[kk]
                u = self.lane_uuids[(kk, ln)] = self.describe(name=line, parent_uuid=parent, sibling_order_rank=rank)
                self.ex.stats.lanes += 1
            uuid[sl[j]] = u
        ct = np.flatnonzero(is_ct)
        uuid[ct] = self.counter_uuid[track[ct]]
        return uuid

    def unwritten(self) -> list[pt.TrackDescriptor]:
        """The descriptors made since the last call (they go on the wire before their first event)."""
        new = self.descriptors[self.written :]
        self.written = len(self.descriptors)
        return new

"""Interned data of the export: iids of event names, categories, annotation names and table names.

Every string is interned once, in the sequence's first packet, so events carry small iids (most
frequent first, so most fit one varint byte); the arrays here are the C encoder's lookup tables.
"""

from __future__ import annotations

import numpy as np
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pt

from analyzers.time_split import CATEGORIES as TIMELINE_CATEGORIES
from exporters.perfetto.context import ExportContext
from profiler.trace_fields import TYPED_FIELDS, TypedField

# The typed event fields exported as debug annotations, by their names (profiler/trace_fields.py),
# step first (markers are named by it). Not the work category: Perfetto's slice category holds
# the track kind, and the step breakdown track shows time by work category.
ANNOTATED: tuple[TypedField, ...] = tuple(f for f in TYPED_FIELDS if f.name != "category")
TYPED_ARGS = tuple(f.name for f in ANNOTATED)
assert TYPED_ARGS[0] == "step"
# Their string ids are interned as debug annotation string values (export.perfetto's annotation_strings).
# Exact picosecond times, present only where nanoseconds lose precision.
EXACT_ARGS = ("start_ps", "dur_ps", "ts_ps")
# Prefix for event_args keys that collide with the names above.
ARGS_PREFIX = "args."
# Interned categories: the kind of the event's track; `step` for step markers.
CATEGORIES = (
    "host",
    "tensorcore",
    "sparsecore",
    "sc_tile",
    "counter",
    "unknown",
    "step",
    "breakdown",
    "gpu",
    "cpu",
    "device",
)
STEP_CATEGORY = "step"
# The per-chip track of the step-time breakdown (analyzers.rules.breakdown): its slices split each
# step window into the wall-time categories of analyzers.time_split, in their priority order.
BREAKDOWN_CATEGORY = "breakdown"


class Interning:
    """The run's interned strings (planned from the store) and their iids, as the encoder looks them up."""

    def __init__(self, ex: ExportContext):
        names = ex.filtered("event_names")
        tables = ex.filtered("annotation_strings")
        keys = [r[0] for r in ex.rows("arg_keys", run=ex.run_id)]
        max_sid = max([r[0] for r in names + tables], default=0)
        # iids start at 1 (0 is invalid), most frequent first so they fit one varint byte
        self.name_iid = np.zeros(max_sid + 1, np.uint64)
        self.table_iid = np.zeros(max_sid + 1, np.uint64)
        for i, (sid, _) in enumerate(names):
            self.name_iid[sid] = i + 1
        for i, (sid, _) in enumerate(tables):
            self.table_iid[sid] = i + 1
        ann_names = list(TYPED_ARGS) + list(EXACT_ARGS)
        self.arg_key_iid: dict[str, int] = {}
        for k in keys:
            exported = ARGS_PREFIX + k if k in ann_names else k
            ann_names.append(exported)
            self.arg_key_iid[k] = len(ann_names)
        self.ann_iid = {n: i + 1 for i, n in enumerate(ann_names)}
        self.ann_iids = np.array([self.ann_iid[n] for n in TYPED_ARGS + EXACT_ARGS], np.uint64)  # the C encoder's
        self.has_args = bool(keys)
        # breakdown slices are named by their category, interned after the events' names
        self.bd_name_iid = {c: len(names) + i + 1 for i, c in enumerate(TIMELINE_CATEGORIES)} if ex.breakdown else {}
        self.interned = pt.InternedData(
            event_categories=[pt.EventCategory(iid=i + 1, name=c) for i, c in enumerate(CATEGORIES)],
            event_names=[pt.EventName(iid=i + 1, name=v) for i, (_, v) in enumerate(names)]
            + [pt.EventName(iid=i, name=c) for c, i in self.bd_name_iid.items()],
            debug_annotation_names=[pt.DebugAnnotationName(iid=i + 1, name=n) for i, n in enumerate(ann_names)],
            debug_annotation_string_values=[
                pt.InternedString(iid=i + 1, str=v.encode()) for i, (_, v) in enumerate(tables)
            ],
        )
        self.step_cat = CATEGORIES.index(STEP_CATEGORY) + 1
        self.bd_cat = CATEGORIES.index(BREAKDOWN_CATEGORY) + 1


def category_iids(tracks: dict[int, tuple], max_tid: int) -> np.ndarray:
    """The category iid of each track id (its kind, else `unknown`): the encoder's table by track."""
    out = np.zeros(max_tid + 1, np.uint64)
    for tid, (_, _plane, _line, kind, *_rest) in tracks.items():
        cat = kind if kind in CATEGORIES else "unknown"
        out[tid] = CATEGORIES.index(cat) + 1
    return out

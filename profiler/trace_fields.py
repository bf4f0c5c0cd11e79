"""The typed fields of an event: one list, read by every part that records, stores or shows them.

A typed field is an optional per-event column of `EventBatch` (proto/scprof_trace.proto) beyond
the four every event has (track, name, start_ps, dur_ps) and the generic key/value `arg_*`
rows. The proto's descriptor gives the names, order and widths; `_ABOUT` below adds what the
proto cannot say (unit, meaning, the XSpace stat names). The recorder, the ingest, the store's
schema, the XSpace import and export, the Perfetto exporter and the UI's hover all derive
their column lists from `TYPED_FIELDS`, so a new field is added here and in the proto only
(docs/trace-format.md walks through it).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.descriptor import FieldDescriptor

from profiler import scprof_trace_pb2 as pb
from profiler.wire import NULL_I32, NULL_I64

EVENT_CORE = ("track", "name", "start_ps", "dur_ps")  # every event has these
INT32, COUNT, STRING = "int32", "count", "string"  # what a typed field holds
GENERIC_ARG_PREFIX = "arg_"  # the key/value rows (arg_event, arg_key, ...)


@dataclass(frozen=True)
class TypedField:
    """One optional typed column of an event."""

    name: str  # proto field, recorder keyword, Perfetto annotation and XSpace stat
    number: int  # EventBatch field number
    is_string: bool  # an interned string id (0 = none); the store holds `<name>_id`
    is_int64: bool  # 64-bit on the wire and in the store (else 32-bit)
    unit: str  # how a value reads for people: profiler.units.format_value's unit
    description: str  # the store column's documentation
    xspace_read: tuple[str, ...]  # XSpace stat names the import reads, a later one winning
    xspace_written: str  # the stat name the XSpace export writes

    @property
    def column(self) -> str:
        """The events table's column: string ids carry an `_id` suffix."""
        return f"{self.name}_id" if self.is_string else self.name

    @property
    def value_column(self) -> str:
        """The column holding the field's value in views and reads: a string field's text under
        its name (`table_name` for the table: `table` is an SQL keyword), a number as stored."""
        return "table_name" if self.name == "table" else self.name

    @property
    def sql_type(self) -> str:
        return "BIGINT" if self.is_int64 else "INTEGER"

    @property
    def holds(self) -> str:
        """STRING (a string id), COUNT (int64: 0 .. 2^63 - 1) or INT32."""
        return STRING if self.is_string else COUNT if self.is_int64 else INT32

    @property
    def null(self) -> int:
        """The proto's null sentinel of this field (NULL_I32 / NULL_I64; 0 for string ids)."""
        return 0 if self.is_string else NULL_I64 if self.is_int64 else NULL_I32


# What the proto cannot say, by field name: unit, column documentation, the XSpace stats the
# import reads (a later one wins over an earlier) and the one the export writes.
_ABOUT: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "step": ("index", "Training step the event belongs to; NULL if none.", ("step_num", "group_id"), "group_id"),
    "table": ("text", "strings.string_id of the embedding table; NULL if none.", ("table", "table_name"), "table"),
    "sc": ("index", "SparseCore (partition) index on the chip; NULL if none.", ("sc", "sparse_core"), "sc"),
    "minibatch": ("index", "Minibatch index within the step; NULL if none.", ("minibatch",), "minibatch"),
    "ids": ("count", "Embedding IDs processed, duplicates included; NULL if none.", ("ids",), "ids"),
    "unique_ids": ("count", "Unique embedding IDs processed; NULL if none.", ("unique_ids",), "unique_ids"),
    "dropped_ids": ("count", "IDs dropped past the limits; NULL if none.", ("dropped_ids",), "dropped_ids"),
    "bytes": (
        "bytes",
        "Bytes moved; NULL if none.",
        ("bytes", "bytes_accessed", "bytes_transferred"),
        "bytes_accessed",
    ),
    "flops": ("flop", "Floating-point operations; NULL if none.", ("flops",), "flops"),
    "category": (
        "text",
        "strings.string_id of the work category (sc_forward, tc_backward, ...); NULL if none.",
        ("hlo_category", "category"),
        "hlo_category",
    ),
}
_WIDTHS = {
    FieldDescriptor.TYPE_FIXED32: (True, False),  # string id
    FieldDescriptor.TYPE_SFIXED32: (False, False),
    FieldDescriptor.TYPE_SFIXED64: (False, True),
}


def _typed_fields() -> tuple[TypedField, ...]:
    """The typed fields in the proto's order, each with its `_ABOUT` entry."""
    out = []
    for f in pb.EventBatch.DESCRIPTOR.fields:
        if f.name in EVENT_CORE or f.name.startswith(GENERIC_ARG_PREFIX):
            continue
        if f.name not in _ABOUT or f.type not in _WIDTHS:
            raise TypeError(f"EventBatch.{f.name}: describe it in profiler/trace_fields.py _ABOUT (a typed field)")
        is_string, is_int64 = _WIDTHS[f.type]
        unit, description, read, written = _ABOUT[f.name]
        out.append(TypedField(f.name, f.number, is_string, is_int64, unit, description, read, written))
    return tuple(out)


TYPED_FIELDS: tuple[TypedField, ...] = _typed_fields()
TYPED_NAMES: tuple[str, ...] = tuple(f.name for f in TYPED_FIELDS)
BY_NAME: dict[str, TypedField] = {f.name: f for f in TYPED_FIELDS}

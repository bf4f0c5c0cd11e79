"""A run from the store as a Perfetto protobuf trace (`scprof export perfetto`).

Layout (docs/exporters.md has the full description):

- one process track per chip ("Chip N") and one for the host ("Host"); under it a
  group per XProf plane (`/device:TPU:0`, `/device:TPU:0 SparseCore 1`,
  `/host:CPU`), under that (a "Tile T" group for SparseCore tiles, then) one slice
  track per XProf line (`XLA Ops`, `Sparse Core Ops`, `Steps`, ...) and one counter
  track per counter (`HBM heap` in bytes, ...);
- events as slices whose debug annotations are the typed arguments (step, table,
  sc, minibatch, ids, unique_ids, dropped_ids, bytes, flops) and the event_args;
  step markers as slices "Step N" (category `step`) on their line;
- overlapping events of one line go to sibling tracks of the same name ("lanes"),
  which the Perfetto UI draws as one track;
- flows from each step's SparseCore forward to the TensorCore forward that consumes
  it, and from the TensorCore backward to the SparseCore backward (ingest.flows.flows);
- a "Step breakdown" track per chip whose slices split each step window into the
  wall-time categories of analyzers.time_split (the analyzers' step breakdown), one
  after the other in priority order (breakdown._plan_breakdown).

Perfetto timestamps are nanoseconds; scprof's are picoseconds. A slice starts at
floor(start_ps / 1000) and ends at floor(end_ps / 1000); when that loses
picoseconds the exact values ride along as `start_ps`/`dur_ps` annotations (and
`ts_ps` on counter samples), so the export is lossless.

Streaming: rows come from DuckDB in time windows of about WINDOW_ROWS rows
(planned from a histogram of start times), unsorted; a reader thread puts each window
in stream order with numpy (_window_order, the same order as STREAM_ORDER) and gathers
it into record batches of CHUNK_ROWS while the previous window is encoded, so memory
does not grow with the run.
Each batch is written on the wire by the compiled encoder exporters/_perfetto_wire.c
(one pass per row: the BEGIN/INSTANT/COUNTER packet, preceded by the END packets
due, which it keeps in a heap); Python plans tracks, lanes, interning and flows per
batch with numpy. All packets are on one trusted packet sequence whose first packet
clears incremental state and interns every event name, category, annotation name
and table name.

Modules, one job each: export (export_run, write_trace: the pipeline), context (the run,
its --steps filter, queries, figures), tracks (layout and descriptors) with lanes
(overlapping slices), interning, breakdown (the "Step breakdown" tracks), flows, stream
(windows of rows) with order (their order and batches, numpy) and prefetch (the reader
thread), encoding (the glue around the C encoder and the head packets).
"""

from exporters.perfetto.breakdown import BREAKDOWN_TRACK
from exporters.perfetto.context import ExportStats
from exporters.perfetto.encoding import STREAM_COLUMNS, STREAM_SCHEMA
from exporters.perfetto.export import ExportCheckError, export_run, write_trace
from exporters.perfetto.flows import SC_OPS_LINE, TC_OPS_LINE
from exporters.perfetto.interning import (
    ARGS_PREFIX,
    BREAKDOWN_CATEGORY,
    CATEGORIES,
    EXACT_ARGS,
    STEP_CATEGORY,
    TYPED_ARGS,
)
from exporters.perfetto.stream import CHUNK_ROWS, STREAM_ORDER, WINDOW_ROWS

__all__ = [
    "ARGS_PREFIX",
    "BREAKDOWN_CATEGORY",
    "BREAKDOWN_TRACK",
    "CATEGORIES",
    "CHUNK_ROWS",
    "EXACT_ARGS",
    "SC_OPS_LINE",
    "STEP_CATEGORY",
    "STREAM_COLUMNS",
    "STREAM_ORDER",
    "STREAM_SCHEMA",
    "TC_OPS_LINE",
    "TYPED_ARGS",
    "WINDOW_ROWS",
    "ExportCheckError",
    "ExportStats",
    "export_run",
    "write_trace",
]

"""scprof's store <-> XProf's XSpace: every naming convention of the mapping, defined once.

Plane and line names, the stats that carry steps and typed fields, the run-facts plane: the
import (decode.py, map_lines.py, map_facts.py, check.py) and the
export (exporters/xspace.py) both read them from here, so the two directions cannot drift.
docs/trace-format.md, "XSpace mapping", describes the same mapping in prose.
"""

from __future__ import annotations

import re

from profiler.trace_fields import STRING, TYPED_FIELDS

# --------------------------------------------------------------------------- planes
# XProf's plane names: a TensorCore `/device:TPU:N`, a SparseCore `/device:TPU:N SparseCore M`
# (a word of letters may stand before M), the host `/host:CPU`.
TPU_PLANE_RE = re.compile(r"^/device:TPU:(\d+)$")
SC_PLANE_RE = re.compile(r"^/device:TPU:(\d+) SparseCore(?: [a-zA-Z]+)? (\d+)$")
GPU_PLANE_RE = re.compile(r"^/device:GPU:(\d+)")  # a GPU (its lines: one per stream)
DEVICE_PLANE_RE = re.compile(r"^/device:[A-Za-z_]+:(\d+)")  # any other (custom) device
HOST_PLANE_PREFIX = "/host:"
HOST_PLANE = "/host:CPU"
SCPROF_PLANE = "/host:scprof"  # a line-less plane holding the run's own facts (written by the export)
HOSTNAME = "scprof"  # the exported space's `hostnames`


def tpu_plane(chip: int) -> str:
    """The TensorCore plane of a chip."""
    return f"/device:TPU:{chip}"


def sc_plane(chip: int, core: int) -> str:
    """The plane of SparseCore `core` of a chip."""
    return f"/device:TPU:{chip} SparseCore {core}"


def plane_number(digits: str) -> int:
    """A chip or core number of a plane name (a sentinel above int32 for an absurdly long one,
    which check.check_plane_ids refuses)."""
    return int(digits) if len(digits) <= 12 else 1 << 62


def plane_kind(name: str) -> tuple[str, int, int]:
    """(track kind, chip, core) of an XProf plane name."""
    if m := SC_PLANE_RE.match(name):
        return "sparsecore", plane_number(m[1]), plane_number(m[2])
    if m := TPU_PLANE_RE.match(name):
        return "tensorcore", plane_number(m[1]), 0
    if name.startswith(HOST_PLANE_PREFIX):
        return "host", -1, -1
    if m := GPU_PLANE_RE.match(name):
        return "gpu", plane_number(m[1]), 0
    if m := DEVICE_PLANE_RE.match(name):
        return "device", plane_number(m[1]), 0
    return "unknown", -1, -1


# --------------------------------------------------------------------------- lines
TC_LINES = ("Steps", "XLA Modules", "XLA Ops")  # a TensorCore plane's lines
SC_LINES = ("Sparse Core Steps", "Sparse Core Modules", "Sparse Core Ops")  # a SparseCore plane's lines
STEP_LINES = (TC_LINES[0], SC_LINES[0])  # their events are step markers
ASYNC_LINE = "Async XLA Ops"  # a TPU plane's async op windows (copy-start .. copy-done): spans, not ops
EMPTY_PLANE_LINE = "(no events)"  # the one track of a device plane whose lines hold no event


# --------------------------------------------------------------------------- event names
# XProf names a TPU op's event metadata by its HLO text (`%copy-start.2 = (f32[..]) copy-start(..)`)
# and gives the op in display_name (`copy-start.2`), except on the `Async XLA Ops` line, whose
# display names are the kind (`async-copy` for each of six distinct copies).
HLO_TEXT_RE = re.compile(r"^%([\w.\-]+) = ")


def event_name(name: str, display_name: str) -> str:
    """The stored name of an event metadata: the op an HLO text names, else display_name, else name."""
    if m := HLO_TEXT_RE.match(name):
        return m[1]
    return display_name or name


COUNTER_LINE = "_counters_"  # zero-length events: samples of the counter their metadata names

# --------------------------------------------------------------------------- steps
GROUP_ID, STEP_NUM = "group_id", "step_num"  # XProf groups a step's events by group_id
MARKER_STAT = "scprof_step_marker"  # on event metadata: a step marker only, not an event of the run

# --------------------------------------------------------------------------- typed fields
# The typed fields and their stats are profiler/trace_fields.py's (one list for every format).
# On import, an event's own stat wins over its metadata's; integer stats fill integer columns
# and string or ref_value stats string ones (a stat of another kind stays an event_args row).
# Order: the import checks columns in TYPED_FIELDS' order.
FIELD = {f.name: f for f in TYPED_FIELDS}
TYPED_STATS = {stat: f.name for f in TYPED_FIELDS for stat in f.xspace_read}  # stat name -> column
STRING_COLUMNS = tuple(f.name for f in TYPED_FIELDS if f.holds == STRING)
# Nullable integer columns besides the step: (sc, minibatch, ids, unique_ids, dropped_ids, bytes, flops).
INT_COLUMNS = tuple(f.name for f in TYPED_FIELDS if f.holds != STRING and f.name != "step")

# --------------------------------------------------------------------------- other stats
UNKNOWN_STAT = "stat_{}"  # the key of a stat whose metadata id the plane does not name
NUM_OCCURRENCES = "num_occurrences"  # event_args key of aggregated events' count
UNIT_STAT = "unit"  # on a counter's event metadata
COUNTER_VALUE_STAT = "counter_value"  # written on `_counters_` events
COUNTER_VALUE_STATS = (COUNTER_VALUE_STAT, "value", "Scaled Value", "Raw Value")  # read, the first present wins
MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")  # their memory stats become counters
ALLOCATOR_STAT = "allocator_name"
MEMORY_STATS = {
    "bytes_allocated": "bytes",
    "bytes_reserved": "bytes",
    "bytes_available": "bytes",
    "peak_bytes_in_use": "bytes",
    "requested_bytes": "bytes",
    "allocation_bytes": "bytes",
    "fragmentation": "ratio",
}  # stat -> counter unit

# --------------------------------------------------------------------------- run facts
# TensorCore plane stats (XProf's) <-> runs' hardware columns.
DEVICE_TYPE_STAT = "device_type_string"  # "TPU v5p" <-> runs.generation "v5p"
GENERATION_RE = re.compile(r"(v\d+[a-z]*)", re.I)  # the generation within a device_type_string
PEAK_TFLOPS_STAT = "peak_teraflops_per_second"  # runs.tc_peak_flops / 1e12
PEAK_HBM_BW_STAT = "peak_hbm_bw_gigabytes_per_second"  # runs.hbm_bandwidth_bytes_per_s / 1e9
MEMORY_SIZE_STAT = "memory_size"  # runs.hbm_bytes


def device_type(generation: str | None) -> str:
    """The device_type_string of a TensorCore plane of this TPU generation."""
    return f"TPU {generation}" if generation else "TPU"


# The `/host:scprof` plane's stats: string facts (in the order the export writes them), then the
# start time (int64). map_facts.py maps them to and from a runs row.
RUN_UUID, RUN_NAME, PRODUCER = "run_uuid", "run_name", "producer"
CONFIG_JSON, TAGS_JSON, HARDWARE_JSON = "config_json", "tags_json", "hardware_json"
STRING_FACTS = (RUN_UUID, RUN_NAME, PRODUCER, CONFIG_JSON, TAGS_JSON, HARDWARE_JSON)
START_TIME_FACT = "start_time_unix_ns"
# hardware_json key (a runs column) -> kind: int32 / int64 counts, finite non-negative doubles, a string.
HARDWARE_FACTS = {
    "num_chips": "i32",
    "sparsecores_per_chip": "i32",
    "tiles_per_sparsecore": "i32",
    "simd_width": "i32",
    "hbm_bytes": "i64",
    "spmem_bytes_per_tile": "i64",
    "hbm_bandwidth_bytes_per_s": "f",
    "tc_peak_flops": "f",
    "ici_bandwidth_bytes_per_s": "f",
    "generation": "s",
}
HARDWARE_EXTRA = "extra"  # hardware_json key holding runs.hardware_extra

"""The analysis standard library: the one definition of each shared figure, as store views.

Each view is declared here as data (name, documentation, columns) and defined by
profiler/stdlib/<name>.sql (a header comment stating its rule, then one SELECT), in the
style of Perfetto's stdlib modules. profiler/schema.py turns them into `CREATE VIEW` and
`COMMENT ON` statements (writers install them on open; the migration to schema version 3
adds them to older stores) and into docs/schema.md. Views are over every run, keyed by
run_id, and read only tables and the views listed before them. The few marked `materialized`
are stored: ingest writes each run's rows of their SQL (profiler/summaries.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from profiler.schema import RUN, Col


@dataclass(frozen=True)
class StdView:
    """A view of the analysis standard library: its SQL is profiler/stdlib/<name>.sql.

    `materialized`: stored as a table that ingest fills from the SQL, run by run, like the
    summary tables (profiler/summaries.py), for what every figure reads (a TEMP view on a
    read-only connection to a version 2 store)."""

    name: str
    doc: str
    columns: tuple[Col, ...]
    materialized: bool = False

    @property
    def sql(self) -> str:
        return stdlib_sql(self.name)


@cache
def stdlib_sql(name: str) -> str:
    """The text of profiler/stdlib/<name>.sql (a header comment, then one SELECT)."""
    return resources.files("profiler").joinpath("stdlib", f"{name}.sql").read_text()


# The counters whose sum is the HBM in use (hbm_usage.sql names them too; a test checks).
HBM_COUNTERS = ("HBM heap", "HBM stack")

# The analysis standard library, in dependency order (a view reads only those above it).
CHIP = Col("chip", "INTEGER", "Chip index; -1 for the host.")
STEP = Col("step", "INTEGER", "Training step.")
SOURCE = Col(
    "source",
    "VARCHAR",
    "Where the span is measured: tensorcore_steps, device_steps, device_events, host_steps or host_events (step_spans).",
)
STDLIB: tuple[StdView, ...] = (
    StdView(
        "step_spans",
        "Every interval a step occupies on a chip, one per source (step markers by line, else the extent of the step's events), ranked: the raw material of the step rules.",
        (
            RUN,
            CHIP,
            STEP,
            SOURCE,
            Col(
                "rank",
                "INTEGER",
                "1 tensorcore_steps, 2 device_steps, 3 device_events, 4 host_steps, 5 host_events: lower is preferred.",
            ),
            Col("start_ps", "BIGINT", "Earliest start of the source's markers (events) of the step on the chip."),
            Col("end_ps", "BIGINT", "Latest end of them."),
        ),
    ),
    StdView(
        "chip_steps",
        "The rule for what a step is: each chip's step from the best-ranked source the chip has (its TensorCore `Steps` markers first); the host only in runs without device chips.",
        (
            RUN,
            CHIP,
            STEP,
            SOURCE,
            Col("start_ps", "BIGINT", "Step start on the chip."),
            Col("end_ps", "BIGINT", "Step end on the chip."),
            Col("dur_ps", "BIGINT", "end_ps - start_ps."),
        ),
        materialized=True,
    ),
    StdView(
        "step_windows",
        "The interval of each device chip's timeline that belongs to each step (chip_steps cut where the chip's next step starts): what the step breakdown splits.",
        (
            RUN,
            CHIP,
            STEP,
            SOURCE,
            Col("start_ps", "BIGINT", "Window start."),
            Col("end_ps", "BIGINT", "Window end (<= the next window's start on the chip)."),
        ),
    ),
    StdView(
        "step_times",
        "The step time of every step (its slowest chip's chip_steps) and `counted`: the steps every summary covers (all but the first and last of a run of 5 or more steps).",
        (
            RUN,
            STEP,
            Col("start_ps", "BIGINT", "The longest chip's step start (the step's window is that chip's step)."),
            Col("dur_ps", "BIGINT", "Step time: the longest chip's step."),
            Col(
                "counted",
                "BOOLEAN",
                "Whether summaries (mean/p50/p90 step time, breakdown shares, minibatches per step) count the step: false for the first (warm-up) and last (drain) step of a run with at least 5 steps.",
            ),
            Col("source", "VARCHAR", "The longest chip's source (step_spans)."),
        ),
        materialized=True,
    ),
    StdView(
        "step_minibatches",
        "Per step, SparseCore minibatches (the most any partition was split into) and dropped IDs, from partition statistics, else from the events; with the step's `counted`.",
        (
            RUN,
            STEP,
            Col(
                "minibatches",
                "INTEGER",
                "Most minibatches any partition of the step was split into; NULL if not recorded.",
            ),
            Col("dropped_ids", "BIGINT", "IDs dropped past the limits in the step; NULL if not recorded."),
            Col("counted", "BOOLEAN", "step_times.counted (false for a step without a step time)."),
            Col("source", "VARCHAR", "partition_stats or events."),
        ),
    ),
    StdView(
        "hbm_usage",
        "HBM in use per chip over time: 'HBM heap' + 'HBM stack' at every sample of either (each holds its value until its next sample).",
        (
            RUN,
            Col("chip", "INTEGER", "Chip index."),
            Col("ts_ps", "BIGINT", "Sample time (of either counter)."),
            Col("heap_bytes", "DOUBLE", "HBM heap then; NULL before its first sample."),
            Col("stack_bytes", "DOUBLE", "HBM stack then; NULL before its first sample."),
            Col("hbm_bytes", "DOUBLE", "heap + stack (a missing one as 0)."),
        ),
    ),
    StdView(
        "hbm_peaks",
        "The HBM peak of each chip (highest hbm_usage), when it was first reached and its share of capacity; a run's HBM peak is its highest chip's.",
        (
            RUN,
            Col("chip", "INTEGER", "Chip index."),
            Col("hbm_peak_bytes", "DOUBLE", "Highest heap + stack."),
            Col("hbm_peak_ts_ps", "BIGINT", "Earliest sample time at that value."),
            Col("hbm_capacity_bytes", "BIGINT", "runs.hbm_bytes: HBM per chip; NULL if unknown."),
            Col("hbm_peak_share", "DOUBLE", "hbm_peak_bytes / hbm_capacity_bytes; NULL if the capacity is unknown."),
        ),
        materialized=True,
    ),
    StdView(
        "op_tracks",
        "Tracks whose events are units of work (ops): all but counters and the step and module lines; with the category of an op that records none.",
        (
            RUN,
            Col("track_id", "INTEGER", "tracks.track_id."),
            Col("chip", "INTEGER", "Chip index; -1 for the host."),
            Col("core", "INTEGER", "Core index on the chip; -1 if none."),
            Col("track_kind", "VARCHAR", "tracks.kind."),
            Col("plane", "VARCHAR", "tracks.plane."),
            Col("line", "VARCHAR", "tracks.line."),
            Col("default_category", "VARCHAR", "tc_other, sc_other or host_other by the track's kind."),
        ),
    ),
    StdView(
        "device_busy",
        "When each device core is busy: the union of its ops' intervals as disjoint islands, in two sets: 'ops' (every op on a device core but a CPU device's host work) and 'compute' (the same less async starts and dones).",
        (
            RUN,
            Col("chip", "INTEGER", "Chip index."),
            Col("core", "INTEGER", "Core index on the chip (a SparseCore's number; 0 otherwise)."),
            Col("track_kind", "VARCHAR", "tensorcore, sparsecore, gpu, cpu or device."),
            Col("busy_set", "VARCHAR", "ops or compute."),
            Col("start_ps", "BIGINT", "Island start."),
            Col("end_ps", "BIGINT", "Island end (before the next island's start)."),
        ),
    ),
    StdView(
        "device_idle",
        "The idle share of each device core (empty device planes too): busy time, active interval (first op to last), and idle over it (XProf's) and over the capture's span.",
        (
            RUN,
            Col("chip", "INTEGER", "Chip index."),
            Col("core", "INTEGER", "Core index on the chip."),
            Col("track_kind", "VARCHAR", "tensorcore, sparsecore, gpu, cpu or device."),
            Col("plane", "VARCHAR", "The core's plane (the first by name)."),
            Col("busy_ps", "BIGINT", "Union of its ops' intervals (device_busy, set 'ops'); 0 without events."),
            Col("first_ps", "BIGINT", "Its first op's start; NULL without ops."),
            Col("last_ps", "BIGINT", "Its last op's end; NULL without ops."),
            Col("active_ps", "BIGINT", "last_ps - first_ps."),
            Col("span_ps", "BIGINT", "The capture's span (runs.last_ps - runs.first_ps)."),
            Col("idle_share_active", "DOUBLE", "1 - busy_ps / active_ps (XProf's device idle); NULL without ops."),
            Col("idle_share_span", "DOUBLE", "1 - busy_ps / span_ps: idle over the whole capture."),
        ),
    ),
    StdView(
        "async_spans",
        "Async op windows (start to done) per device core, from the `Async XLA Ops` line or from <op>-start / <op>-done pairs, with the time the core's compute hides of each and the rest exposed.",
        (
            RUN,
            Col("event_id", "BIGINT", "The window's event (the async line's, or the start op's)."),
            Col("chip", "INTEGER", "Chip index."),
            Col("core", "INTEGER", "Core index on the chip."),
            Col("track_kind", "VARCHAR", "tracks.kind."),
            Col("plane", "VARCHAR", "tracks.plane."),
            Col("name", "VARCHAR", "The async op (its start's name, e.g. copy-start.2)."),
            Col("op", "VARCHAR", "The op's kind (copy, all-reduce, ...)."),
            Col("source", "VARCHAR", "async_line or start_done."),
            Col("start_ps", "BIGINT", "Window start."),
            Col("end_ps", "BIGINT", "Window end."),
            Col("dur_ps", "BIGINT", "end_ps - start_ps."),
            Col("hidden_ps", "BIGINT", "Of the window, time the core's compute (device_busy 'compute') covers."),
            Col("exposed_ps", "BIGINT", "dur_ps - hidden_ps."),
        ),
    ),
    StdView(
        "op_stats",
        "The top ops: per run, kind of core and op name, events, distinct steps and total time (names whose events take no time left out).",
        (
            RUN,
            Col("track_kind", "VARCHAR", "Kind of the op's tracks (tensorcore, sparsecore, host, ...)."),
            Col("name", "VARCHAR", "Op name."),
            Col("events", "BIGINT", "Times it ran."),
            Col("steps", "BIGINT", "Distinct steps it ran in."),
            Col("total_ps", "BIGINT", "Sum of its durations."),
        ),
    ),
    StdView(
        "op_self_times",
        "Per op event that takes time: the event it is nested in on its track and its self time (duration less that of the events nested directly in it).",
        (
            RUN,
            Col("event_id", "BIGINT", "events.event_id."),
            Col("track_id", "INTEGER", "tracks.track_id."),
            Col("name", "VARCHAR", "Op name."),
            Col("step", "INTEGER", "Step; NULL if none."),
            Col("start_ps", "BIGINT", "Start time."),
            Col("dur_ps", "BIGINT", "Duration (> 0)."),
            Col("parent_event_id", "BIGINT", "event_id of the event it is nested in directly; NULL at top level."),
            Col("self_ps", "BIGINT", "dur_ps less its direct children's (>= 0)."),
        ),
    ),
    StdView(
        "sc_table_stats",
        "Per run and embedding table, its SparseCore ops: count, distinct steps, time and IDs.",
        (
            RUN,
            Col("table_name", "VARCHAR", "Embedding table."),
            Col("ops", "BIGINT", "Events on SparseCore tracks naming the table."),
            Col("steps", "BIGINT", "Distinct steps they ran in."),
            Col("total_ps", "BIGINT", "Their summed duration."),
            Col("ids", "BIGINT", "Their summed IDs; NULL if none recorded."),
        ),
    ),
    StdView(
        "run_list",
        "The runs listing (`scprof runs`, the UI's Runs page): hardware, steps, events, span, mean step time over counted steps, status and failure.",
        (
            Col("run_id", "INTEGER", "runs.run_id."),
            Col("name", "VARCHAR", "runs.name."),
            Col("source", "VARCHAR", "runs.source."),
            Col("status", "VARCHAR", "runs.status."),
            Col("hardware", "VARCHAR", "'<generation> x<chips>', '?' where unknown."),
            Col("generation", "VARCHAR", "runs.generation."),
            Col("num_chips", "INTEGER", "runs.num_chips."),
            Col("steps", "BIGINT", "Steps with a step time (step_times rows); 0 for a run without steps."),
            Col("events", "BIGINT", "runs.events."),
            Col("counted_steps", "BIGINT", "Steps step_times counts; NULL for a run without steps."),
            Col("mean_step_ps", "DOUBLE", "Mean step time over the counted steps; NULL without steps."),
            Col("span_ps", "BIGINT", "last_ps - first_ps."),
            Col("ingested", "VARCHAR", "When it was ingested (YYYY-MM-DD HH:MM)."),
            Col("tags", "VARCHAR", "runs.tags as JSON text."),
            Col(
                "failure", "VARCHAR", "The failure the producer recorded in the tags (failure or error); NULL if none."
            ),
        ),
    ),
)


# step_times.counted, in words (docs, the UI's notes).
COUNTED_RULE = "warm-up and drain excluded: every step but a run's first and last, when it has 5 or more"


def steps_covered(steps: Sequence[int], counted: Sequence[bool]) -> str:
    """Which steps a summary over `steps` (in order, with step_times.counted) covers, for people:
    'over 18 counted steps, 1–18 of 0–19 (warm-up and drain excluded)'."""
    kept = [s for s, c in zip(steps, counted, strict=True) if c]
    if not kept:
        return f"no counted step among the {len(steps)} shown (a run's first and last step are not counted)"
    why = "warm-up and drain excluded" if len(kept) < len(steps) else "every step shown"
    return f"over {len(kept)} counted steps, {kept[0]}–{kept[-1]} of {steps[0]}–{steps[-1]} ({why})"


# The runs listing, oldest first: what `scprof runs` prints and the UI's Runs page shows.
RUN_LIST_SQL = "SELECT * FROM run_list ORDER BY run_id"

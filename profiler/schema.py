"""The store's schema, declared once as data.

The DDL, the DuckDB `COMMENT ON` statements and docs/schema.md are all generated
from `TABLES` below and the SQL tree's views (profiler/sql/, read by profiler/sqltree.py:
`VIEWS` from schema.views, `profiler.stdlib.STDLIB` from the stdlib modules), so they cannot
disagree.
Times are int64 picoseconds; names carry their unit. Bump SCHEMA_VERSION and add a step to
`MIGRATIONS` (profiler/store.py) whenever a table or a view changes (writers recreate the
views on open; a read-only open of a version 2 store, which predates the standard library,
gets it as TEMP views on its connection, so every reader sees the current definitions).

`profiler.stdlib.STDLIB` is the analysis standard library: the one definition of each
shared figure (step times, step windows, HBM peaks, top ops, the runs listing), as views
over every run keyed by run_id, their SQL in profiler/sql/stdlib/*.sql. `scprof analyze`, `compare`, the UI
and the exporters read them, and so can users' SQL (`scprof sql "SELECT * FROM step_times"`).
"""

from __future__ import annotations

from dataclasses import dataclass

from profiler.trace_fields import TYPED_FIELDS, TypedField

SCHEMA_VERSION = 8


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Col, ...]
    primary_key: tuple[str, ...] = ()


@dataclass(frozen=True)
class View:
    name: str
    doc: str
    sql: str


RUN = Col("run_id", "INTEGER", "Run this row belongs to (runs.run_id).")

TABLES: tuple[Table, ...] = (
    Table(
        "scprof_meta",
        "Facts about the store itself, e.g. schema_version.",
        (Col("key", "VARCHAR", "Name of the fact."), Col("value", "VARCHAR", "Its value.")),
        ("key",),
    ),
    Table(
        "runs",
        "One row per ingested run (a recorded simulation or an imported capture).",
        (
            Col("run_id", "INTEGER", "Store-assigned id, 1, 2, ..."),
            Col("uuid", "VARCHAR", "Run id from the trace header; unique in the store."),
            Col("name", "VARCHAR", "Human name, e.g. baseline; used by CLI commands taking RUN."),
            Col("source", "VARCHAR", "Where it came from: scprof-trace or xplane."),
            Col("source_path", "VARCHAR", "Path of the ingested file."),
            Col("producer", "VARCHAR", "Program that wrote the trace."),
            Col("format_version", "INTEGER", "Trace format version of the file."),
            Col(
                "status",
                "VARCHAR",
                "ok; truncated when only complete chunks of a cut file were kept; failed when the producer recorded a failure (compile error, HBM OOM; see the header's tags).",
            ),
            Col("truncated_at_byte", "BIGINT", "Byte offset where a truncated file stops; NULL if complete."),
            Col("start_time_unix_ns", "BIGINT", "Wall-clock start of the recording."),
            Col("ingested_at", "TIMESTAMP", "When this run was ingested."),
            Col("generation", "VARCHAR", "TPU generation (v4, v5p, v6e, custom); NULL if unknown."),
            Col("num_chips", "INTEGER", "Chips in the slice; NULL if unknown."),
            Col("sparsecores_per_chip", "INTEGER", "SparseCores per chip; NULL if unknown."),
            Col("tiles_per_sparsecore", "INTEGER", "Tiles per SparseCore; NULL if unknown."),
            Col("simd_width", "INTEGER", "SparseCore SIMD width; NULL if unknown."),
            Col("hbm_bytes", "BIGINT", "HBM capacity per chip in bytes; NULL if unknown."),
            Col("hbm_bandwidth_bytes_per_s", "DOUBLE", "HBM bandwidth per chip; NULL if unknown."),
            Col("tc_peak_flops", "DOUBLE", "TensorCore peak FLOP/s per chip; NULL if unknown."),
            Col("ici_bandwidth_bytes_per_s", "DOUBLE", "ICI bandwidth per chip; NULL if unknown."),
            Col("spmem_bytes_per_tile", "BIGINT", "SparseCore tile scratchpad in bytes; NULL if unknown."),
            Col("hardware_extra", "JSON", "Further hardware facts from the header."),
            Col("config", "JSON", "Full effective run configuration."),
            Col("tags", "JSON", "Free-form tags (object of strings)."),
            Col("events", "BIGINT", "Number of events."),
            Col("first_ps", "BIGINT", "Earliest event start."),
            Col("last_ps", "BIGINT", "Latest event end."),
            Col("steps", "INTEGER", "Number of distinct steps with events."),
        ),
        ("run_id",),
    ),
    Table(
        "strings",
        "Interned strings of each run (event names, table names, argument keys).",
        (
            RUN,
            Col("string_id", "INTEGER", "Id used by events.name_id etc.; 0 is the empty string."),
            Col("value", "VARCHAR", "The string."),
        ),
        ("run_id", "string_id"),
    ),
    Table(
        "tracks",
        "Timelines: one line of one plane, named as in XProf.",
        (
            RUN,
            Col("track_id", "INTEGER", "Id within the run."),
            Col("plane", "VARCHAR", "XProf plane, e.g. /device:TPU:0 SparseCore 1 or /host:CPU."),
            Col("line", "VARCHAR", "XProf line, e.g. Sparse Core Ops, XLA Ops, Steps; counter name for counters."),
            Col(
                "kind",
                "VARCHAR",
                "host, tensorcore, sparsecore, sc_tile, gpu, cpu (a CPU running XLA ops), device or counter.",
            ),
            Col("chip", "INTEGER", "Chip index; -1 for the host."),
            Col("core", "INTEGER", "SparseCore or TensorCore index on the chip; -1 if none."),
            Col("tile", "INTEGER", "SparseCore tile; -1 if none."),
            Col("unit", "VARCHAR", "Unit of a counter track's values (bytes, count, ...)."),
        ),
        ("run_id", "track_id"),
    ),
    Table(
        "events",
        "Complete events (slices): one unit of work on one track, with typed arguments.",
        (
            RUN,
            Col(
                "event_id",
                "BIGINT",
                "Index of the event in its run, in file order (rows are stored grouped by track within each ingest group of about a million events: order by event_id for file order).",
            ),
            Col("track_id", "INTEGER", "tracks.track_id."),
            Col("name_id", "INTEGER", "strings.string_id of the event name."),
            Col("start_ps", "BIGINT", "Start time."),
            Col("dur_ps", "BIGINT", "Duration (>= 0)."),
            *(Col(f.column, f.sql_type, f.description) for f in TYPED_FIELDS),
        ),
    ),
    Table(
        "event_args",
        "Further event arguments as key/value rows (one of the value columns is set).",
        (
            RUN,
            Col("event_id", "BIGINT", "events.event_id."),
            Col("key", "VARCHAR", "Argument name."),
            Col("int_value", "BIGINT", "Value if an integer."),
            Col("double_value", "DOUBLE", "Value if a float."),
            Col("string_value", "VARCHAR", "Value if a string."),
        ),
    ),
    Table(
        "counters",
        "Counter samples (HBM heap, HBM stack, SPMEM, ...): the value holds from ts_ps on.",
        (
            RUN,
            Col("track_id", "INTEGER", "tracks.track_id of a counter track."),
            Col("ts_ps", "BIGINT", "Sample time."),
            Col("value", "DOUBLE", "Sample value, in the track's unit."),
        ),
    ),
    Table(
        "steps",
        "Step markers: step `step` ran on the track over [start_ps, start_ps + dur_ps).",
        (
            RUN,
            Col("track_id", "INTEGER", "tracks.track_id (host or a chip's Steps line)."),
            Col("step", "INTEGER", "Step number."),
            Col("start_ps", "BIGINT", "Step start."),
            Col("dur_ps", "BIGINT", "Step duration."),
        ),
    ),
    Table(
        "sc_partition_stats",
        "Per step, chip, SparseCore and table: IDs seen by host preprocessing against the compiled limits.",
        (
            RUN,
            Col("step", "INTEGER", "Training step."),
            Col("chip", "INTEGER", "Chip index."),
            Col("sc", "INTEGER", "SparseCore (partition) index on the chip."),
            Col("table_name", "VARCHAR", "Embedding table (stacked table name if stacked)."),
            Col("ids", "BIGINT", "IDs in the partition, duplicates included."),
            Col("unique_ids", "BIGINT", "Unique IDs in the partition."),
            Col("max_ids_per_partition", "BIGINT", "Compiled limit on ids; NULL if unknown."),
            Col("max_unique_ids_per_partition", "BIGINT", "Compiled limit on unique ids; NULL if unknown."),
            Col("minibatches", "INTEGER", "Minibatches the partition was split into; NULL if unknown."),
            Col("dropped_ids", "BIGINT", "IDs dropped past the limits; NULL if unknown."),
        ),
    ),
    Table(
        "whatif_trials",
        "What-if trials (scprof analyze --verify, tune, compare --attribute): a stored emulated run re-simulated with changes, and the measured effect.",
        (
            Col(
                "run_id", "INTEGER", "The run the session started from (runs.run_id); its rows go when it is replaced."
            ),
            Col("session", "VARCHAR", "One verify, tune or attribute command (a uuid)."),
            Col("purpose", "VARCHAR", "verify, tune or attribute."),
            Col("seq", "INTEGER", "Order of the trial in its session."),
            Col(
                "label",
                "VARCHAR",
                "What was tried: a finding's rule (verify), a tuning step, a changed key (attribute).",
            ),
            Col("overrides", "JSON", "The trial's config changes relative to the starting run: dotted key -> value."),
            Col(
                "derive_limits",
                "BOOLEAN",
                "The trial derived a limits file first (the document's procedure) and used it.",
            ),
            Col(
                "trial_run_id",
                "INTEGER",
                "The trial's run (runs.run_id); NULL when the change was refused before simulating.",
            ),
            Col("ref_run_id", "INTEGER", "The run the trial was compared with (runs.run_id)."),
            Col("step_time_ps", "DOUBLE", "Mean step time of the trial over its counted steps (step_times)."),
            Col("ref_step_time_ps", "DOUBLE", "Mean step time of the reference run over its counted steps."),
            Col("change", "DOUBLE", "(trial - reference) / reference mean step time; negative is faster."),
            Col("ci_low", "DOUBLE", "95% interval of the change, low end (as scprof compare); NULL: not enough steps."),
            Col("ci_high", "DOUBLE", "95% interval of the change, high end."),
            Col(
                "verdict",
                "VARCHAR",
                "improved, regressed, no change, inconclusive, not enough steps, or failed (rows stored before these words may say no significant change: read as inconclusive).",
            ),
            Col("accepted", "BOOLEAN", "verify: the fix is recommended; tune: the step was taken; attribute: NULL."),
            Col("reason", "VARCHAR", "Why it was accepted or not, in words."),
            Col("created_at", "TIMESTAMP", "When the trial was measured."),
        ),
    ),
    Table(
        "run_analysis",
        "The stamp of each run's analysis: which run (`uuid`) and which code (`analysis_sha1`) made the run's rows of run_figures, run_findings, run_notes and run_step_split, written with them in one transaction by `analyzers/materialize.py` (after `scprof record`, `ingest` and MCP's writers store the run). A run's analysis rows are current, and read instead of running the analyzers again, only when its stamp names the run's uuid, this scprof's analysis_sha1 and no error; otherwise readers analyse the run afresh and writers rebuild it.",
        (
            Col("run_id", "INTEGER", "The run analysed (runs.run_id); its rows go when it is replaced."),
            Col("uuid", "VARCHAR", "runs.uuid of the run analysed."),
            Col(
                "analysis_sha1",
                "VARCHAR",
                "SHA-1 of the analysis library's source (analyzers/, profiler/) the rows were made with.",
            ),
            Col("built_at", "TIMESTAMP", "When the rows were written."),
            Col("build_s", "DOUBLE", "Seconds the analysis took."),
            Col(
                "error",
                "VARCHAR",
                "Why the run has no analysis rows (an analyzer failed, or a figure cannot be stored), else NULL.",
            ),
        ),
        ("run_id",),
    ),
    Table(
        "run_figures",
        "Every analyzer's figures of each run, one row per value, in the order `scprof analyze --json` prints them: `path` names the quantity (`breakdown.share.idle`, `ops.top[0].name`) and the value sits in the column its `type` names. A dict or a list is a row of its own (type `dict`/`list`) whose members name it as `parent`, so the rows rebuild the figures exactly. Filter on `path` to read one quantity of every run, e.g. `breakdown.step_ps_mean`.",
        (
            RUN,
            Col("analyzer", "VARCHAR", "The analyzer whose figure this is (its name, the path's first part)."),
            Col("ord", "INTEGER", "Position among the analyzer's rows (depth first, in the figures' order)."),
            Col("parent", "INTEGER", "ord of the dict or list holding it; NULL for the analyzer's top-level figures."),
            Col("key", "VARCHAR", "Its key in that dict; NULL for a list's item."),
            Col("path", "VARCHAR", "The quantity's name: analyzer, keys and [index]es, e.g. breakdown.share.idle."),
            Col("type", "VARCHAR", "int, float, bool, str, null, dict or list: the column holding the value."),
            Col("int_value", "BIGINT", "The value of an int (a bool: 0 or 1)."),
            Col("double_value", "DOUBLE", "The value of a float (NaN and infinities kept)."),
            Col("text_value", "VARCHAR", "The value of a str."),
        ),
        ("run_id", "analyzer", "ord"),
    ),
    Table(
        "run_findings",
        "Every finding of each run, ranked as `scprof analyze` prints them (by severity, then rule). `finding` holds the whole finding as `analyze --json` prints it; the other columns repeat its headline for SQL.",
        (
            RUN,
            Col("analyzer", "VARCHAR", "The analyzer that made it."),
            Col("ord", "INTEGER", "Position among that analyzer's findings."),
            Col("rank", "INTEGER", "Position in the run's ranked findings (0: the most severe)."),
            Col("rule", "VARCHAR", "The finding's rule."),
            Col("severity", "VARCHAR", "critical, warning or info."),
            Col("title", "VARCHAR", "One line on what is wrong."),
            Col("metric", "VARCHAR", "The headline figure's name."),
            Col("value", "DOUBLE", "The headline figure."),
            Col("unit", "VARCHAR", "Its unit."),
            Col("confidence", "VARCHAR", "high, medium or low."),
            Col("finding", "JSON", "The whole finding: evidence, entities, recommendation, fix, evidence_sql."),
        ),
        ("run_id", "analyzer", "ord"),
    ),
    Table(
        "run_notes",
        "What each analyzer says a run lacks (e.g. no SparseCore counters), in order.",
        (
            RUN,
            Col("analyzer", "VARCHAR", "The analyzer that wrote it."),
            Col("ord", "INTEGER", "Position among its notes."),
            Col("note", "VARCHAR", "The note."),
        ),
        ("run_id", "analyzer", "ord"),
    ),
    Table(
        "run_step_split",
        "The wall-time split of each run: the time of every (chip, step window) by category (analyzers/time_split.py: a sweep over every event, each instant given to the highest-priority category running). What the breakdown figures, the Overview's charts and Compare's breakdown read.",
        (
            RUN,
            Col("chip", "INTEGER", "The chip."),
            Col("step", "INTEGER", "The step (its window on the chip: step_windows)."),
            Col("category", "VARCHAR", "tc_forward, sc_backward, host_preprocess, idle, ...: docs/analyzers.md."),
            Col("dur_ps", "BIGINT", "The category's time in the window, ps."),
        ),
    ),
    Table(
        "xspace_files",
        "An imported XProf capture's XSpace, one row per file (host), less the events of its lines that are rows of `events` (xspace_events keeps those): plane stats, event and stat metadata with their stats (typed: uint64, bytes, ref), display names, line ids and timestamps, the planes without lines (/host:metadata, Task Environment), hostnames, `_counters_` lines whole. What `scprof export xspace` writes back so that XProf reads the export as the capture (profiler/xspace/source.py); none for other runs.",
        (
            RUN,
            Col("host", "INTEGER", "The file's index among the run's files (its host)."),
            Col("file", "VARCHAR", "The file's name, e.g. host0.xplane.pb."),
            Col("space", "BLOB", "The XSpace message (protobuf) without those events."),
        ),
        ("run_id", "host"),
    ),
    Table(
        "xspace_events",
        "Each event of an imported XProf capture as its file encodes it (xspace_files): the XEvent message with its metadata id, offset, duration and own stats, and the line it sits on.",
        (
            RUN,
            Col("event_id", "BIGINT", "events.event_id."),
            Col("host", "INTEGER", "xspace_files.host of its file."),
            Col("plane", "INTEGER", "Index of its plane in the file's XSpace."),
            Col("line", "INTEGER", "Index of its line in the plane."),
            Col("xevent", "BLOB", "The XEvent message (protobuf), as in the file."),
        ),
    ),
)

# Summaries: computed by ingest from each run's rows (profiler/summaries.py), never edited,
# so the UI's first view of a run reads thousands of rows instead of millions.
SUMMARY_TABLES: tuple[Table, ...] = (
    Table(
        "run_summaries",
        "Summary, one row per run: the run's span (origin and 1/16384 of it), the longest event and the tables named on events.",
        (
            RUN,
            Col(
                "timeline_origin_ps",
                "BIGINT",
                "Start of the run's span: the earliest start of an event or step marker; NULL if none.",
            ),
            Col(
                "timeline_bin_ps",
                "BIGINT",
                "The run's span over 16384, rounded up; NULL if no events. tile_sums' level is the least that holds [0, timeline_origin_ps + 16384 of these) in 2^16 buckets.",
            ),
            Col(
                "max_event_dur_ps",
                "BIGINT",
                "Longest event (bounds how early an event overlapping a window starts); 0 if none.",
            ),
            Col("event_tables", "VARCHAR[]", "Embedding tables named on events (events.table_id), sorted."),
        ),
        ("run_id",),
    ),
    Table(
        "sc_step_cells",
        "Summary: per step, chip and SparseCore, the SparseCore op events (category sc_forward or none, with ids and sc set) over all tables.",
        (
            RUN,
            Col("step", "INTEGER", "Training step."),
            Col("chip", "INTEGER", "Chip of the event's track."),
            Col("sc", "INTEGER", "events.sc: SparseCore (partition) index on the chip."),
            Col("ids", "BIGINT", "Sum of events.ids."),
            Col("unique_ids", "BIGINT", "Sum of events.unique_ids; NULL if none recorded."),
            Col("minibatches", "INTEGER", "Highest events.minibatch + 1; NULL if none recorded."),
            Col("dropped_ids", "BIGINT", "Sum of events.dropped_ids; NULL if none recorded."),
        ),
    ),
    Table(
        "step_event_extents",
        "Summary: per chip (-1: the host) and step, the extent of the events tagged with the step (the step rules' fallback where a chip has no step markers: stdlib step_spans).",
        (
            RUN,
            Col("chip", "INTEGER", "Chip of the events' tracks; -1 for the host."),
            Col("step", "INTEGER", "Training step."),
            Col("start_ps", "BIGINT", "Earliest start of an event of the chip tagged with the step."),
            Col("end_ps", "BIGINT", "Latest end (start_ps + dur_ps) of one."),
        ),
    ),
    Table(
        "tile_sums",
        "Summary: the trace viewer's tile pyramid base: per track, base bucket (2^level ps), name and duration class, "
        "the events and step markers starting in it (ui/trace_api.py reads tiles of level >= level from it).",
        (
            RUN,
            Col("level", "INTEGER", "The run's base level: its span [0, end) in at most 2^16 buckets of 2^level ps."),
            Col("track_id", "INTEGER", "tracks.track_id."),
            Col("bucket", "BIGINT", "start_ps >> level."),
            Col("name_id", "INTEGER", "events.name_id; NULL for step markers."),
            Col("step", "INTEGER", "The step marker's step; NULL for events."),
            Col("dur_class", "INTEGER", "The smallest c >= level with dur_ps < 2^c."),
            Col("events", "INTEGER", "Events (or step markers) of the row."),
            Col("busy_ps", "BIGINT", "Sum of their dur_ps."),
        ),
    ),
    Table(
        "sc_step_totals",
        "Summary: per step, over every event with a minibatch index or dropped IDs: minibatches and dropped IDs.",
        (
            RUN,
            Col("step", "INTEGER", "Training step."),
            Col("minibatches", "INTEGER", "Highest events.minibatch + 1; NULL if no event of the step has one."),
            Col("dropped_ids", "BIGINT", "Sum of events.dropped_ids; NULL if none recorded."),
        ),
    ),
)

TABLES = TABLES + SUMMARY_TABLES

# The schema's views (slices, counter_samples, step_markers): the SQL tree's schema.views module.
SCHEMA_VIEW_MODULES = ("schema.views",)


def views() -> tuple[View, ...]:
    """The schema's views, from the SQL tree (profiler/sql/schema/views.sql)."""
    from profiler import sqltree

    return tuple(View(b.name, b.doc, b.sql) for b in sqltree.blocks(SCHEMA_VIEW_MODULES))


VIEWS: tuple[View, ...] = views()


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def table_ddl(t: Table) -> list[str]:
    """CREATE TABLE IF NOT EXISTS for one table, and COMMENT ON for it and each column."""
    cols = [f"{c.name} {c.type}" for c in t.columns]
    if t.primary_key:
        cols.append(f"PRIMARY KEY ({', '.join(t.primary_key)})")
    out = [f"CREATE TABLE IF NOT EXISTS {t.name} ({', '.join(cols)})", f"COMMENT ON TABLE {t.name} IS {_quote(t.doc)}"]
    return out + [f"COMMENT ON COLUMN {t.name}.{c.name} IS {_quote(c.doc)}" for c in t.columns]


def add_column_ddl(f: TypedField) -> str:
    """ALTER TABLE events ADD COLUMN for a typed field (profiler/trace_fields.py) a store made before
    it lacks: DDL from the same declaration as the events table's CREATE TABLE."""
    return f"ALTER TABLE events ADD COLUMN {f.column} {f.sql_type}"


def ddl() -> list[str]:
    """CREATE statements for every table and view, with COMMENT ON for each."""
    from profiler import sqltree

    out = [stmt for t in TABLES for stmt in table_ddl(t)]
    return out + sqltree.ddl(SCHEMA_VIEW_MODULES) + stdlib_ddl()


def stdlib_ddl(temp: bool = False) -> list[str]:
    """CREATE OR REPLACE VIEW for every view of the standard library (a materialized one: CREATE
    TABLE of its columns, which ingest fills), with COMMENT ON it and its columns; with `temp`,
    TEMP views without comments (a read-only connection to an older store)."""
    from profiler import sqltree
    from profiler.stdlib import STDLIB_MODULES

    return sqltree.ddl(STDLIB_MODULES, temp)


def table(name: str) -> Table:
    return next(t for t in TABLES if t.name == name)


def _typed_fields_markdown() -> list[str]:
    """The typed event fields (profiler/trace_fields.py) as a reference table under `events`."""
    lines = [
        "### Typed event fields",
        "",
        "The `events` columns after `dur_ps` are the trace format's typed fields, one list in",
        "`profiler/trace_fields.py` (the proto's `EventBatch` fields beyond the four every event has",
        "and the generic `arg_*` rows). The same list gives the recorder's keywords, the `slices`",
        "view's columns, the Perfetto annotations and the XSpace stats; a field added to it is",
        "added to `events` by the next writing open of an existing store (a read-only open before",
        "that names the field and refuses). docs/trace-format.md walks through adding one.",
        "",
        "| field | proto | null on the wire | unit | XSpace stats read (written) |",
        "|---|---|---|---|---|",
    ]
    for f in TYPED_FIELDS:
        wire = "fixed32 string id" if f.is_string else "sfixed64" if f.is_int64 else "sfixed32"
        null = "0" if f.is_string else "NULL_I64" if f.is_int64 else "NULL_I32"
        stats = ", ".join(f"`{x}`" for x in f.xspace_read)
        lines.append(f"| `{f.name}` | {f.number}, {wire} | {null} | {f.unit} | {stats} (`{f.xspace_written}`) |")
    return [*lines, ""]


def markdown() -> str:
    """docs/schema.md, generated (see tests/test_docs.py)."""
    lines = [
        "# Store schema",
        "",
        f"Schema version **{SCHEMA_VERSION}**. Generated from `profiler/schema.py` by",
        "`python -m profiler.schema > docs/schema.md`; a test fails when this file is stale.",
        "",
        "A store is one DuckDB file (default `./scprof.duckdb`) holding many runs. Every",
        "table but `scprof_meta` has a `run_id`. Times are int64 picoseconds. Ingest writes a",
        "run in one transaction, so a failed ingest leaves nothing behind.",
        "",
        "Migration path: the store records `schema_version` in `scprof_meta`. Opening a store",
        "of an older version for writing applies the steps in `profiler/store.py:MIGRATIONS`",
        "in order inside one transaction; a store of a newer version is refused with a",
        "message to upgrade scprof. Read-only commands (`scprof sql`, `runs`, `analyze`, ...)",
        "refuse an older store with a message naming the command that migrates it; `scprof ui`",
        "migrates it itself before serving.",
        "",
        "Versions: 1, the first; 2 added the summary tables (`run_summaries`, `timeline_bins`,",
        "`timeline_long`, `sc_step_cells`, `sc_step_totals`). The migration from 1 builds them",
        "for every run already in the store (1-2 s per 10 M events on the benchmark machine).",
        "3 added the analysis standard library (the views below) and the summary table",
        "`step_event_extents` it reads; the migration from 2 builds that table and the library's",
        "stored views for every run. 4 added `whatif_trials`. 5 replaced the summary tables",
        "`timeline_bins` and `timeline_long` by `tile_sums` (the trace viewer's tile pyramid base,",
        "which also counts each track's events); the migration from 4 builds it for every run",
        "(0.3-0.45 s per 10 M events), and a read-only open of a version 2 to 4 store reads it",
        "as a TEMP view computed from the events on each query. 6 added `analysis_reports` and",
        "`analysis_report_tables` (runs analysed before it have none: their reports are computed",
        "when asked for). 7 added `xspace_files` and `xspace_events` (captures imported before it",
        "keep none: their export is written from the store's rows, as a recorded run's). 8 replaced",
        "`analysis_reports` and `analysis_report_tables` (JSON and Arrow blobs) by the analysis",
        "tables `run_analysis`, `run_figures`, `run_findings`, `run_notes` and `run_step_split`",
        "(runs stored before it are analysed again when read, and stored so by the next writer).",
        "Writers recreate every view on open, so a change to a view's SQL bumps the version too.",
        "A read-only open of a version 2 store (`scprof sql`, `analyze`, ...) gets the library as",
        "TEMP views on its own connection, nothing written (`step_event_extents` then computed",
        "from the events on each query); version 1 stores must be opened for writing first.",
        "",
        "Summary tables are computed by ingest from each run's rows (`profiler/summaries.py`, in",
        "the ingest transaction) and never edited: they hold what the UI's first view of a run",
        "needs, so it reads thousands of rows instead of millions. Each one's definition is its",
        "table's documentation below; tests check them against the events.",
        "",
    ]
    for t in TABLES:
        lines += [f"## `{t.name}`", "", t.doc, ""]
        if t.primary_key:
            lines += [f"Primary key: `({', '.join(t.primary_key)})`.", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.doc} |" for c in t.columns]
        lines.append("")
        if t.name == "events":
            lines += _typed_fields_markdown()
    lines += ["# Views", ""]
    for v in VIEWS:
        sql = "\n".join(line.strip() for line in v.sql.strip().splitlines())
        lines += [f"## `{v.name}`", "", v.doc, "", "```sql", sql, "```", ""]
    lines += [
        "# Analysis standard library",
        "",
        "The one definition of every figure that appears in more than one place: views over all",
        "runs, keyed by `run_id` (filter on it: `SELECT * FROM step_times WHERE run_id = 1`).",
        "`scprof analyze`, `scprof compare`, the UI and the exporters read them, and so can your",
        "SQL (`scprof sql`, the UI's SQL console). Each view's SQL, with its rule in the header",
        "comment, is in a module of `profiler/sql/stdlib/`; a view reads only the tables and the views",
        "above it. Three are stored (`chip_steps`, `step_times`, `hbm_peaks`: what every page and",
        "analysis reads first): ingest writes each run's rows of their SQL with the summaries, and",
        "when the library's SQL changes (the store keeps its SHA-1 in `scprof_meta.stdlib_sha1`), the",
        "next writing open recreates the views and refills the stored ones for every run, and a",
        "read-only open until then reads through TEMP views of the new SQL. The step-time breakdown",
        "by category is the one figure that is not a view: a",
        "sweep over every event, it is one Python function over `step_windows`",
        "(`analyzers.rules.breakdown.split_windows`, docs/analyzers.md) that the analyzers, the UI and",
        "the Perfetto export all call.",
        "",
        "Which steps a figure covers: per-step summaries (mean, p50 and p90 step time, breakdown",
        "shares, minibatches per step) cover the steps `step_times.counted` marks, every step but",
        "the first (warm-up) and the last (drain) of a run of at least 5 steps; totals (dropped",
        "IDs, events) cover every step.",
        "",
    ]
    from profiler import sqltree
    from profiler.stdlib import STDLIB

    for v in STDLIB:
        lines += [f"## `{v.name}`", "", v.doc, "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.doc} |" for c in v.columns]
        stored = " (a table: ingest stores each run's rows of this SQL, as it does the summaries)"
        lines += ["", f"`{sqltree.tree().module(v.module).path}`{stored if v.materialized else ''}:", "", "```sql"]
        lines += [v.sql.strip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")

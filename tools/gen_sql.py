"""Generated statements of the SQL tree (profiler/sql/), written from their Python sources.

A block tagged `-- @generated tools/gen_sql.py ...` holds a statement this tool writes; a test
(tests/test_sqltree.py) renders each again and compares, so a change to the source (a typed
event field added to profiler/trace_fields.py) fails until the tree is regenerated.

Generated today: schema.views' `slices` (its typed columns, string ids resolved to text, and
the joins to `strings` that resolve them), ui.timeline's `event_row` (one event with its typed
fields by name, the same way); ingest.chrome_json's `typed_names` (the stat names read
into typed columns) and `event_columns` (a column per typed field); ingest.trace's `insert_events`
(a column per typed field, its missing value NULL) and `insert_partition_stats` (the encoding's
missing values NULL); export.perfetto's `stream` and `annotation_strings` (the typed fields
the Perfetto export annotates), export.xspace's `events` and `event_nulls` (the integer typed fields
the XSpace export writes); and whole modules of statements that differ only by a
table name from a Python list (MODULES): derive.clear (the per-run deletes of
profiler/summaries.py's SUMMARY_TABLES), derive.materialized (the fills of the standard library's
materialized views, their SQL copied from profiler/sql/stdlib/) and store.temp_tables (the empty
TEMP tables a read-only connection to an older store makes, from profiler/schema.py's TABLES).

Usage
    python tools/gen_sql.py            # rewrite the generated statements in place
    python tools/gen_sql.py --check    # exit 1 if one is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from exporters.perfetto.interning import ANNOTATED  # noqa: E402
from profiler.chrome_json_to_store import STEPS_LINE  # noqa: E402
from profiler.trace_fields import TYPED_FIELDS  # noqa: E402
from profiler.wire import NULL_I32, NULL_I64  # noqa: E402
from profiler.xspace.map_names import INT_COLUMNS, STRING_COLUMNS  # noqa: E402

ARROW_NAME = {"table": "tbl"}  # `table` is a SQL keyword: an ingest's Arrow column of it is `tbl`


def slices_select() -> str:
    """The slices view's SELECT: events with their track's and strings' text, typed fields included."""
    typed = ",\n       ".join(
        f"s_{f.name}.value AS {f.value_column}" if f.is_string else f"e.{f.column}" for f in TYPED_FIELDS
    )
    joins = "".join(
        f"\nLEFT JOIN strings s_{f.name} ON s_{f.name}.run_id = e.run_id AND s_{f.name}.string_id = e.{f.column}"
        for f in TYPED_FIELDS
        if f.is_string
    )
    return (
        "SELECT e.run_id, e.event_id, t.plane, t.line, t.kind AS track_kind, t.chip, t.core, t.tile,\n"
        "       e.track_id, n.value AS name, e.start_ps, e.dur_ps, e.start_ps + e.dur_ps AS end_ps,\n"
        f"       {typed}\n"
        "FROM events e\n"
        "JOIN tracks t USING (run_id, track_id)\n"
        f"JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id{joins}"
    )


def event_row_select() -> str:
    """ui.timeline's event_row: one event with every typed field by its name, string ids resolved."""
    typed, joins = [], []
    for f in TYPED_FIELDS:
        if f.is_string:
            typed.append(f"s_{f.name}.value AS {f.name}")
            joins.append(
                f"LEFT JOIN strings s_{f.name} ON s_{f.name}.run_id = e.run_id AND s_{f.name}.string_id = e.{f.column}"
            )
        else:
            typed.append(f"e.{f.column} AS {f.name}")
    return (
        f"SELECT e.event_id, e.track_id, n.value AS name, e.start_ps, e.dur_ps, {', '.join(typed)}\n"
        "FROM events e\n"
        "JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id\n"
        + "\n".join(joins)
        + "\nWHERE e.run_id = $run AND e.event_id = $id"
    )


# The Perfetto export's filter on its events `e` (export.perfetto: $all_steps, else --steps A:B).
_EXPORT_EVENT_FILTER = (
    "($all_steps OR ((e.step >= $step_a AND e.step < $step_b)\n"
    "                  OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))"
)


GENERATED_BY = "-- @generated tools/gen_sql.py"


def _statement(name: str, doc: str, source: str, sql: str, params: tuple[str, ...] = ()) -> str:
    head = [f"-- @statement {name}", f"-- {doc}", *params, f"{GENERATED_BY} ({source})"]
    return "\n".join([*head, sql + ";", ""])


def clear_module() -> str:
    """derive.clear: one DELETE of a run's rows per summary table (profiler/summaries.py's SUMMARY_TABLES)."""
    from profiler.stdlib import STDLIB
    from profiler.summaries import SUMMARY_TABLES

    stored = dict.fromkeys(v.module for v in STDLIB if v.materialized and v.name in SUMMARY_TABLES)
    head = (
        "-- @module derive.clear\n"
        "-- Deletes one run's rows of every summary (profiler/summaries.py's SUMMARY_TABLES), before ingest (re)computes\n"
        "-- them; one statement per table, written by tools/gen_sql.py.\n"
        + (f"-- @include {', '.join(stored)}\n" if stored else "")
    )
    run = "-- @param run INTEGER The run."
    return head + "".join(
        "\n"
        + _statement(
            f"delete_{t}",
            f"Deletes the run's rows of {t}.",
            "SUMMARY_TABLES",
            f"DELETE FROM {t} WHERE run_id = $run",
            (run,),
        )
        for t in SUMMARY_TABLES
    )


def materialized_module() -> str:
    """derive.materialized: per materialized view of the standard library, its fill for one run, and
    its delete and fill for every run; each fill holds the view's SQL as profiler/sql/stdlib/ has it."""
    from profiler.stdlib import STDLIB

    views = [v for v in STDLIB if v.materialized]
    head = (
        "-- @module derive.materialized\n"
        "-- The materialized views of the analysis standard library (profiler/sql/stdlib/), filled from their SQL:\n"
        "-- per view, one run's rows (ingest, profiler/summaries.py), and every run's afresh (a migration, new step\n"
        "-- rules). Written by tools/gen_sql.py from the stdlib modules: regenerate after changing a view's SQL.\n"
        f"-- @include {', '.join(dict.fromkeys(v.module for v in views))}\n"
    )
    run = "-- @param run INTEGER The run."
    out = []
    for v in views:
        source = f"the SQL of {v.module}.{v.name}"
        out += [
            _statement(
                f"fill_{v.name}",
                f"Inserts one run's rows of {v.name}.",
                source,
                f"INSERT INTO {v.name} BY NAME SELECT * FROM (\n{v.sql}\n) WHERE run_id = $run",
                (run,),
            ),
            _statement(f"clear_{v.name}", f"Deletes every run's rows of {v.name}.", source, f"DELETE FROM {v.name}"),
            _statement(
                f"fill_all_{v.name}",
                f"Inserts every run's rows of {v.name}.",
                source,
                f"INSERT INTO {v.name} BY NAME SELECT * FROM (\n{v.sql}\n)",
            ),
        ]
    return head + "".join("\n" + s for s in out)


def temp_tables_module() -> str:
    """store.temp_tables: an empty TEMP table of the current schema per table a read-only connection
    to an older store lacks (profiler/store.py's TEMP_TABLES, columns from profiler/schema.py's TABLES)."""
    from profiler.schema import table, table_ddl
    from profiler.store import TEMP_TABLES

    head = (
        "-- @module store.temp_tables\n"
        "-- Empty TEMP tables of the current schema, one per table a read-only connection to an older store lacks\n"
        "-- (profiler/store.py's read-only adapters): written by tools/gen_sql.py from profiler/schema.py's TABLES.\n"
    )
    out = []
    for name in TEMP_TABLES:
        create = table_ddl(table(name))[0].replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE")
        out.append(_statement(f"temp_{name}", f"An empty TEMP {name}.", "TABLES of profiler/schema.py", create))
    return head + "".join("\n" + s for s in out)


# (file under profiler/sql/, its text's renderer): modules written whole
MODULES = (
    ("derive/clear.sql", clear_module),
    ("derive/materialized.sql", materialized_module),
    ("store/temp_tables.sql", temp_tables_module),
)


def chrome_typed_names() -> str:
    """The Chrome JSON import's stat names read into typed columns: (stat, field, rank among the
    field's names, whether the field holds a string), each stat once (its first field)."""
    names = {s: (f.name, j) for f in TYPED_FIELDS for j, s in enumerate(f.xspace_read)}
    rows = ",\n".join(
        f"    ('{s}', '{f}', {j}, {'true' if f in STRING_COLUMNS else 'false'})" for s, (f, j) in names.items()
    )
    return f"INSERT INTO typed_names VALUES\n{rows}"


def chrome_event_columns() -> str:
    """The Chrome JSON import's events columns: a column f_<field> per typed field (a string: its id)."""
    typed = ",\n       ".join(
        f"max(CASE WHEN y.field = '{f.name}' THEN {'sv.id' if f.name in STRING_COLUMNS else 'y.ival'} END) AS f_{f.name}"
        for f in TYPED_FIELDS
    )
    return (
        "CREATE TABLE ev_cols AS\n"
        "SELECT e.i, k.track, n.id AS name, p.start_ps::BIGINT AS start_ps, p.dur_ps::BIGINT AS dur_ps,\n"
        f"       pl.id AS plane_id, l.line = '{STEPS_LINE}' AS is_step_line,\n"
        "       TRY_CAST(regexp_extract(e.name, '^ProfilerStep#(\\d+)$', 1) AS INTEGER) AS profiler_step,\n"
        "       coalesce(bool_or(y.step_num), false) AS has_step_num,\n"
        f"       {typed}\n"
        "FROM ev e JOIN ev_lines l USING (i) JOIN ev_ps p USING (i)\n"
        "JOIN track_ids k ON k.plane = e.plane AND k.line = l.line\n"
        "LEFT JOIN strs n ON n.s = e.name JOIN strs pl ON pl.s = e.plane\n"
        "LEFT JOIN typed y USING (i) LEFT JOIN strs sv ON sv.s = y.sval\n"
        "GROUP BY ALL ORDER BY e.i"
    )


def trace_insert_events() -> str:
    """A scprof trace's events INSERT: a column per typed field, its missing value as NULL."""
    return (
        f"INSERT INTO events (run_id, event_id, track_id, name_id, start_ps, dur_ps, "
        f"{', '.join(f.column for f in TYPED_FIELDS)})\n"
        "SELECT $run, event_id, track, name, start_ps, dur_ps,\n"
        f"       {', '.join(f'NULLIF({ARROW_NAME.get(f.name, f.name)}, {f.null})' for f in TYPED_FIELDS)}\n"
        "FROM b"
    )


def trace_insert_partition_stats() -> str:
    """A scprof trace's partition statistics INSERT: the encoding's missing values as NULL."""
    return (
        "INSERT INTO sc_partition_stats\n"
        "SELECT $run, p.step, p.chip, p.sc, t.value, p.ids, p.unique_ids,\n"
        f"       NULLIF(p.max_ids_per_partition, {NULL_I64}), NULLIF(p.max_unique_ids_per_partition, {NULL_I64}),\n"
        f"       NULLIF(p.minibatches, {NULL_I32}), NULLIF(p.dropped_ids, {NULL_I64})\n"
        "FROM b p JOIN strings t ON t.run_id = $run AND t.string_id = p.tbl"
    )


def perfetto_stream() -> str:
    """export.perfetto's stream: a window's events, step markers, counter samples and breakdown slices,
    with the typed fields the export annotates (exporters.perfetto.interning.ANNOTATED), step first."""
    typed = ", ".join(f"{f.column}::BIGINT AS {f.column}" for f in ANNOTATED)
    none = ", ".join(["NULL"] * (len(ANNOTATED) - 1))  # the typed fields after step
    return (
        "SELECT 0::BIGINT AS kind, event_id::BIGINT AS id, track_id::BIGINT AS track_id, name_id::BIGINT AS name_id,\n"
        f"       start_ps::BIGINT AS start_ps, dur_ps::BIGINT AS dur_ps, {typed}, NULL::DOUBLE AS value\n"
        "FROM events e WHERE run_id = $run\n"
        f"  AND {_EXPORT_EVENT_FILTER}\n"
        "  AND start_ps >= $lo AND start_ps < $hi\n"
        "UNION ALL\n"
        f"SELECT 1, step, track_id, NULL, start_ps, dur_ps, step, {none}, NULL\n"
        "FROM steps WHERE run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b))\n"
        "  AND start_ps >= $lo AND start_ps < $hi\n"
        "UNION ALL\n"
        f"SELECT 2, rowid, track_id, NULL, ts_ps, 0, NULL, {none}, value\n"
        "FROM counters WHERE run_id = $run AND ($all_steps OR (ts_ps >= $span_a AND ts_ps <= $span_b))\n"
        "  AND ts_ps >= $lo AND ts_ps < $hi\n"
        "UNION ALL\n"
        f"SELECT 3, id, chip, name_iid, start_ps, dur_ps, step, {none}, NULL\n"
        "FROM breakdown WHERE start_ps >= $lo AND start_ps < $hi"
    )


def perfetto_annotation_strings() -> str:
    """export.perfetto's annotation_strings: the kept events' typed string ids, counted, with their text."""
    ids = "\n    UNION ALL\n".join(
        f"    SELECT {f.column} AS sid FROM events e WHERE run_id = $run\n"
        f"      AND {_EXPORT_EVENT_FILTER.replace(chr(10), chr(10) + '    ')}\n"
        f"      AND {f.column} IS NOT NULL"
        for f in ANNOTATED
        if f.is_string
    )
    return (
        "SELECT n.string_id, n.value FROM (\n"
        f"  SELECT sid, count(*) AS c FROM (\n{ids}) GROUP BY 1) u\n"
        "JOIN strings n ON n.run_id = $run AND n.string_id = u.sid\n"
        "ORDER BY u.c DESC, n.string_id"
    )


_XSPACE_EVENTS_KEPT = "run_id = $run AND ($all_steps OR (step >= $step_a AND step < $step_b))"


def xspace_events() -> str:
    """export.xspace's events: the kept events, NULL as -1 in the integer typed fields (string ids: 0)."""
    ints = ", ".join(f"coalesce({c}, -1) AS {c}" for c in INT_COLUMNS)
    return (
        "SELECT event_id, track_id, name_id, start_ps, dur_ps,\n"
        "       coalesce(step, -1) AS step, coalesce(table_id, 0) AS table_id, coalesce(category_id, 0) AS category_id,\n"
        f"       {ints}\n"
        f"FROM events WHERE {_XSPACE_EVENTS_KEPT} ORDER BY track_id, start_ps, event_id"
    )


def xspace_event_nulls() -> str:
    """export.xspace's event_nulls: which integer typed fields (and step) of the kept events are NULL."""
    return (
        f"SELECT {', '.join(f'{c} IS NULL AS {c}' for c in (*INT_COLUMNS, 'step'))}\n"
        f"FROM events WHERE {_XSPACE_EVENTS_KEPT} ORDER BY track_id, start_ps, event_id"
    )


# (file under profiler/sql/, block name, its renderer: a view's SELECT, else the whole statement)
GENERATED = (
    ("schema/views.sql", "slices", slices_select),
    ("ui/timeline.sql", "event_row", event_row_select),
    ("ingest/chrome_json.sql", "typed_names", chrome_typed_names),
    ("ingest/chrome_json.sql", "event_columns", chrome_event_columns),
    ("ingest/trace.sql", "insert_events", trace_insert_events),
    ("ingest/trace.sql", "insert_partition_stats", trace_insert_partition_stats),
    ("export/perfetto.sql", "stream", perfetto_stream),
    ("export/perfetto.sql", "annotation_strings", perfetto_annotation_strings),
    ("export/xspace.sql", "events", xspace_events),
    ("export/xspace.sql", "event_nulls", xspace_event_nulls),
)


def regenerate(text: str, name: str, body: str) -> str:
    """`text` with the statement of block `name` replaced by `body` (a view: CREATE VIEW `name` AS
    `body`;); the statement starts at the first line after the block's tags that is not a comment."""
    tag = re.search(rf"^-- @(view|query|statement) {name}\n", text, re.M)
    if not tag:
        raise SystemExit(f"no block {name}")
    start = tag.end()
    while text.startswith("--", start):
        start = text.index("\n", start) + 1
    if tag[1] == "view":
        head = f"CREATE VIEW {name} AS\n"
        if not text.startswith(head, start):
            raise SystemExit(f"view {name}: its statement must start '{head.strip()}'")
        start += len(head)
    end = text.index(";\n", start)
    return text[:start] + body + text[end:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated statement is stale")
    args = ap.parse_args(argv)
    stale = []
    for rel, name, render in GENERATED:
        path = REPO / "profiler" / "sql" / rel
        text = path.read_text()
        new = regenerate(text, name, render())
        if new != text:
            stale.append(f"profiler/sql/{rel}: {name}")
            if not args.check:
                path.write_text(new)
    for rel, render in MODULES:
        path = REPO / "profiler" / "sql" / rel
        text = render()
        if not path.is_file() or path.read_text() != text:
            stale.append(f"profiler/sql/{rel}")
            if not args.check:
                path.write_text(text)
    for s in stale:
        print(("stale: " if args.check else "rewrote: ") + s)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

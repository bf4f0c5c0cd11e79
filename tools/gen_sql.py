"""Generated statements of the SQL tree (profiler/sql/), written from their Python sources.

A block tagged `-- @generated tools/gen_sql.py ...` holds a statement this tool writes; a test
(tests/test_sqltree.py) renders each again and compares, so a change to the source (a typed
event field added to profiler/trace_fields.py) fails until the tree is regenerated.

Generated today: schema.views' `slices` (its typed columns, string ids resolved to text, and
the joins to `strings` that resolve them); export.perfetto's `stream` and `annotation_strings`
(the typed fields the Perfetto export annotates); export.xspace's `events` and `event_nulls`
(the integer typed fields the XSpace export writes).

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
from profiler.trace_fields import TYPED_FIELDS  # noqa: E402
from profiler.xspace.map_names import INT_COLUMNS  # noqa: E402


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


# The Perfetto export's filter on its events `e` (export.perfetto: $all_steps, else --steps A:B).
_EXPORT_EVENT_FILTER = (
    "($all_steps OR ((e.step >= $step_a AND e.step < $step_b)\n"
    "                  OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b)))"
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


# (file under profiler/sql/, block name, its statement's renderer: a view's SELECT, else the statement)
GENERATED = (
    ("schema/views.sql", "slices", slices_select),
    ("export/perfetto.sql", "stream", perfetto_stream),
    ("export/perfetto.sql", "annotation_strings", perfetto_annotation_strings),
    ("export/xspace.sql", "events", xspace_events),
    ("export/xspace.sql", "event_nulls", xspace_event_nulls),
)


def regenerate(text: str, name: str, sql: str) -> str:
    """`text` with the statement of block `name` replaced: a view's by CREATE VIEW `name` AS `sql`;, a
    query's or statement's (what follows its tag lines) by `sql`;."""
    head = f"CREATE VIEW {name} AS\n"
    if head in text:
        start = text.index(head) + len(head)
    else:
        tag = re.search(rf"^-- @(query|statement) {name}\n(--.*\n)*", text, re.M)
        if tag is None:
            raise KeyError(f"no block {name}")
        start = tag.end()
    end = text.index(";\n", start)
    return text[:start] + sql + text[end:]


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
    for s in stale:
        print(("stale: " if args.check else "rewrote: ") + s)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

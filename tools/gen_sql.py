"""Generated statements of the SQL tree (profiler/sql/), written from their Python sources.

A block tagged `-- @generated tools/gen_sql.py ...` holds a statement this tool writes; a test
(tests/test_sqltree.py) renders each again and compares, so a change to the source (a typed
event field added to profiler/trace_fields.py) fails until the tree is regenerated.

Generated today: schema.views' `slices` (its typed columns, string ids resolved to text, and
the joins to `strings` that resolve them) and ui.timeline's `event_row` (one event with its typed
fields by name, the same way).

Usage
    python tools/gen_sql.py            # rewrite the generated statements in place
    python tools/gen_sql.py --check    # exit 1 if one is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from profiler.trace_fields import TYPED_FIELDS  # noqa: E402


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


# (file under profiler/sql/, view or query name, its statement's renderer)
GENERATED = (
    ("schema/views.sql", "slices", slices_select),
    ("ui/timeline.sql", "event_row", event_row_select),
)


def regenerate(text: str, name: str, select: str) -> str:
    """`text` with the statement of the view `name` replaced by CREATE VIEW `name` AS `select`;, or
    that of the query `name` (the lines after its tags) by `select`;."""
    head = f"CREATE VIEW {name} AS\n"
    if head in text:
        start = text.index(head) + len(head)
    else:
        start = text.index(f"-- @query {name}\n")
        while text.startswith("--", start):
            start = text.index("\n", start) + 1
    end = text.index(";\n", start)
    return text[:start] + select + text[end:]


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

"""The analysis standard library: the one definition of each shared figure, as store views.

Its views are the blocks of the SQL tree's stdlib modules (profiler/sql/stdlib/*.sql, read by
profiler/sqltree.py): each with its doc, its columns and its SQL, the rule stated in the SQL's
header comment, in the style of Perfetto's stdlib modules. profiler/schema.py turns them into
`CREATE VIEW` and `COMMENT ON` statements (writers install them on open; the migration to schema
version 3 adds them to older stores) and into docs/schema.md. Views are over every run, keyed by
run_id, and read only tables and the views of the modules they include. The few marked
`-- @materialized` are stored: ingest writes each run's rows of their SQL (profiler/summaries.py).

`HBM_COUNTERS`, `COUNTED_RULE` and `steps_covered` live in profiler/steps_text.py and are
re-exported here for their readers (analyzers, ui, scprof) until those move to the tree.
"""

from __future__ import annotations

from profiler import sqltree
from profiler.steps_text import COUNTED_RULE, HBM_COUNTERS, steps_covered

__all__ = ["COUNTED_RULE", "HBM_COUNTERS", "STDLIB", "STDLIB_MODULES", "steps_covered"]

# The library's modules, in the order docs/schema.md lists them (install order: each after its includes).
STDLIB_MODULES = ("stdlib.steps", "stdlib.memory", "stdlib.ops", "stdlib.runs")

# Its views, in install order (a view reads only tables and the views before it).
STDLIB: tuple[sqltree.Block, ...] = sqltree.blocks(STDLIB_MODULES)

"""The pages, one module each (runs, overview, timeline_page, sparsecore, memory, ops, input, findings,
tuning, compare, sql) with their shared controls in common.py: `layout_*` builds a page's controls from its URL
state; `render_*` fills its data bodies (store + state -> components). ui/routing.filled_page calls
both for each page's layout under Dash Pages (ui/routing.register_pages); the tests call them too.
Here: the tables it does so by.

Every render returns components, never raises for missing data: an empty state says
what is missing and how to get it. Times and sizes carry units everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ui.pages.compare import layout_compare, render_compare, render_compare_verdict
from ui.pages.findings import layout_findings, render_findings
from ui.pages.input import layout_input, render_input
from ui.pages.memory import layout_memory, render_memory
from ui.pages.ops import layout_ops, render_ops
from ui.pages.overview import layout_overview, render_overview, render_overview_analysis
from ui.pages.runs import layout_runs, render_runs
from ui.pages.sparsecore import layout_sparsecore, render_sparsecore
from ui.pages.sql import layout_sql, render_sql
from ui.pages.timeline_page import layout_timeline, render_timeline
from ui.pages.tuning import layout_tuning, render_tuning

# URL path -> the page's layout (store, URL state -> its controls and empty bodies).
LAYOUTS: dict[str, Callable[..., Any]] = {
    "/runs": layout_runs,
    "/overview": layout_overview,
    "/timeline": layout_timeline,
    "/sparsecore": layout_sparsecore,
    "/memory": layout_memory,
    "/ops": layout_ops,
    "/input": layout_input,
    "/findings": layout_findings,
    "/tuning": layout_tuning,
    "/compare": layout_compare,
    "/sql": layout_sql,
}

# The render functions, each fed by its page's `<page>-state` store: (page, the (component id,
# property) pairs it fills in the order of its outputs, render (store, state -> components)).
RENDERERS: tuple[tuple[str, tuple[tuple[str, str], ...], Callable[..., Any]], ...] = (
    ("runs", (("runs-body", "children"),), render_runs),
    ("overview", (("overview-body", "children"),), render_overview),
    ("sparsecore", (("sparsecore-body", "children"),), render_sparsecore),
    ("memory", (("memory-body", "children"),), render_memory),
    ("ops", (("ops-body", "children"),), render_ops),
    ("input", (("input-body", "children"),), render_input),
    ("findings", (("findings-body", "children"),), render_findings),
    ("tuning", (("tuning-body", "children"),), render_tuning),
    ("compare", (("compare-body", "children"),), render_compare),
    ("sql", (("sql-body", "children"),), render_sql),
    ("overview", (("overview-analysis", "children"),), render_overview_analysis),
    ("compare", (("compare-verdict", "children"), ("compare-deltas", "children")), render_compare_verdict),
    (
        "timeline",
        (("timeline-body", "children"), ("timeline-perfetto", "children")),
        render_timeline,
    ),
)

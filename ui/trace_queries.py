"""Names of the trace viewer's SQL for scprof/answers.py, which reads them as text: the queries
themselves are profiler/sql/ui/timeline.sql's (run them with sqltree.query by name)."""

from __future__ import annotations

from profiler import sqltree

FIND_COUNT = sqltree.get("ui.timeline.find_count").sql
FIND_EVENTS = sqltree.get("ui.timeline.find_events").sql
TILE_COUNTS = sqltree.get("ui.timeline.tile_counts").sql
WINDOW_SLICES = sqltree.get("ui.timeline.window_slices").sql

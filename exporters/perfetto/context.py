"""What one Perfetto export shares between its jobs: the run, its --steps filter, the SQL it runs and its figures.

Tracks, interning, the step breakdown, flows and the stream each read the store through this
object (one connection, one set of query parameters and filters) and add to one ExportStats.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from profiler.errors import ScprofError
from profiler.store import Store

# --steps A:B keeps events of steps A..B-1, events without a step that start inside
# those steps' time span, their step markers, and counter samples inside the span.
# {breakdown} is the table of step-breakdown slices, once planned (_plan_breakdown).
_NO_BREAKDOWN = (
    "(SELECT NULL::BIGINT AS id, NULL::BIGINT AS chip, NULL::BIGINT AS name_iid, NULL::BIGINT AS start_ps,"
    " NULL::BIGINT AS dur_ps, NULL::BIGINT AS step WHERE FALSE)"
)
_FILTERS_ALL = {"event_filter": "TRUE", "marker_filter": "TRUE", "counter_filter": "TRUE", "breakdown": _NO_BREAKDOWN}
_FILTERS_STEPS = {
    "event_filter": "((e.step >= $step_a AND e.step < $step_b)"
    " OR (e.step IS NULL AND e.start_ps >= $span_a AND e.start_ps < $span_b))",
    "marker_filter": "(step >= $step_a AND step < $step_b)",
    "counter_filter": "(ts_ps >= $span_a AND ts_ps <= $span_b)",
    "breakdown": _NO_BREAKDOWN,
}


@dataclass
class ExportStats:
    """What an export wrote."""

    events: int = 0
    markers: int = 0
    breakdown: int = 0  # slices on the "Step breakdown" tracks
    counters: int = 0
    flows: int = 0
    tracks: int = 0
    lanes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


class ExportContext:
    """The run being exported, its filters (all of it or --steps A:B) and the queries every job runs."""

    def __init__(self, store: Store, run_id: int, steps: tuple[int, int] | None, breakdown: bool):
        self.store, self.con, self.run_id = store, store.con, run_id
        self.steps = steps
        self.breakdown = breakdown  # whether the "Step breakdown" tracks are exported
        self.stats = ExportStats()
        self.params: dict = {"run": run_id}
        self.filters = dict(_FILTERS_ALL)
        if steps is not None:
            self._set_step_filter(*steps)

    def q(self, sql: str, extra: dict | None = None) -> pa.Table:
        """The result of `sql` as an Arrow table, with the parameters it names."""
        params = {**self.params, **(extra or {})}
        used = {k: v for k, v in params.items() if f"${k}" in sql}
        return self.con.sql(sql, params=used).to_arrow_table()

    def rows(self, sql: str, extra: dict | None = None) -> list[tuple]:
        """The result of `sql` as Python tuples, with the parameters it names."""
        params = {**self.params, **(extra or {})}
        used = {k: v for k, v in params.items() if f"${k}" in sql}
        return self.con.execute(sql, used).fetchall()

    def sql(self, template: str) -> str:
        """`template` with the export's filters ({event_filter}, {marker_filter}, ...) filled in."""
        return template.format(**self.filters)

    def _set_step_filter(self, a: int, b: int) -> None:
        self.params.update(step_a=a, step_b=b)
        span = self.rows("""
            SELECT min(s), max(e) FROM (
              SELECT start_ps AS s, start_ps + dur_ps AS e FROM events
              WHERE run_id = $run AND step >= $step_a AND step < $step_b
              UNION ALL
              SELECT start_ps, start_ps + dur_ps FROM steps
              WHERE run_id = $run AND step >= $step_a AND step < $step_b)""")[0]
        if span[0] is None:
            raise ScprofError(f"--steps: run {self.run_id} has no events in steps {a}..{b - 1}")
        self.params.update(span_a=span[0], span_b=span[1])
        self.filters = dict(_FILTERS_STEPS)

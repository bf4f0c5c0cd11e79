"""What one Perfetto export shares between its jobs: the run, its --steps filter, its queries and its figures.

Tracks, interning, the step breakdown, flows and the stream each read the store through this
object (one connection; the queries of profiler/sql/export/perfetto.sql, with the export's filter as
bound parameters) and add to one ExportStats.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store

# The step breakdown slices the stream reads (export.perfetto's `breakdown` input) when there are none.
NO_BREAKDOWN = pa.table({c: pa.array([], pa.int64()) for c in ("id", "chip", "name_iid", "start_ps", "dur_ps", "step")})


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
        self.breakdown_slices = NO_BREAKDOWN  # the stream's breakdown input, once planned (plan_breakdown)
        self.stats = ExportStats()
        # export.perfetto's filter parameters: the whole run, or --steps A:B and its span
        self.filter: dict = {"run": run_id, "all_steps": True, "step_a": None, "step_b": None}
        self.filter.update(span_a=None, span_b=None)
        if steps is not None:
            self._set_step_filter(*steps)

    def q(self, name: str, inputs: dict | None = None, **params) -> pa.Table:
        """The result of the query export.perfetto.`name` as an Arrow table (exactly its parameters)."""
        return sqltree.query(self.con, "export.perfetto." + name, inputs, **params)

    def rows(self, name: str, **params) -> list[tuple]:
        """The result of the query export.perfetto.`name` as Python tuples (exactly its parameters)."""
        return sqltree.execute(self.con, "export.perfetto." + name, **params).fetchall()

    def filtered(self, name: str, **extra) -> list[tuple]:
        """`rows` of a query that takes the export's filter (all of the run or --steps), and `extra`."""
        return self.rows(name, **self.filter, **extra)

    def _set_step_filter(self, a: int, b: int) -> None:
        span = self.rows("step_span", run=self.run_id, step_a=a, step_b=b)[0]
        if span[0] is None:
            raise ScprofError(f"--steps: run {self.run_id} has no events in steps {a}..{b - 1}")
        self.filter.update(all_steps=False, step_a=a, step_b=b, span_a=span[0], span_b=span[1])

"""What analyzers share for one run: the store, the run's facts, its queries and memoized results.

The definitions shared with the UI, the exporters and users' SQL (step times and which
steps count, step windows, HBM peaks, op tracks) are the store's analysis standard
library (profiler/sql/stdlib). Every query an analyzer runs is a block of the SQL tree
(profiler/sql/analysis/, evidence/), run by `RunContext.sql` with the run bound; the run's
building blocks (its step windows, op tracks, op_events ...) are the table macros of
analysis.base, installed on the connection on first use. Results several analyzers share
(the op arrays, the wall-time split) are computed once per context (`memo`).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import sqltree
from profiler.store import Store
from profiler.units import memory_word

# The tree modules whose macros every context installs on its connection (TEMP: the connection's own).
MACRO_MODULES = ("analysis.base",)


# Connections that hold MACRO_MODULES' TEMP macros already (a cursor is a connection of its own).
_WITH_MACROS: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


class RunContext:
    """One run of one store, as analyzers see it."""

    def __init__(self, store: Store, run_id: int):
        self.store = store
        self.run_id = run_id
        self.run: dict[str, Any] = sqltree.query(store.con, "analysis.run.run_row", run=run_id).to_pylist()[0]
        self.config: dict[str, Any] = json.loads(self.run["config"] or "{}")
        self._memo: dict[str, Any] = {}

    def sql(self, qualified: str, inputs: dict[str, pa.Table] | None = None, **params: Any) -> pa.Table:
        """The tree's query `qualified` (profiler/sql/...) as Arrow, with this run bound to its
        `$run` when it declares one, `params` bound and `inputs` registered (sqltree.query)."""
        if self.store.con not in _WITH_MACROS:  # installed once per connection, on first use
            sqltree.install(self.store.con, MACRO_MODULES, temp=True, kinds=("macro",))
            _WITH_MACROS.add(self.store.con)
        if any(p.name == "run" for p in sqltree.get(qualified).params):
            params = {"run": self.run_id, **params}
        return sqltree.query(self.store.con, qualified, inputs, **params)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """compute() once per context; later calls return the same value."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def step_times(self) -> pa.Table:
        """step, step_ps, start_ps, counted: each step's time on the slice and whether summaries
        count it (the store's step_times view), in step order (cached)."""
        return self.memo("step_times", lambda: step_times(self.store, self.run_id))

    def counted_step_ps(self) -> pa.Array:
        """The step times summaries cover (step_times.counted), in step order."""
        t = self.step_times()
        return pc.filter(t.column("step_ps"), t.column("counted")).combine_chunks()

    def counted_steps(self) -> np.ndarray:
        """The steps summaries cover (step_times.counted), ascending: the steps a per-step series
        of a finding runs over (findings.step_distribution)."""
        t = self.step_times()
        return pc.filter(t.column("step"), t.column("counted")).to_numpy(zero_copy_only=False)

    def step_median_ps(self) -> float | None:
        """Median step time over the counted steps, or None for a run without steps."""
        col = self.counted_step_ps()
        return float(np.median(col.to_numpy(zero_copy_only=False))) if len(col) else None

    def memory_word(self) -> str:
        """What the run's device memory is called for people: HBM on a TPU, device memory on a GPU or CPU."""
        return self.memo(
            "memory_word", lambda: memory_word(self.sql("analysis.run.device_kinds").column("kind").to_pylist())
        )

    def hardware(self, key: str) -> Any:
        """A hardware fact from the run's header, or None when the trace lacks it."""
        return self.run.get(key)


def step_times(store: Store, run_id: int) -> pa.Table:
    """step, step_ps, start_ps, counted of one run from the store's step_times view, by step."""
    return sqltree.query(store.con, "analysis.run.step_times", run=run_id)

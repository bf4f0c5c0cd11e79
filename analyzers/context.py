"""What analyzers share for one run: the store, the run's facts, and cached temp tables.

The definitions shared with the UI, the exporters and users' SQL (step times and which
steps count, step windows, HBM peaks, op tracks) are the store's analysis standard
library (profiler/sql/stdlib); shared intermediate results (a run's step windows, the
per-chip timeline split) are computed once per context as DuckDB temp tables named
after the run, so every analyzer that needs them reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from profiler import sqltree
from profiler.store import Store

# The tree modules whose macros every context installs on its connection (TEMP: the connection's own).
MACRO_MODULES = ("analysis.base",)


@cache
def load_sql(name: str) -> str:
    """The text of analyzers/sql/<name>.sql."""
    return resources.files("analyzers").joinpath("sql", f"{name}.sql").read_text()


class RunContext:
    """One run of one store, as analyzers see it."""

    def __init__(self, store: Store, run_id: int):
        self.store = store
        self.run_id = run_id
        self.run: dict[str, Any] = sqltree.query(store.con, "analysis.run.run_row", run=run_id).to_pylist()[0]
        self.config: dict[str, Any] = json.loads(self.run["config"] or "{}")
        self._temp: set[str] = set()
        self._memo: dict[str, Any] = {}
        self._macros = False  # whether MACRO_MODULES are installed on the connection (on first sql())

    def sql(self, qualified: str, inputs: dict[str, pa.Table] | None = None, **params: Any) -> pa.Table:
        """The tree's query `qualified` (profiler/sql/...) as Arrow, with this run bound to its
        `$run` when it declares one, `params` bound and `inputs` registered (sqltree.query)."""
        if not self._macros:
            sqltree.install(self.store.con, MACRO_MODULES, temp=True, kinds=("macro",))
            self._macros = True
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

    def step_median_ps(self) -> float | None:
        """Median step time over the counted steps, or None for a run without steps."""
        col = self.counted_step_ps()
        return float(pc.approximate_median(col).as_py()) if len(col) else None

    def hardware(self, key: str) -> Any:
        """A hardware fact from the run's header, or None when the trace lacks it."""
        return self.run.get(key)

    def temp(self, name: str) -> str:
        """Name of the temp table `name` for this run, built from sql/<name>.sql on first use.

        The SQL file holds one CREATE statement with `{table}` for its own name,
        `{other}` placeholders for temp tables it depends on, and `$run` for the run
        id (written in as an integer literal: views cannot take parameters).
        """
        table = f"{name}_{self.run_id}"
        if table not in self._temp:
            sql = load_sql(name)
            deps = {d: self.temp(d) for d in _placeholders(sql) if d != "table"}
            self.store.con.execute(sql.format(table=table, **deps).replace("$run", str(int(self.run_id))))
            self._temp.add(table)
        return table

    def query(self, name: str, tables: dict[str, pa.Table] | None = None, **params: Any) -> pa.Table:
        """Run analyzers/sql/<name>.sql (a SELECT) with $run and `params` bound.

        `{x}` placeholders name temp tables (built on first use), or Arrow tables given in `tables`.
        """
        sql = load_sql(name)
        given = {d: f"_{d}_{self.run_id}" for d in tables or {}}
        deps = {d: self.temp(d) for d in _placeholders(sql) if d not in given}
        text = sql.format(**deps, **given)
        used = {k: v for k, v in {"run": self.run_id, **params}.items() if f"${k}" in text}
        return self.store.query(text, used, **{given[d]: t for d, t in (tables or {}).items()})


def step_times(store: Store, run_id: int) -> pa.Table:
    """step, step_ps, start_ps, counted of one run from the store's step_times view, by step."""
    return sqltree.query(store.con, "analysis.run.step_times", run=run_id)


def _placeholders(sql: str) -> set[str]:
    import string

    return {f for _, f, _, _ in string.Formatter().parse(sql) if f}

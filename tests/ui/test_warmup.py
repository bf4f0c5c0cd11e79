"""ui/warmup.py: what a first render would pay once per process is paid at server start (prime);
and a comparison made from reports a page computed is the one `scprof compare` makes from the
stored analyses."""

from __future__ import annotations

from analyzers.compare import compare_runs
from analyzers.registry import analyze_run
from profiler.store import Store


def test_a_comparison_from_cached_reports_is_scprof_compares(mixed_db):
    with Store.open(mixed_db, read_only=True) as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        base, cand = ids["baseline"], ids["tuned"]
        reports = (analyze_run(store, base), analyze_run(store, cand))
        assert compare_runs(store, base, cand, reports=reports).to_dict() == compare_runs(store, base, cand).to_dict()


FIRST_RENDERS = """
import json, sys
from ui.routing import filled_page
from ui.state import PAGES
from ui.store_access import StoreAccess
from ui.warmup import prime

access = StoreAccess(sys.argv[1])
with access.open() as store:
    runs = [r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id")]
prime()
before = set(sys.modules)
for path in PAGES:
    query = f"?base={runs[-2]}&cand={runs[-1]}" if path == "/compare" else f"?run={runs[-1]}"
    filled_page(access, path, query, budget_s=60)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_after_prime_a_first_render_imports_nothing(ui_db):
    """prime() imports at server start what the pages' first renders would (FIRST_USE_MODULES,
    plotly's validators): numpy's masked arrays and random generators, narwhals' interchange
    layer, plotly's shape and annotation classes cost a first Overview, Memory or Compare
    50-100 ms otherwise."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-c", FIRST_RENDERS, ui_db],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []

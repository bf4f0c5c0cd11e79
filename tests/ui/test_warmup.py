"""The UI server computes the newest runs' analyses and the default Compare pair's comparison
ahead, in the background while it is idle (ui/warmup.py; the target: first views within 1 s): after
it, a page finds them cached, and they are the figures it would have computed itself (`scprof
compare`'s); while a request is in flight it computes nothing."""

from __future__ import annotations

import dataclasses
import time

from analyzers.compare import compare_runs
from analyzers.registry import analyze_run
from profiler.store import Store
from ui import compare_data, data
from ui.store_access import KeyedCache, StoreAccess
from ui.warmup import Activity, warm_up


def test_warm_up_computes_the_newest_runs_analyses_and_the_default_pair(mixed_db, monkeypatch):
    monkeypatch.setattr(data, "ANALYSES", KeyedCache(size=8))
    monkeypatch.setattr(data, "COMPARISONS", KeyedCache(size=8))
    access = StoreAccess(mixed_db)
    with access.open() as store:
        ids = [r["run_id"] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id DESC")]
        pair = compare_data.compare_pair(store, {})
        assert len(ids) > 2 and all(data.cached_analysis(store, r) is None for r in ids)
    warm_up(access, runs=2).join(timeout=120)
    with access.open() as store:
        assert [data.cached_analysis(store, r) is not None for r in ids[:2]] == [True, True]
        assert all(data.cached_analysis(store, r) is None for r in ids[2:] if r not in (pair["base"], pair["cand"]))
        key = ("compare", store.path, *data._run_key(store, pair["base"]), *data._run_key(store, pair["cand"]))
        assert data.COMPARISONS.get(key) is not None
        report = data.cached_analysis(store, ids[0])
        fresh = analyze_run(store, ids[0])
        assert [dataclasses.asdict(f) for f in report.findings] == [dataclasses.asdict(f) for f in fresh.findings]


def test_a_comparison_from_cached_reports_is_scprof_compares(mixed_db):
    with Store.open(mixed_db, read_only=True) as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        base, cand = ids["baseline"], ids["tuned"]
        reports = (analyze_run(store, base), analyze_run(store, cand))
        assert compare_runs(store, base, cand, reports=reports).to_dict() == compare_runs(store, base, cand).to_dict()


def test_warm_up_waits_while_a_request_is_in_flight(mixed_db, monkeypatch):
    monkeypatch.setattr(data, "ANALYSES", KeyedCache(size=8))
    monkeypatch.setattr(data, "COMPARISONS", KeyedCache(size=8))
    access = StoreAccess(mixed_db)
    with access.open() as store:
        newest = store.rows("SELECT max(run_id) AS r FROM runs")[0]["r"]
    activity = Activity()
    activity.enter()
    thread = warm_up(access, activity, runs=1, idle_s=0.2)
    time.sleep(0.6)
    with access.open() as store:
        assert data.cached_analysis(store, newest) is None
    activity.leave()
    thread.join(timeout=120)
    with access.open() as store:
        assert data.cached_analysis(store, newest) is not None


def _wait_for(check, timeout_s: float = 120.0) -> bool:
    """Poll `check()` until it is true or `timeout_s` has passed; its last value."""
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(check())


def _fresh_caches(monkeypatch) -> None:
    monkeypatch.setattr(data, "ANALYSES", KeyedCache(size=8))
    monkeypatch.setattr(data, "COMPARISONS", KeyedCache(size=8))


def test_a_page_document_starts_the_analyses_its_callbacks_will_ask_for(mixed_db, monkeypatch):
    """GET /overview?run=X computes X's analysis (and no other run's) in the background; GET
    /compare?base=A&cand=B both runs' and their comparison, the figures `scprof compare` gives."""
    from ui.app import create_app

    _fresh_caches(monkeypatch)
    app = create_app(mixed_db)
    client = app.server.test_client()
    with app.scprof_access.open() as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        assert client.get(f"/overview?run={ids['tuned']}").status_code == 200
        assert _wait_for(lambda: data.cached_analysis(store, ids["tuned"]) is not None)
        assert data.cached_analysis(store, ids["baseline"]) is None
        assert client.get(f"/compare?base={ids['baseline']}&cand={ids['tuned']}").status_code == 200
        key = ("compare", store.path, *data._run_key(store, ids["baseline"]), *data._run_key(store, ids["tuned"]))
        assert _wait_for(lambda: data.COMPARISONS.get(key) is not None)
        assert data.cached_analysis(store, ids["baseline"]) is not None
        assert data.COMPARISONS.get(key).to_dict() == compare_runs(store, ids["baseline"], ids["tuned"]).to_dict()
    app.scprof_access.close()


def test_prefetch_leaves_unknown_runs_other_paths_and_refused_requests_alone(mixed_db, monkeypatch):
    """An unknown run in the URL, a page whose callbacks run no analyzer, Dash's own requests and a
    request the access check refuses start nothing; a later page is still prefetched."""
    from ui.app import create_app

    _fresh_caches(monkeypatch)
    app = create_app(mixed_db, token="s3cret")
    client = app.server.test_client()
    with app.scprof_access.open() as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        assert client.get(f"/overview?run={ids['tuned']}").status_code == 401  # no token: refused
        time.sleep(1.0)  # what a prefetch would have had to start
        assert data.cached_analysis(store, ids["tuned"]) is None
        client.get("/?token=s3cret")  # the cookie
        for path in (
            "/overview?run=999",
            "/overview?run=no_such_run",
            "/compare?base=999",
            "/timeline",
            "/_dash-layout",
        ):
            assert client.get(path).status_code == 200, path
        time.sleep(1.0)
        assert len(data.ANALYSES._values) == 0
        client.get(f"/findings?run={ids['spmem']}")
        assert _wait_for(lambda: data.cached_analysis(store, ids["spmem"]) is not None)
    app.scprof_access.close()


# Renders every page of the store (the two newest runs; Compare: older against newer) in a fresh
# process after prime(), and prints the modules the renders imported (JSON).
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

"""UI benchmark: server-side time of each page's main callback on a 10 M-event run, and the
largest payload sent to the browser.

For every page, the figure is its layout's work (what Dash Pages' routing callback runs): the
page's controls from the URL and its main render function (ui/routing.filled_page), called as
the server calls them (read-only cursor of the app's connection), and the size of their JSON as
Dash sends it. "first" is the page's first call in a freshly started
server (the UI's caches emptied and the store reopened before it), what a user waits for;
"warm" the median of the next calls. The Timeline is a canvas trace viewer fed by /api/trace/*:
its rows are what it costs the server, through the Flask test client: the page (layout + render,
a mount point), GET /api/trace/meta, the tiles of the whole run for every track at the level the
viewer asks first (ui/assets/trace_tiles.js levelFor over PLOT_PX pixels), and the tiles of a deep
zoom (1/20,000 of the run: exact events). Render functions that run the analyzers
(Overview's breakdown, Findings, Compare's verdict) are reported apart, cold (first view of a
run: the analyzers run) and warm (cached), since the analyzers' own cost is not the UI's.

Usage: python benchmarks/ui_pages.py [--events 10000000] [--db PATH] [--repeat 3]
(--db: reuse a store holding the runs `ui-bench-a` and `ui-bench-b`, else they are built in it.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

import plotly

from profiler.store import Store
from profiler.synthetic import write_synthetic_trace
from profiler.trace_to_store import ingest_trace
from ui import data, pages
from ui.app import create_app
from ui.pages.compare import render_compare, render_compare_verdict
from ui.pages.findings import render_findings
from ui.pages.memory import render_memory
from ui.pages.overview import render_overview, render_overview_analysis
from ui.pages.runs import render_runs
from ui.pages.sparsecore import render_sparsecore
from ui.pages.sql import render_sql
from ui.pages.timeline_page import render_timeline
from ui.store_access import RUN_FACTS
from ui.trace_api import FACTS, TILES

TARGET_MS = 500
TARGET_BYTES = 2_000_000
PLOT_PX = 1150  # the viewer's canvas width less its track names (trace_viewer.js LW) in a 1400 px window
TILE_TRACKS = 256  # tracks per tile request (trace_tiles.js pump)


def payload(obj) -> int:
    """Bytes sent: an HTTP body's length, or the JSON of a Dash callback's output."""
    if isinstance(obj, bytes):
        return len(obj)
    return len(json.dumps(obj, cls=plotly.utils.PlotlyJSONEncoder))


def level_for(t0: int, t1: int, width_px: int, max_level: int) -> int:
    """trace_tiles.js levelFor: the level whose bucket (2^k ps) is at most one pixel."""
    per = (t1 - t0) / max(1, width_px)
    k = math.floor(math.log2(per)) if per >= 1 else 0
    return max(0, min(k, max_level))


def tiles_for(k: int, t0: int, t1: int, last_ps: int) -> list[int]:
    """trace_tiles.js tilesFor (no padding): the tiles of level k covering [t0, t1)."""
    span = 1 << (k + 10)
    return list(range(max(0, t0 // span), min(max(t0, t1 - 1) // span, max(0, last_ps) // span) + 1))


def get_tiles(client, run: int, k: int, tiles: list[int], tracks: list[int]) -> tuple[bytes, set[str]]:
    """GET every tile of `tiles` at level k for `tracks` (256 a request, as the viewer asks):
    (the bodies, the modes the tracks came in)."""
    body, modes = b"", set()
    for i in tiles:
        for c in range(0, len(tracks), TILE_TRACKS):
            chunk = ",".join(map(str, tracks[c : c + TILE_TRACKS]))
            r = client.get(f"/api/trace/tile?run={run}&k={k}&i={i}&tracks={chunk}")
            assert r.status_code == 200, r.get_data(as_text=True)
            body += r.get_data()
            modes |= {t["mode"] for t in r.get_json()["tracks"].values()}
    return body, modes


def ensure_runs(db: str, events: int, workdir: str) -> None:
    t = time.perf_counter()
    with Store.open(db) as store:  # migrates an older store (building its summaries): timed
        print(f"opened {db} for writing in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        have = {r["name"]: r["events"] for r in store.rows("SELECT name, events FROM runs")}
        for i, name in enumerate(("ui-bench-a", "ui-bench-b")):
            if have.get(name, 0) >= events * 0.99:
                continue
            path = os.path.join(workdir, f"{name}.sctrace")
            t = time.perf_counter()
            write_synthetic_trace(path, events, seed=i, run_name=name)
            ingest_trace(store, path, name=name, replace=True)
            os.remove(path)
            print(f"built {name}: {events:,} events in {time.perf_counter() - t:.1f} s", file=sys.stderr)


def cold(access) -> None:
    """As a freshly started server: the UI's caches empty and the store reopened (DuckDB's buffers dropped)."""
    RUN_FACTS._values.clear()
    FACTS._values.clear()
    TILES._values.clear()
    data.ANALYSES._values.clear()
    data.COMPARISONS._values.clear()
    access.close()


def measure(access, fn, repeat: int) -> tuple[float, float, int]:
    """(first ms, median ms of the rest, payload bytes) of fn(store); the first call is cold."""
    times, size = [], 0
    cold(access)
    for _ in range(repeat + 1):
        with access.open() as store:
            t = time.perf_counter()
            out = fn(store)
            times.append((time.perf_counter() - t) * 1e3)
        size = payload(out)
    return times[0], statistics.median(times[1:]), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--db", help="store to use (built when it lacks the runs); default: a temporary one")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-analysis", action="store_true", help="leave out the analyzer-backed callbacks")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="scprof-ui-bench-")
    db = args.db or os.path.join(workdir, "ui-bench.duckdb")
    ensure_runs(db, args.events, workdir)
    app = create_app(db)
    access = app.scprof_access
    with access.open() as store:
        a, b = store.resolve_run("ui-bench-a"), store.resolve_run("ui-bench-b")
        events = store.rows("SELECT events FROM runs WHERE run_id = ?", [a])[0]["events"]
        bounds = data.step_bounds(store, a)
        chips = sorted(
            {t["chip"] for t in store.rows("SELECT DISTINCT chip FROM tracks WHERE run_id = ? AND chip >= 0", [a])}
        )
    steps = list(data.clamp_steps(bounds, None))
    client = app.server.test_client()
    meta = client.get(f"/api/trace/meta?run={a}").get_json()
    tracks = [t["id"] for t in meta["tracks"]]
    first, last = meta["first_ps"], meta["last_ps"]
    k_run = level_for(first, last, PLOT_PX, meta["max_level"])
    run_tiles = tiles_for(k_run, first, last + 1, last)
    span = last - first
    z0 = first + span // 2
    z1 = z0 + span // 20_000
    k_zoom = level_for(z0, z1, PLOT_PX, meta["max_level"])
    zoom_tiles = tiles_for(k_zoom, z0, z1, last)
    modes = {
        "run": get_tiles(client, a, k_run, run_tiles, tracks)[1],
        "zoom": get_tiles(client, a, k_zoom, zoom_tiles, tracks)[1],
    }
    print(
        f"timeline: {len(tracks)} tracks; whole run: level {k_run}, tiles {run_tiles}, modes {sorted(modes['run'])}; "
        f"zoom [{z0}, {z1}): level {k_zoom}, tiles {zoom_tiles}, modes {sorted(modes['zoom'])}",
        file=sys.stderr,
    )

    def page(path: str, query: str, render, state, n_out: int = 1):
        from ui import state as ui_state

        def fn(store):
            layout = pages.LAYOUTS[path](store, ui_state.parse(query))
            out = render(store, state)
            return [layout, out]

        return fn

    def http(url: str):
        def fn(store):
            r = client.get(url)
            assert r.status_code == 200, r.get_data(as_text=True)
            return r.get_data()

        return fn

    mains = {
        "runs": page("/runs", "", render_runs, {}),
        "overview": page("/overview", f"run={a}", render_overview, {"run": a, "steps": steps}),
        "timeline (page: layout + viewer mount)": page(
            "/timeline", f"run={a}", render_timeline, {"run": a, "steps": steps, "t0": None, "t1": None}
        ),
        "timeline (GET /api/trace/meta)": http(f"/api/trace/meta?run={a}"),
        f"timeline (whole-run tiles, all {len(tracks)} tracks)": lambda store: get_tiles(
            client, a, k_run, run_tiles, tracks
        )[0],
        f"timeline (deep-zoom tiles, 1/20,000 of the run, all {len(tracks)} tracks)": lambda store: get_tiles(
            client, a, k_zoom, zoom_tiles, tracks
        )[0],
        "sparsecore": page(
            "/sparsecore", f"run={a}", render_sparsecore, {"run": a, "steps": steps, "tables": [], "metric": "ids"}
        ),
        "memory": page("/memory", f"run={a}", render_memory, {"run": a, "steps": steps, "chips": chips[:1]}),
        "compare": page("/compare", f"base={a}&cand={b}", render_compare, {"base": a, "cand": b}),
        "sql": page(
            "/sql",
            "",
            render_sql,
            {
                "q": "SELECT plane, name, start_ps, dur_ps FROM slices "
                f"WHERE run_id = {a} AND step = 100 ORDER BY start_ps",
                "rows": 1000,
            },
        ),
    }
    results = {}
    for name, fn in mains.items():
        first, warm, size = measure(access, fn, args.repeat)
        results[name] = {"first_ms": round(first, 1), "warm_ms": round(warm, 1), "payload_bytes": size}
        print(f"{name:34s} first {first:8.1f} ms  warm {warm:8.1f} ms  payload {size / 1e3:8.1f} kB", file=sys.stderr)
    analysis = {}
    if not args.skip_analysis:
        for name, render, state in (
            ("overview analysis", render_overview_analysis, {"run": a, "steps": steps}),
            ("findings", render_findings, {"run": a}),
            ("compare verdict", render_compare_verdict, {"base": a, "cand": b}),
        ):
            first, warm, size = measure(access, lambda s, r=render, st=state: r(s, st), 1)
            analysis[name] = {"cold_ms": round(first, 1), "warm_ms": round(warm, 1), "payload_bytes": size}
            print(
                f"{name:34s} cold  {first:8.1f} ms  warm {warm:8.1f} ms  payload {size / 1e3:8.1f} kB", file=sys.stderr
            )
    worst = max(r["warm_ms"] for r in results.values())
    worst_first = max(r["first_ms"] for r in results.values())
    largest = max([r["payload_bytes"] for r in results.values()] + [r["payload_bytes"] for r in analysis.values()])
    print(
        json.dumps(
            {
                "benchmark": "ui",
                "events": events,
                "steps": steps[1] - steps[0] + 1,
                "chips": len(chips),
                "timeline_tiles": {
                    "plot_px": PLOT_PX,
                    "tracks": len(tracks),
                    "whole_run": {"k": k_run, "tiles": run_tiles, "modes": sorted(modes["run"])},
                    "deep_zoom": {"t0": z0, "t1": z1, "k": k_zoom, "tiles": zoom_tiles, "modes": sorted(modes["zoom"])},
                },
                "pages": results,
                "analyzer_callbacks": analysis,
                "max_main_callback_ms_first": round(worst_first, 1),
                "max_main_callback_ms_warm": round(worst, 1),
                "largest_payload_bytes": largest,
                "target_ms": TARGET_MS,
                "target_bytes": TARGET_BYTES,
                "meets_targets": worst_first < TARGET_MS and largest < TARGET_BYTES,
            }
        )
    )


if __name__ == "__main__":
    main()

"""Trace viewer benchmark: a 10 M-event run on the Timeline page in Debian's chromium (Playwright).

Measured in the browser by the viewer itself (`window.scprofTrace.stats`, ui/assets/trace_viewer.js):
- first view: navigation start -> the first frame with every visible track's tiles of the needed
  level painted, in a freshly started server (cold caches);
- frames: for each scripted input (wheel zooms in and out around the cursor, drags), the time from
  the input event's timestamp to the end of the requestAnimationFrame draw it caused; the inputs
  are sent one at a time, each once the previous one's frame is painted;
- exact after zoom: after a deep zoom (a window of a few hundred events per track), the time from
  the zoom until every visible track shows exact events.

Targets: first view <= 1.5 s, frame p95 <= 50 ms, exact events <= 500 ms after the zoom.

Usage: python benchmarks/timeline_browser.py [--events 10000000] [--db PATH] [--inputs 24]
(--db: reuse a store holding the run `ui-bench-a` of at least --events events, else it is built
there; benchmarks/ui_pages.py builds the same runs.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/ui/browserkit.py: the browser and the server of the browser tests
sys.path.insert(0, str(REPO / "benchmarks"))

from ui_pages import ensure_runs  # noqa: E402

from tests.ui.browserkit import launched_browser, run_ids, serve  # noqa: E402

TARGETS = {"first_view_ms": 1500, "frame_ms_p95": 50, "exact_after_zoom_ms": 500}
VIEWPORT = {"width": 1600, "height": 1000}
# One round of the scripted inputs: three wheel zooms in around the cursor, a drag right and one
# left (CSS px), a wheel zoom out; repeated until --inputs.
SCRIPT = [("wheel", -400.0)] * 3 + [("drag", 250.0), ("drag", -250.0), ("wheel", 400.0)]
DEEP_ZOOM = 50_000  # the deep zoom's window: the run's span over this


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, linear between the closest ranks."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def wait_frames(pg, before: int) -> None:
    """Wait until the viewer has recorded the frame of the input sent after `before` frames."""
    pg.wait_for_function("n => window.scprofTrace.stats.frames.length > n", arg=before, timeout=30_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--db", help="store to use (built when it lacks the run); default: a temporary one")
    ap.add_argument("--inputs", type=int, default=24, help="scripted wheel zooms and drags (at least 20)")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="scprof-tv-bench-")
    db = args.db or os.path.join(workdir, "ui-bench.duckdb")
    ensure_runs(db, args.events, workdir)
    load_start = os.getloadavg()[0]
    with launched_browser() as browser, serve(db) as (url, app):
        rid = run_ids(app)["ui-bench-a"]
        with app.scprof_access.open() as store:
            events = store.rows("SELECT events FROM runs WHERE run_id = ?", [rid])[0]["events"]
        context = browser.new_context(viewport=VIEWPORT)
        pg = context.new_page()
        errors: list[str] = []
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        t = time.perf_counter()
        pg.goto(f"{url}/timeline?run={rid}")
        pg.wait_for_function(
            "() => window.scprofTrace && window.scprofTrace.stats.first_view_ms != null", timeout=60_000
        )
        first_view_ms = pg.evaluate("window.scprofTrace.stats.first_view_ms")
        print(
            f"first view {first_view_ms:.0f} ms (goto -> ready {1e3 * (time.perf_counter() - t):.0f} ms)",
            file=sys.stderr,
        )
        box = pg.locator(".trace-viewer canvas").first.bounding_box()
        cx, cy = box["x"] + box["width"] * 0.6, box["y"] + min(box["height"] * 0.3, 300)
        pg.mouse.move(cx, cy)
        # The scripted inputs: zoom in step by step, pan both ways, zoom back out.
        script = [SCRIPT[i % len(SCRIPT)] for i in range(max(args.inputs, 20))]
        for kind, amount in script:
            before = pg.evaluate("window.scprofTrace.stats.frames.length")
            if kind == "wheel":
                pg.mouse.wheel(0, amount)
            else:
                pg.mouse.down()
                pg.mouse.move(cx + amount, cy, steps=1)
                pg.mouse.up()
                pg.mouse.move(cx, cy)
            wait_frames(pg, before)
            pg.wait_for_timeout(50)  # as a person's next input: not queued behind this one
        frames = pg.evaluate("window.scprofTrace.stats.frames")
        # A deep zoom: a window of ~1/50,000 of the run around the cursor, by wheel, then wait for exact tiles.
        before = pg.evaluate("window.scprofTrace.stats.frames.length")
        view = pg.evaluate("window.scprofTrace.view()")
        target_span = pg.evaluate("window.scprofTrace.runSpan()") / DEEP_ZOOM
        for _ in range(100):
            if view["t1"] - view["t0"] <= target_span:
                break
            pg.mouse.wheel(0, -800)
            wait_frames(pg, before)
            before = pg.evaluate("window.scprofTrace.stats.frames.length")
            view = pg.evaluate("window.scprofTrace.view()")
        pg.wait_for_function("() => window.scprofTrace.stats.exact_ms != null", timeout=30_000)
        exact_ms = pg.evaluate("window.scprofTrace.stats.exact_ms")
        context.close()
    p50, p95 = statistics.median(frames), percentile(frames, 0.95)
    out = {
        "benchmark": "timeline_browser",
        "events": events,
        "inputs": len(frames),
        "first_view_ms": round(first_view_ms, 1),
        "frame_ms_p50": round(p50, 1),
        "frame_ms_p95": round(p95, 1),
        "frame_ms_max": round(max(frames), 1),
        "exact_after_zoom_ms": round(exact_ms, 1),
        "targets": TARGETS,
        "meets_targets": first_view_ms <= TARGETS["first_view_ms"]
        and p95 <= TARGETS["frame_ms_p95"]
        and exact_ms <= TARGETS["exact_after_zoom_ms"],
        "browser_errors": errors[:5],
        "viewport": VIEWPORT,
        "cpus": os.cpu_count(),
        "load_avg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()

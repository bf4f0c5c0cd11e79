"""The Timeline page's canvas trace viewer (ui/assets/trace_*.js, docs/ui.md "Timeline") in headless
Chromium, checked against independent references: colours against ui/colors.op_color, area totals
and find counts against plain SQL over `slices`, flows against /api/trace/flows, deep links by
reloading. A failed run and a real XProf capture load without console or page errors. Screenshots of
each land in test-artifacts/screenshots/trace/ for people to look at.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from tests.ui.browserkit import run_ids, serve, settle, shot
from ui.colors import op_color

# Names whose colours JS and Python must agree on: ASCII, punctuation, non-ASCII, empty.
NAMES = [
    "sc_forward",
    "dense_backward",
    "jit_train_step",
    "all-reduce.1",
    "fusion.123",
    "step 3",
    "PjitFunction(train_step)",
    "naïve_op",
    "東京",
    "😀 emoji",
    "",
    "a" * 200,
]

READY = "() => window.scprofTrace && window.scprofTrace.ready"
IDLE = "() => window.scprofTrace && window.scprofTrace.idle()"


@pytest.fixture(scope="module")
def served(mixed_db):
    with serve(mixed_db) as (url, app):
        yield url, app, run_ids(app)


def sql(app, query: str, params: list) -> list[dict]:
    with app.scprof_access.open() as store:
        return store.rows(query, params)


def open_run(page, url: str, run: int, extra: str = "") -> None:
    page.goto(f"{url}/timeline?run={run}{extra}")
    page.wait_for_function(READY)
    settle(page)
    page.wait_for_function(IDLE)


def zoom(page, t0: int, t1: int) -> None:
    """Show [t0, t1) (as a deep link or a zoom would) and wait until every visible tile is drawn."""
    drawn = page.evaluate(
        "([a, b]) => { const n = window.scprofTrace.stats.drawn; window.scprofTrace.zoomTo(a, b); return n; }", [t0, t1]
    )
    page.wait_for_function(f"() => window.scprofTrace.stats.drawn > {drawn}")
    page.wait_for_function(IDLE)


def point(page, track: int, t: float, depth: int = 0) -> tuple[float, float]:
    """Canvas coordinates (CSS px) of time `t` on `track`'s nesting row `depth`."""
    return page.evaluate(
        "([tr, t, d]) => [window.scprofTrace.xOf(t), window.scprofTrace.trackY(tr, d)]", [track, t, depth]
    )


def page_xy(page, xy: tuple[float, float]) -> tuple[float, float]:
    box = page.locator(".tv-canvas").bounding_box()
    return box["x"] + xy[0], box["y"] + xy[1]


def widest_tc_op(app, run: int) -> dict:
    (ev,) = sql(
        app,
        """SELECT event_id, track_id, name, start_ps, dur_ps FROM slices
        WHERE run_id = ? AND line = 'XLA Ops' AND chip = 0 ORDER BY dur_ps DESC, event_id LIMIT 1""",
        [run],
    )
    return ev


def test_colours_stable_across_zooms_and_equal_to_python(served, page):
    url, app, ids = served
    run = ids["baseline"]
    open_run(page, url, run)
    assert page.evaluate("(names) => names.map(n => window.scprofTrace.colorOf(n))", NAMES) == [
        op_color(n) for n in NAMES
    ]
    ev = widest_tc_op(app, run)
    mid = ev["start_ps"] + ev["dur_ps"] / 2
    seen = []
    for span in (0.6, 3):  # two zoom levels around the same slice
        zoom(page, int(mid - span * ev["dur_ps"]), int(mid + span * ev["dur_ps"]))
        x, y = point(page, ev["track_id"], mid)
        y -= 6  # above the label's text, which may run through the middle
        seen.append(page.evaluate("([x, y]) => window.scprofTrace.colorAt(x, y)", [x, y]))
        shot(page, f"trace/01-colours-zoom-{span}")
    assert seen == [op_color(ev["name"])] * 2


def test_area_selection_totals_equal_sql(served, page):
    url, app, ids = served
    run = ids["baseline"]
    open_run(page, url, run)
    rows = page.evaluate("() => window.scprofTrace.rows().filter(r => r.kind === 'track' && r.vis)")
    first, last = rows[1], rows[5]
    x0, y0 = page_xy(page, (400, first["y"] + 4))
    x1, y1 = page_xy(page, (900, last["y"] + 4))
    page.keyboard.down("Shift")
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector(".tv-area-table tbody tr")
    res = page.evaluate("() => window.scprofTrace.area()")
    tracks = sorted(r["tid"] for r in rows[1:6])
    assert sorted(page.evaluate("() => window.scprofTrace.areaTracks()")) == tracks
    t0, t1 = res["t0"], res["t1"]
    ref = sql(
        app,
        f"""SELECT name, count(*) AS n, sum(least(start_ps + dur_ps, ?) - greatest(start_ps, ?)) AS total,
                max(least(start_ps + dur_ps, ?) - greatest(start_ps, ?)) AS mx
        FROM slices WHERE run_id = ? AND track_id IN ({",".join("?" * len(tracks))})
          AND start_ps < ? AND start_ps + dur_ps > ? GROUP BY name""",
        [t1, t0, t1, t0, run, *tracks, t1, t0],
    )
    assert ref, "the selection holds events"
    assert {r["name"]: (r["count"], r["total_ps"], r["max_ps"]) for r in res["rows"]} == {
        r["name"]: (r["n"], int(r["total"]), int(r["mx"])) for r in ref
    }
    whole = sum(int(r["total"]) for r in ref)
    assert sum(r["share"] for r in res["rows"]) == pytest.approx(1.0)
    assert res["rows"][0]["share"] == pytest.approx(max(int(r["total"]) for r in ref) / whole)
    shown = [tr.split("\t")[0].strip() for tr in page.inner_text(".tv-area-table tbody").split("\n") if tr.strip()]
    assert shown == [r["name"] for r in res["rows"]]
    shot(page, "trace/02-area-selection")


def test_find_counts_like_sql_and_steps_onto_matches(served, page):
    url, app, ids = served
    run = ids["baseline"]
    open_run(page, url, run)
    q = "Core_FORW"  # case-insensitive: sparse_core_forward
    (ref,) = sql(app, "SELECT count(*) AS n FROM slices WHERE run_id = ? AND contains(lower(name), lower(?))", [run, q])
    matches = sql(
        app,
        """SELECT event_id, start_ps, dur_ps FROM slices WHERE run_id = ?
        AND contains(lower(name), lower(?)) ORDER BY start_ps, event_id""",
        [run, q],
    )
    assert ref["n"] > 2
    page.fill(".tv-find", q)
    page.press(".tv-find", "Enter")
    page.wait_for_function("() => /^1 of /.test(document.querySelector('.tv-find-count').innerText)")
    assert page.inner_text(".tv-find-count") == f"1 of {ref['n']:,}"
    assert page.evaluate("() => window.scprofTrace.find().count") == ref["n"]
    for k in (0, 1):
        if k:
            page.press(".tv-find", "Enter")
            page.wait_for_function("() => /^2 of /.test(document.querySelector('.tv-find-count').innerText)")
        ids_found = page.evaluate("() => window.scprofTrace.find().ids")
        (m,) = [r for r in matches if r["event_id"] == ids_found[k]]
        v = page.evaluate("() => window.scprofTrace.view()")
        assert v["t0"] <= m["start_ps"] and m["start_ps"] + m["dur_ps"] <= v["t1"]
    assert sorted(page.evaluate("() => window.scprofTrace.find().ids")) == sorted(r["event_id"] for r in matches)
    page.wait_for_function("() => new URLSearchParams(location.search).get('find') === 'Core_FORW'")
    page.wait_for_function(IDLE)
    shot(page, "trace/03-find")


def test_flows_of_a_selected_sparsecore_forward_op_match_the_api(served, page):
    url, app, ids = served
    run = ids["baseline"]
    open_run(page, url, run)
    flows = page.evaluate(f"() => fetch('/api/trace/flows?run={run}&step=1').then(r => r.json())")["flows"]
    src = next(f["src"] for f in flows if f["kind"] == "sc_fwd->tc_fwd")
    (cat,) = sql(app, "SELECT category FROM slices WHERE run_id = ? AND event_id = ?", [run, src["id"]])
    assert cat["category"] == "sc_forward"
    zoom(page, src["start"] - 20 * src["dur"], src["start"] + 30 * src["dur"])
    x, y = page_xy(page, point(page, src["track"], src["start"] + src["dur"] / 2))
    page.mouse.click(x, y)
    page.wait_for_function(f"() => window.scprofTrace.selected() === {src['id']} && window.scprofTrace.flows().length")
    want = page.evaluate(f"() => fetch('/api/trace/flows?run={run}&event={src['id']}').then(r => r.json())")["flows"]
    assert page.evaluate("() => window.scprofTrace.flows()") == want and want
    page.wait_for_selector(".tv-details .tv-flow-note")
    details = page.inner_text(".tv-details")
    assert re.search(r"duration\s+[\d.]+ (ns|µs|ms)", details) and "flow" in details
    shot(page, "trace/04-flows")


def test_deep_link_restores_window_selection_and_find(served, page):
    url, app, ids = served
    run = ids["baseline"]
    ev = widest_tc_op(app, run)
    t0, t1 = ev["start_ps"] - ev["dur_ps"], ev["start_ps"] + 2 * ev["dur_ps"]
    link = f"&t0={t0}&t1={t1}&sel={ev['event_id']}&find=fusion&pinned={ev['track_id']}"
    for _ in range(2):  # the link, then a reload of the URL the viewer keeps up to date
        open_run(page, url, run, link)
        v = page.evaluate("() => window.scprofTrace.view()")
        assert (v["t0"], v["t1"]) == (t0, t1)
        assert page.evaluate("() => window.scprofTrace.selected()") == ev["event_id"]
        page.wait_for_selector(".tv-details-name")
        assert page.inner_text(".tv-details-name") == ev["name"]
        page.wait_for_function("() => window.scprofTrace.find().count !== undefined")
        assert page.evaluate("() => window.scprofTrace.rows().filter(r => r.pinned).map(r => r.tid)") == [
            ev["track_id"]
        ]
        page.wait_for_function("() => /[?&]sel=/.test(location.search)")
        state = parse_qs(urlparse(page.url).query)
        assert state["sel"] == [str(ev["event_id"])] and state["find"] == ["fusion"]
        assert (int(state["t0"][0]), int(state["t1"][0])) == (t0, t1)
        link = "&" + urlparse(page.url).query.split(f"run={run}&", 1)[-1]
    shot(page, "trace/05-deep-link")


def test_a_failed_run_shows_its_note_and_an_empty_state(served, page):
    url, app, ids = served
    page.goto(f"{url}/timeline?run={ids['spmem']}")
    page.wait_for_selector("#timeline-empty")
    settle(page)
    text = page.inner_text("#page")
    assert "This run failed" in text and "Nothing to draw" in text
    assert page.locator(".tv-canvas").count() == 0
    shot(page, "trace/06-failed-run")


@pytest.mark.parametrize("name", ["jax_cpu", "host_bound"])
def test_a_real_capture_draws_groups_and_nested_host_rows(served, page, name):
    url, app, ids = served
    run = ids[name]
    open_run(page, url, run)
    rows = page.evaluate("() => window.scprofTrace.rows()")
    groups = [r["gid"] for r in rows if r["kind"] == "group"]
    assert "host" in groups and len(groups) >= 2
    (train,) = sql(
        app,
        """SELECT track_id, start_ps, dur_ps FROM slices WHERE run_id = ? AND name = 'train'
        ORDER BY start_ps LIMIT 1""",
        [run],
    )[:1] or [None]
    if train is not None:  # `train` holds the step's host work one row further down
        zoom(page, train["start_ps"], train["start_ps"] + train["dur_ps"])
        deeper = page.evaluate(f"() => window.scprofTrace.rows().find(r => r.tid === {train['track_id']}).h")
        assert deeper > 2 * 18
    shot(page, f"trace/07-capture-{name}")


def test_a_findings_highlight_marks_the_affected_slices(served, page):
    """`hl` (a finding's "show in Timeline") marks the slices /api/trace/highlight names: here every
    SparseCore forward op of chip 0 in steps 1-2, against plain SQL over `slices`."""
    url, app, ids = served
    run = ids["baseline"]
    open_run(page, url, run, "&steps=1:3&hl=category:sc_forward;chip:0")
    page.wait_for_function("() => window.scprofTrace.marks().length > 0")
    v = page.evaluate("() => window.scprofTrace.view()")
    ref = sql(
        app,
        """SELECT event_id FROM slices WHERE run_id = ? AND category = 'sc_forward' AND chip = 0
        AND start_ps < ? AND start_ps + dur_ps > ?""",
        [run, round(v["t1"]), round(v["t0"])],
    )
    assert sorted(page.evaluate("() => window.scprofTrace.marks()")) == sorted(r["event_id"] for r in ref)
    assert "highlighted by the finding" in page.inner_text(".tv-find-count")
    shot(page, "trace/08-highlight")


# ---------------------------------------------------------------- the aggregated view of a big run

COLOURS_ON_ROW = """([y, x0, x1]) => {
    const c = window.scprofTrace.canvas, ctx = c.getContext("2d"), dpr = c.width / c.clientWidth;
    const d = ctx.getImageData(Math.round(x0 * dpr), Math.round(y * dpr), Math.round((x1 - x0) * dpr), 1).data;
    const n = {};
    for (let i = 0; i < d.length; i += 4) {
        const h = "#" + [d[i], d[i + 1], d[i + 2]].map(v => v.toString(16).padStart(2, "0")).join("");
        n[h] = (n[h] || 0) + 1;
    }
    return n;
}"""


@pytest.fixture(scope="module")
def big_served(tmp_path_factory):
    """A store of one synthetic run large enough that the whole-run view is aggregated."""
    from profiler.store import Store
    from profiler.synthetic import write_synthetic_trace
    from profiler.trace_to_store import ingest_trace

    d = tmp_path_factory.mktemp("trace-big")
    db, path = str(d / "big.duckdb"), str(d / "big.sctrace")
    write_synthetic_trace(path, 200_000, chips=2, run_name="big")
    with Store.open(db) as store:
        ingest_trace(store, path, name="big")
    with serve(db) as (url, app):
        yield url, app, run_ids(app)["big"]


def test_aggregated_columns_keep_op_identity_and_markers_stay_grey(big_served, page):
    """Whole run of 200 K events: tiles are aggregated, and a track's pixels are drawn in the colours
    (ui/colors.op_color) of the names its tile holds, several of them, not one heatmap colour; the
    step markers' track stays grey. Reference: the names in /api/trace/tile's answer."""
    url, app, run = big_served
    open_run(page, url, run)
    assert "aggregated" in page.inner_text(".trace-viewer")
    meta = page.evaluate(f"() => fetch('/api/trace/meta?run={run}').then(r => r.json())")
    level = page.evaluate("() => window.scprofTrace.view().level")
    rows = {r["tid"]: r for r in page.evaluate("() => window.scprofTrace.rows()") if r["kind"] == "track"}
    x0 = page.evaluate("() => window.scprofTrace.xOf(0)")
    x1 = page.evaluate(f"() => window.scprofTrace.xOf({meta['last_ps']})")
    checked = 0
    for t in meta["tracks"]:
        r = rows.get(t["id"])
        if r is None or not r["vis"]:
            continue
        names: set[str] = set()
        i = 0
        while (i << (level + 10)) < meta["last_ps"]:
            tile = page.evaluate(
                f"() => fetch('/api/trace/tile?run={run}&k={level}&i={i}&tracks={t['id']}').then(r => r.json())"
            )
            names |= set(tile["names"].values())
            i += 1
        # near the bottom of the first row: every bucket (its height its busy share) reaches down to it
        y = page.evaluate(f"() => window.scprofTrace.trackY({t['id']}, 0)") + 6
        seen = page.evaluate(COLOURS_ON_ROW, [y, x0 + 1, x1 - 1])
        allowed = {"#9e9e9e"} if t["steps"] else {op_color(n) for n in names}
        inked = {c: n for c, n in seen.items() if c not in ("#ffffff", "#fafafa")}
        ours = sum(n for c, n in inked.items() if c in allowed)
        assert ours >= 0.9 * sum(inked.values()), (t["label"], inked, allowed)  # the rest: edges, grid
        if not t["steps"] and len(names) > 1:
            assert sum(1 for c in inked if c in allowed) >= 2, (t["label"], inked)  # not one colour
        checked += 1
    assert checked >= 4
    shot(page, "trace/09-aggregated-200k")


def test_deep_axis_labels_count_from_a_base(served, page):
    """Deep in a long run the axis says "+500 µs" after a base ("29.205 s"), not "29205000 µs": each
    label plus the base is the tick's time (checked in Python)."""
    url, app, ids = served
    open_run(page, url, ids["baseline"])
    t0 = 29_205_000_000_000
    tk = page.evaluate(
        f"() => {{ const t = window.scprofTraceLib.ticks({t0}, {t0 + 2_920_000_000}, 1150, 110); return [t, t.base, t.baseLabel]; }}"
    )
    ticks, base, label = tk
    assert label == "29.205 s" and base == t0
    units = {"ps": 1, "ns": 1e3, "µs": 1e6, "ms": 1e9, "s": 1e12}
    for t, text in ticks:
        m = re.fullmatch(r"\+([0-9.]+) (ps|ns|µs|ms|s)", text)
        assert m, text
        assert abs(base + float(m.group(1)) * units[m.group(2)] - t) < 1e-6 * units[m.group(2)]
    near = page.evaluate("() => window.scprofTraceLib.ticks(0, 58.4e12, 1150, 110).map(t => t[1])")
    assert near[:3] == ["0 s", "10 s", "20 s"]  # near the origin: plain times


def test_keys_zoom_and_pan_and_the_measure_tool_reads_the_dragged_span(served, page):
    """W/S zoom by 0.8/1.25 around the cursor, A/D pan by 15% of the window (docs/ui.md's keys);
    the measure tool (key 3) reads the time between the two points dragged, from the canvas scale."""
    url, app, ids = served
    open_run(page, url, ids["baseline"])
    box = page.locator(".tv-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 120)

    def view() -> tuple[float, float]:
        v = page.evaluate("() => window.scprofTrace.view()")
        return v["t0"], v["t1"]

    def press(key: str) -> tuple[float, float]:
        n = page.evaluate("() => window.scprofTrace.stats.drawn")
        page.keyboard.press(key)
        page.wait_for_function(f"() => window.scprofTrace.stats.drawn > {n}")
        return view()

    t0, t1 = view()
    w = t1 - t0
    z0, z1 = press("w")
    assert z1 - z0 == pytest.approx(0.8 * w, rel=1e-9)
    s0, s1 = press("s")
    assert s1 - s0 == pytest.approx(w, rel=1e-9)
    d0, d1 = press("d")
    assert (d0 - s0, d1 - s1) == (pytest.approx(0.15 * w, rel=1e-6), pytest.approx(0.15 * w, rel=1e-6))
    a0, _ = press("a")
    assert a0 == pytest.approx(s0, rel=1e-9, abs=1)
    page.keyboard.press("3")
    ta, tb = a0 + 0.2 * w, a0 + 0.5 * w
    xa, xb = page.evaluate(f"() => [window.scprofTrace.xOf({ta}), window.scprofTrace.xOf({tb})]")
    y = box["y"] + 150
    page.mouse.move(box["x"] + xa, y)
    page.mouse.down()
    page.mouse.move(box["x"] + (xa + xb) / 2, y, steps=2)
    page.mouse.move(box["x"] + xb, y, steps=2)
    page.mouse.up()
    m = page.evaluate("() => window.scprofTrace.measure()")
    ps_per_px = w / page.evaluate(f"() => window.scprofTrace.xOf({a0 + w}) - window.scprofTrace.xOf({a0})")
    assert m and abs((m["t1"] - m["t0"]) - (tb - ta)) <= 2 * ps_per_px  # within a pixel at each end
    shot(page, "trace/10-measure")

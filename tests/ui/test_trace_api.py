"""The trace viewer's JSON API (ui/trace_api.py) against independent references: plain Python over
the rows of the store's `slices` and `step_markers` views, plain SQL, hand-computed values."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from profiler.store import Store
from tests.ui.trace_api_store import build_trace_api_store
from ui.app import create_app
from ui.colors import STEP_MARKER_COLOR, op_color
from ui.trace_derived import derived_steps

EXACT_LIMIT = 2000


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return build_trace_api_store(tmp_path_factory.mktemp("trace-api"))


@pytest.fixture(scope="module")
def client(db):
    return create_app(db).server.test_client()


@pytest.fixture(scope="module")
def runs(db) -> dict[str, int]:
    with Store.open(db, read_only=True) as store:
        return {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}


@pytest.fixture(scope="module")
def rows(db):
    """rows(run) -> (slices rows, step_markers rows) of a run, from the store's views; the markers include the
    viewer's derived `Steps` rows (ui/trace_derived.py, tested against references in test_trace_derived.py)."""
    cache = {}

    def get(run: int):
        if run not in cache:
            with Store.open(db, read_only=True) as store:
                d = derived_steps(store, run)
                derived = [
                    {"track_id": t, "step": s, "start_ps": a, "dur_ps": b}
                    for t, s, a, b in zip(
                        d.track.tolist(), d.step.tolist(), d.start_ps.tolist(), d.dur_ps.tolist(), strict=True
                    )
                ]
                cache[run] = (
                    store.rows("SELECT * FROM slices WHERE run_id = ?", [run]),
                    store.rows("SELECT * FROM step_markers WHERE run_id = ?", [run]) + derived,
                )
        return cache[run]

    return get


def get(client, url: str, status: int = 200) -> dict:
    r = client.get(url)
    assert r.status_code == status, r.get_data(as_text=True)
    assert r.mimetype == "application/json"
    return r.get_json()


def overlaps(r: dict, t0: int, t1: int) -> bool:
    """The API's overlap rule: starts before t1, and starts at or after t0 or ends after it."""
    return r["start_ps"] < t1 and (r["start_ps"] >= t0 or r["start_ps"] + r["dur_ps"] > t0)


def tile_url(run: int, k: int, i: int, tracks) -> str:
    return f"/api/trace/tile?run={run}&k={k}&i={i}&tracks={','.join(map(str, tracks))}"


# ---------------------------------------------------------------- op_color


def fnv1a(text: str) -> int:
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) % (1 << 32)
    return h


def test_op_color_hand_computed():
    # FNV-1a 32 of "" is the offset basis, of "a" 0xe40c292c (published test vectors)
    assert fnv1a("") == 2166136261 and fnv1a("a") == 0xE40C292C
    # "a": h = 3826002220 = 360 * 10627783 + 340, so hue 340; h >> 9 = 7472660 = 16 * 467041 + 4, so
    # s = 55 + 4 = 59; h >> 13 = 467041 = 16 * 29190 + 1, so l = 45 + 1 = 46.
    # HSL(340, 59%, 46%): c = (1 - |0.92 - 1|) * 0.59 = 0.5428; x = c * (1 - |(340/60 mod 2) - 1|)
    # = 0.5428 / 3 = 0.180933; m = 0.46 - 0.2714 = 0.1886; sextant 300-360: (c, 0, x) + m
    # = (0.7314, 0.1886, 0.369533) * 255 = (186.507, 48.093, 94.231) -> (187, 48, 94) = #bb305e
    h = fnv1a("a")
    assert (h % 360, (h >> 9) % 16, (h >> 13) % 16) == (340, 4, 1)
    assert op_color("a") == "#bb305e"
    # "": h = 2166136261 = 360 * 6017045 + 61; h >> 9 = 4230734 = 16 * 264420 + 14; h >> 13 = 264420
    # = 16 * 16526 + 4: HSL(61, 69%, 49%): c = 0.98 * 0.69 = 0.6762, x = c * (1 - 1/60) = 0.664930,
    # m = 0.49 - 0.3381 = 0.1519; sextant 60-120: (x, c, 0) + m = (0.81683, 0.8281, 0.1519) * 255
    # = (208.29, 211.17, 38.73) -> (208, 211, 39) = #d0d327
    h = fnv1a("")
    assert (h % 360, (h >> 9) % 16, (h >> 13) % 16) == (61, 14, 4)
    assert op_color("") == "#d0d327"
    assert STEP_MARKER_COLOR == "#9e9e9e"
    # stable, and differs by name; non-ASCII names hash their UTF-8 bytes
    assert op_color("fusion.1") == op_color("fusion.1") != op_color("fusion.2")
    assert op_color("µs") == op_color(b"\xc2\xb5s".decode("utf-8"))


# ---------------------------------------------------------------- meta


def test_meta_lists_tracks_in_groups(client, runs, db):
    run = runs["baseline"]
    m = get(client, f"/api/trace/meta?run={run}")
    assert m["run"] == run and m["name"] == "baseline" and m["status"] == "ok"
    assert m["bucket_count"] == 1024 and m["exact_limit"] == EXACT_LIMIT
    with Store.open(db, read_only=True) as store:
        want = store.rows(
            """SELECT t.track_id, t.chip, t.kind, (SELECT count(*) FROM events e WHERE e.run_id = t.run_id
                   AND e.track_id = t.track_id) AS ev, (SELECT count(*) FROM steps s WHERE s.run_id = t.run_id
                   AND s.track_id = t.track_id) AS mk
               FROM tracks t WHERE t.run_id = ? AND t.kind <> 'counter'""",
            [run],
        )
        extent = store.rows(
            """SELECT least((SELECT min(start_ps) FROM events WHERE run_id = $1),
                            (SELECT min(start_ps) FROM steps WHERE run_id = $1)) AS lo,
                      greatest((SELECT max(start_ps + dur_ps) FROM events WHERE run_id = $1),
                               (SELECT max(start_ps + dur_ps) FROM steps WHERE run_id = $1)) AS hi""",
            [run],
        )[0]
    nonempty = {r["track_id"]: r for r in want if r["ev"] + r["mk"] > 0}
    got = {t["id"]: t for t in m["tracks"]}
    assert set(got) == set(nonempty)  # every track with events or markers, no empty one
    for tid, t in got.items():
        assert t["n"] == nonempty[tid]["ev"] + nonempty[tid]["mk"]
        assert t["steps"] == (nonempty[tid]["mk"] > 0)
        assert t["group"] == ("host" if t["kind"] == "host" or t["chip"] < 0 else f"TPU:{t['chip']}")
    assert [g["id"] for g in m["groups"]] == ["TPU:0", "TPU:1", "TPU:2", "TPU:3", "host"]
    assert m["groups"][0]["label"] == "TPU:0 (chip 0)" and m["groups"][-1]["label"] == "Host"
    # groups partition the tracks, in the tracks' order
    assert [tid for g in m["groups"] for tid in g["tracks"]] == [t["id"] for t in m["tracks"]]
    assert (m["first_ps"], m["last_ps"]) == (extent["lo"], extent["hi"])
    assert 2 ** (m["max_level"] + 10) > m["last_ps"] >= 2 ** (m["max_level"] + 9)


def test_meta_of_failed_real_and_stepless_runs(client, runs):
    failed = get(client, f"/api/trace/meta?run={runs['spmem_overflow']}")
    assert failed["status"] == "failed" and len(failed["tracks"]) == 1 and failed["max_level"] == 0
    assert failed["groups"] == [{"id": "host", "label": "Host", "tracks": [failed["tracks"][0]["id"]]}]
    real = get(client, f"/api/trace/meta?run={runs['jax_cpu']}")
    assert {g["id"] for g in real["groups"]} == {"CPU", "host"}
    assert sum(t["n"] for t in real["tracks"]) > 0
    hand = get(client, f"/api/trace/meta?run={runs['handmade']}")
    assert [t["line"] for t in hand["tracks"]] == ["main", "other"] and not any(t["steps"] for t in hand["tracks"])


# ---------------------------------------------------------------- tiles


def check_exact(tile: dict, track: int, slices: list[dict], markers: list[dict]) -> int:
    """The tile's exact events of `track` equal the plain-Python overlap filter; returns how many."""
    t0, t1 = tile["t0"], tile["t1"]
    want = sorted(
        [(r["start_ps"], r["event_id"], r["dur_ps"], r["name"], None) for r in slices if r["track_id"] == track]
        + [(r["start_ps"], -1, r["dur_ps"], f"step {r['step']}", r["step"]) for r in markers if r["track_id"] == track],
    )
    want = [w for w in want if overlaps({"start_ps": w[0], "dur_ps": w[2]}, t0, t1)]
    got = tile["tracks"][str(track)]
    assert got["mode"] == "exact"
    ev = got["ev"]
    names = [tile["names"][str(n)] for n in ev["name"]]
    steps = ev.get("step", [None] * len(ev["id"]))
    have = sorted(zip(ev["start"], ev["id"], ev["dur"], names, steps, strict=True))
    assert have == want
    return len(want)


def test_exact_tiles_equal_a_python_filter(client, runs, rows):
    for name in ("baseline", "jax_cpu", "handmade", "spmem_overflow"):
        run = runs[name]
        m = get(client, f"/api/trace/meta?run={run}")
        tracks = [t["id"] for t in m["tracks"]]
        slices, markers = rows(run)
        seen = 0
        for k in sorted({m["max_level"], max(0, m["max_level"] - 3)}):
            for i in range(0, (m["last_ps"] >> (k + 10)) + 1):
                tile = get(client, tile_url(run, k, i, tracks))
                assert (tile["k"], tile["i"], tile["t0"], tile["t1"]) == (k, i, i << (k + 10), (i + 1) << (k + 10))
                assert set(tile["tracks"]) == {str(t) for t in tracks}
                seen += sum(check_exact(tile, t, slices, markers) for t in tracks)
        assert seen >= len(slices) + len(markers)  # every event and marker was in some tile
        for t in m["tracks"]:
            assert ("step" in tile["tracks"][str(t["id"])]["ev"]) == t["steps"]


def test_instant_event_of_a_failed_run_is_kept(client, runs, rows):
    run = runs["spmem_overflow"]
    m = get(client, f"/api/trace/meta?run={run}")
    (slice_,), _ = rows(run)
    assert slice_["dur_ps"] == 0
    tile = get(client, tile_url(run, 0, 0, [m["tracks"][0]["id"]]))
    assert tile["tracks"][str(slice_["track_id"])]["ev"]["id"] == [slice_["event_id"]]
    assert tile["names"][str(tile["tracks"][str(slice_["track_id"])]["ev"]["name"][0])] == slice_["name"]


def test_aggregated_tiles_equal_a_python_groupby(client, runs, rows):
    run = runs["synthetic"]
    m = get(client, f"/api/trace/meta?run={run}")
    tracks = [t["id"] for t in m["tracks"]]
    slices, markers = rows(run)
    agg_seen = exact_seen = 0
    for k in (m["max_level"], m["max_level"] - 2):
        bw = 1 << k
        for i in range((m["last_ps"] >> (k + 10)) + 1):
            tile = get(client, tile_url(run, k, i, tracks))
            t0, t1 = tile["t0"], tile["t1"]
            for track in tracks:
                got = tile["tracks"][str(track)]
                mine = [
                    (r["event_id"], r["start_ps"], r["dur_ps"], r["name"])
                    for r in slices
                    if r["track_id"] == track and overlaps(r, t0, t1)
                ] + [
                    (-1, r["start_ps"], r["dur_ps"], f"step {r['step']}")
                    for r in markers
                    if r["track_id"] == track and overlaps(r, t0, t1)
                ]
                if len(mine) <= EXACT_LIMIT:
                    exact_seen += 1
                    check_exact(tile, track, slices, markers)
                    continue
                agg_seen += 1
                assert got["mode"] == "agg"
                ev = got["ev"]
                whole = sorted((s, i_, d, tile["names"][str(n)]) for i_, s, d, n in zip(*ev.values(), strict=False))
                assert whole == sorted((s, i_, d, n) for i_, s, d, n in mine if d >= bw)
                per = defaultdict(lambda: [0, 0, defaultdict(int)])
                for _, s, d, n in mine:
                    if d < bw:
                        b = (max(s, t0) - t0) // bw
                        per[b][0] += 1
                        per[b][1] += d
                        per[b][2][n] += d
                bk = got["bk"]
                assert bk["b"] == sorted(per)
                assert bk["n"] == [per[b][0] for b in bk["b"]]
                assert bk["busy"] == [per[b][1] for b in bk["b"]]
                for b, name_id in zip(bk["b"], bk["name"], strict=True):
                    best = max(per[b][2].values())
                    winners = [n for n, v in per[b][2].items() if v == best]
                    # ties go to the smaller name id: among tied names the API picks one of them
                    assert tile["names"][str(name_id)] in winners
                    if len(winners) == 1:
                        assert tile["names"][str(name_id)] == winners[0]
    assert agg_seen > 0 and exact_seen > 0


def test_tile_cache_gives_the_same_answer(client, runs):
    run = runs["synthetic"]
    m = get(client, f"/api/trace/meta?run={run}")
    tracks = [t["id"] for t in m["tracks"]]
    first = get(client, tile_url(run, m["max_level"], 0, tracks))
    # a subset, then the whole set again (some tracks from the cache, some computed)
    part = get(client, tile_url(run, m["max_level"], 0, tracks[:1]))
    assert part["tracks"][str(tracks[0])] == first["tracks"][str(tracks[0])]
    assert get(client, tile_url(run, m["max_level"], 0, tracks)) == first


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("url", "status", "argument"),
    [
        ("/api/trace/meta?run=424242", 404, "run 424242"),
        ("/api/trace/meta", 400, "run"),
        ("/api/trace/meta?run=abc", 400, "run"),
        ("/api/trace/meta?run=1e3", 400, "run"),
        ("/api/trace/tile?run=1&k=x&i=0&tracks=1", 400, "k"),
        ("/api/trace/tile?run=1&k=63&i=0&tracks=1", 400, "k"),
        ("/api/trace/tile?run=1&k=3&i=-1&tracks=1", 400, "i"),
        ("/api/trace/tile?run=1&k=3&i=99999999999999999999999999&tracks=1", 400, "i"),
        ("/api/trace/tile?run=1&k=60&i=9&tracks=1", 400, "i"),
        ("/api/trace/tile?run=1&k=3&i=0", 400, "tracks"),
        ("/api/trace/tile?run=1&k=3&i=0&tracks=1,x", 400, "tracks"),
        ("/api/trace/tile?run=1&k=3&i=0&tracks=" + ",".join(map(str, range(257))), 400, "tracks"),
    ],
)
def test_bad_input_is_one_line_of_json(client, url, status, argument):
    r = client.get(url)
    assert r.status_code == status
    body = r.get_data(as_text=True)
    assert "Traceback" not in body and "\n" not in body.strip()
    error = json.loads(body)["error"]
    assert error.startswith(argument) and len(error) < 200


# ---------------------------------------------------------------- event, area, find, highlight


def test_event_details_with_units(client, runs, rows):
    run = runs["baseline"]
    slices, _ = rows(run)
    r = next(s for s in slices if s["bytes"] and s["table_name"])
    ev = get(client, f"/api/trace/event?run={run}&id={r['event_id']}")
    assert (ev["id"], ev["track"], ev["name"], ev["start_ps"], ev["dur_ps"]) == (
        r["event_id"],
        r["track_id"],
        r["name"],
        r["start_ps"],
        r["dur_ps"],
    )
    fields = dict(ev["fields"])
    assert fields["table"] == r["table_name"] and fields["step"] == str(r["step"])
    assert fields["bytes"].endswith(("B", "KiB", "MiB", "GiB"))  # bytes with a unit, not a raw count
    assert get(client, f"/api/trace/event?run={run}&id=987654321", 404)["error"].startswith("id")
    assert get(client, f"/api/trace/event?run={run}&id=-1", 400)["error"].startswith("id")


def area_reference(slices: list[dict], t0: int, t1: int, tracks=None) -> dict[str, tuple[int, int, int]]:
    """name -> (count, clipped total, clipped max), in plain Python."""
    out: dict[str, list[int]] = {}
    for r in slices:
        if (tracks is None or r["track_id"] in tracks) and overlaps(r, t0, t1):
            clipped = min(r["end_ps"], t1) - max(r["start_ps"], t0)
            o = out.setdefault(r["name"], [0, 0, 0])
            o[0] += 1
            o[1] += clipped
            o[2] = max(o[2], clipped)
    return {k: tuple(v) for k, v in out.items()}


def test_area_hand_computed(client, runs):
    run = runs["handmade"]
    main_track = get(client, f"/api/trace/meta?run={run}")["tracks"][0]["id"]
    a = get(client, f"/api/trace/area?run={run}&t0=60&t1=1500&tracks={main_track}")
    # main in [60, 1500): a%b [0,100) -> 40; a_b [100,150) -> 50; axb [200,500) -> 300; the instant
    # it's "q" at 600 -> 0; A%B [1000,2000) -> 500. Total 890.
    got = {r["name"]: (r["count"], r["total_ps"], r["max_ps"]) for r in a["rows"]}
    assert got == {
        "a%b": (1, 40, 40),
        "a_b": (1, 50, 50),
        "axb": (1, 300, 300),
        'it\'s "q"': (1, 0, 0),
        "A%B": (1, 500, 500),
    }
    assert a["total_ps"] == 890 and [r["name"] for r in a["rows"]][:3] == ["A%B", "axb", "a_b"]
    assert abs(sum(r["share"] for r in a["rows"]) - 1) < 1e-12
    assert next(r for r in a["rows"] if r["name"] == "A%B")["share"] == 500 / 890


def test_area_equals_sql_with_clipping(client, runs, rows, db):
    run = runs["baseline"]
    slices, _ = rows(run)
    m = get(client, f"/api/trace/meta?run={run}")
    t0, t1 = m["last_ps"] // 3, m["last_ps"] // 2
    tracks = [t["id"] for t in m["tracks"]][::2]
    with Store.open(db, read_only=True) as store:
        want = store.rows(
            """SELECT name, count(*) AS n, sum(least(end_ps, $3) - greatest(start_ps, $2)) AS total,
                      max(least(end_ps, $3) - greatest(start_ps, $2)) AS mx
               FROM slices WHERE run_id = $1 AND list_contains($4, track_id) AND start_ps < $3 AND end_ps > $2
               GROUP BY name""",
            [run, t0, t1, tracks],
        )
    url = f"/api/trace/area?run={run}&t0={t0}&t1={t1}&tracks={','.join(map(str, tracks))}"
    a = get(client, url)
    got = {r["name"]: (r["count"], r["total_ps"], r["max_ps"]) for r in a["rows"]}
    assert got == {w["name"]: (w["n"], w["total"], w["mx"]) for w in want}
    assert got == area_reference(slices, t0, t1, set(tracks))
    assert a["total_ps"] == sum(w["total"] for w in want)
    for r in a["rows"]:
        assert r["mean_ps"] == r["total_ps"] / r["count"] and r["share"] == r["total_ps"] / a["total_ps"]
    assert [r["total_ps"] for r in a["rows"]] == sorted((r["total_ps"] for r in a["rows"]), reverse=True)
    # every track when none are named
    whole = get(client, f"/api/trace/area?run={run}&t0={t0}&t1={t1}")
    assert {r["name"]: (r["count"], r["total_ps"], r["max_ps"]) for r in whole["rows"]} == area_reference(
        slices, t0, t1
    )


def matches_of(answer: dict) -> list[tuple]:
    ev = answer["ev"]
    names = [answer["names"][n] for n in ev["name"]]
    return list(zip(ev["start"], ev["id"], ev["track"], ev["dur"], names, strict=True))


def reference_matches(slices: list[dict], keep) -> list[tuple]:
    return sorted((r["start_ps"], r["event_id"], r["track_id"], r["dur_ps"], r["name"]) for r in slices if keep(r))


@pytest.mark.parametrize("q", ["%", "_", "A%", "a_B", '"', "'", "it's", "x", "ZZZ", "%%", "\\"])
def test_find_matches_literally(client, runs, rows, q):
    run = runs["handmade"]
    slices, _ = rows(run)
    from urllib.parse import quote

    f = get(client, f"/api/trace/find?run={run}&q={quote(q)}")
    want = reference_matches(slices, lambda r: q.lower() in r["name"].lower())
    assert f["q"] == q and f["count"] == len(want)
    assert matches_of(f) == want


def test_find_on_an_emulated_run_with_tracks_and_window(client, runs, rows):
    run = runs["baseline"]
    slices, _ = rows(run)
    m = get(client, f"/api/trace/meta?run={run}")
    tracks = {t["id"] for t in m["tracks"] if t["kind"] == "sparsecore"}
    t0, t1 = m["last_ps"] // 4, m["last_ps"] // 2
    url = f"/api/trace/find?run={run}&q=matmul&tracks={','.join(map(str, sorted(tracks)))}&t0={t0}&t1={t1}"
    f = get(client, url)
    want = reference_matches(
        slices, lambda r: "matmul" in r["name"].lower() and r["track_id"] in tracks and overlaps(r, t0, t1)
    )
    assert want and matches_of(f) == want and f["count"] == len(want)


def test_highlight_terms(client, runs, rows):
    run = runs["baseline"]
    slices, _ = rows(run)
    tables = sorted({r["table_name"] for r in slices if r["table_name"]})[:2]
    spec = ";".join(f"table:{t}" for t in tables) + ";chip:0;chip:2"
    h = get(client, f"/api/trace/highlight?run={run}&hl={spec}")
    want = reference_matches(slices, lambda r: r["table_name"] in tables and r["chip"] in (0, 2))
    assert want and matches_of(h) == want and h["count"] == len(want)
    m = get(client, f"/api/trace/meta?run={run}")
    t0, t1 = m["last_ps"] // 3, m["last_ps"] // 2
    h = get(client, f"/api/trace/highlight?run={run}&hl=category:sc_forward;chip:1&t0={t0}&t1={t1}")
    want = reference_matches(slices, lambda r: r["category"] == "sc_forward" and r["chip"] == 1 and overlaps(r, t0, t1))
    assert want and matches_of(h) == want
    name = slices[0]["name"]
    h = get(client, f"/api/trace/highlight?run={run}&hl=name:{name};track:{slices[0]['track_id']}")
    assert matches_of(h) == reference_matches(
        slices, lambda r: r["name"] == name and r["track_id"] == slices[0]["track_id"]
    )
    assert get(client, f"/api/trace/highlight?run={run}&hl=table:no-such-table")["count"] == 0
    for bad in ("foo:1", "chip:x", "nocolon", "", "table:t;" * 65):
        assert get(client, f"/api/trace/highlight?run={run}&hl={bad}", 400)["error"].startswith("hl")


def test_find_bad_input(client, runs):
    run = runs["handmade"]
    assert get(client, f"/api/trace/find?run={run}&q=", 400)["error"].startswith("q")
    assert get(client, f"/api/trace/find?run={run}&q={'x' * 201}", 400)["error"].startswith("q")
    assert get(client, f"/api/trace/area?run={run}&t0=5&t1=5", 400)["error"].startswith("t1")
    assert get(client, f"/api/trace/area?run={run}&t0=5", 400)["error"].startswith("t1")
    assert get(client, f"/api/trace/area?run={run}&t0=0&t1=9&tracks=a", 400)["error"].startswith("tracks")


# ---------------------------------------------------------------- flows


def test_flows_equal_the_perfetto_export(client, runs, rows, db, tmp_path):
    from exporters.perfetto import write_trace
    from exporters.perfetto.validate import read_trace

    run = runs["baseline"]
    slices, markers = rows(run)
    by_id = {r["event_id"]: r for r in slices}
    out = str(tmp_path / "baseline.pftrace")
    with Store.open(db, read_only=True) as store:
        write_trace(store, run, out, None)
    rb = read_trace(out)
    ends: dict[int, list] = {}
    for s in rb.slices:
        for f in s.flow_out:
            ends.setdefault(f, [None, None])[0] = s
        for f in s.flow_in:
            ends.setdefault(f, [None, None])[1] = s
    exported = {(src.ts, src.name, dst.ts, dst.name) for src, dst in ends.values()}
    api, host = set(), set()
    for step in sorted({m["step"] for m in markers}):
        for f in get(client, f"/api/trace/flows?run={run}&step={step}")["flows"]:
            src, dst = by_id[f["src"]["id"]], by_id[f["dst"]["id"]]
            assert (f["src"]["track"], f["src"]["start"], f["src"]["dur"]) == (
                src["track_id"],
                src["start_ps"],
                src["dur_ps"],
            )
            if f["kind"] == "host->device":
                host.add((step, src["chip"], src["event_id"], dst["event_id"]))
            else:
                assert f["kind"] in ("sc_fwd->tc_fwd", "tc_bwd->sc_bwd")
                api.add((src["start_ps"] // 1000, src["name"], dst["start_ps"] // 1000, dst["name"]))
    assert exported and api == exported
    # host -> device, in plain Python: per step and chip, the last-starting "Host to HBM" transfer
    # of the step -> the first SparseCore op of the step on the chip
    want = set()
    for step in {r["step"] for r in slices if r["step"] is not None}:
        for chip in {r["chip"] for r in slices if r["chip"] >= 0}:
            xfers = [
                r
                for r in slices
                if r["step"] == step
                and r["chip"] == chip
                and r["track_kind"] == "host"
                and r["line"].startswith("Host to HBM")
            ]
            ops = [
                r
                for r in slices
                if r["step"] == step
                and r["chip"] == chip
                and r["track_kind"] in ("sparsecore", "sc_tile")
                and r["line"] == "Sparse Core Ops"
            ]
            if xfers and ops:
                src = max(xfers, key=lambda r: (r["start_ps"], -r["event_id"]))
                dst = min(ops, key=lambda r: (r["start_ps"], r["event_id"]))
                want.add((step, chip, src["event_id"], dst["event_id"]))
    assert want and host == want
    # flows of one event: those of its step that start or end at it
    step, chip, src_id, dst_id = sorted(want)[0]
    one = get(client, f"/api/trace/flows?run={run}&event={dst_id}")["flows"]
    assert {(f["src"]["id"], f["dst"]["id"]) for f in one} >= {(src_id, dst_id)}
    assert all(dst_id in (f["src"]["id"], f["dst"]["id"]) for f in one)


def test_flows_on_runs_without_them(client, runs):
    assert get(client, f"/api/trace/flows?run={runs['jax_cpu']}&step=1")["flows"] == []
    assert get(client, f"/api/trace/flows?run={runs['handmade']}&event=0")["flows"] == []  # no step
    assert get(client, f"/api/trace/flows?run={runs['handmade']}", 400)["error"].startswith("event")
    assert get(client, f"/api/trace/flows?run={runs['handmade']}&event=99", 404)["error"].startswith("event")


# ---------------------------------------------------------------- a finding's highlight


def test_finding_link_carries_a_highlight_the_api_answers(client, runs, rows):
    from urllib.parse import parse_qs, urlparse

    from analyzers.findings import Finding
    from ui.render import finding_hl, finding_link

    def finding(rule: str, **entities) -> Finding:
        return Finding(
            rule=rule,
            severity="info",
            title="t",
            metric="m",
            value=1.0,
            unit="",
            confidence="high",
            recommendation="r",
            entities=entities,
        )

    run = runs["baseline"]
    slices, _ = rows(run)
    low = finding("low_overlap", chips=[1, 3], steps=[0, 1])
    label, link = finding_link(low, run)
    q = parse_qs(urlparse(link).query)
    assert label == "Timeline" and q["hl"] == ["chip:1;chip:3"] and q["steps"] == ["0:2"]
    h = get(client, f"/api/trace/highlight?run={run}&hl={q['hl'][0]}")
    assert h["count"] == sum(1 for r in slices if r["chip"] in (1, 3))
    # a rule about one category: its events; a host category drops the chips (host events have none)
    host = finding("host_bound", chips=[0, 1, 2, 3], steps=[1])
    assert finding_hl(host) == "category:host_preprocess"
    h = get(client, f"/api/trace/highlight?run={run}&hl={finding_hl(host)}")
    want = reference_matches(slices, lambda r: r["category"] == "host_preprocess")
    assert want and matches_of(h) == want
    assert finding_hl(finding("x", tables=["t1", "t2"], chips=[0], categories=["sc_forward"])) == (
        "table:t1;table:t2;chip:0;category:sc_forward"
    )
    assert finding_hl(finding("not_pipelined", steps=[1])) is None  # nothing to highlight: no hl=
    assert "hl=" not in finding_link(finding("not_pipelined", steps=[1]), run)[1]


def test_finding_link_picks_the_page_by_whole_words():
    """'idle' is no 'id' and 'stacked' no 'stack': the page follows the rule's and metric's words."""
    from analyzers.findings import Finding
    from ui.render import finding_link

    def page(rule: str, metric: str, **entities) -> str:
        f = Finding(
            rule=rule,
            severity="info",
            title="t",
            metric=metric,
            value=1.0,
            unit="",
            confidence="high",
            recommendation="r",
            entities=entities,
        )
        return finding_link(f, 1)[0]

    assert page("low_overlap", "tc_idle_share") == "Timeline"
    assert page("idle_gaps", "idle_share") == "Timeline"
    assert page("id_dropping", "dropped_ids") == "SparseCore"
    assert page("sc_load_skew", "max_over_mean") == "SparseCore"
    assert page("hbm_stack_pressure", "stack_bytes") == "Memory"
    assert page("too_many_stacked_tables", "tables_per_stack", tables=["t1"]) == "SparseCore"  # not "stack"


def pyramid_against_events(store: Store, run: int) -> tuple[int, int]:
    """Every tile of `run` at or above its tile_sums level, from the pyramid and from the events
    (the SQL the other tests check against plain Python), asserted equal: (aggregated tiles seen,
    short slices crossing the start of an aggregated tile)."""
    import dataclasses

    from ui.trace_api import compute_tiles, run_facts

    facts = run_facts(store, run)
    raw = dataclasses.replace(facts, tile_level=None)
    tracks = sorted(facts.track_ids)
    assert facts.tile_level is not None
    agg = crossing = 0
    for k in range(facts.tile_level, max(facts.tile_level, facts.last_ps.bit_length() - 10) + 1):
        for i in range((facts.last_ps >> (k + 10)) + 1):
            got, want = compute_tiles(store, facts, k, i, tracks), compute_tiles(store, raw, k, i, tracks)
            for t in tracks:
                assert got[t].pop("_names").tolist() == want[t].pop("_names").tolist(), (run, k, i, t)
            assert got == want, (run, k, i)
            t0 = i << (k + 10)
            for t in (t for t in tracks if got[t]["mode"] == "agg"):
                agg += 1
                crossing += store.rows(
                    "SELECT count(*) AS n FROM (SELECT track_id, start_ps, dur_ps FROM events WHERE run_id = $1 "
                    "UNION ALL SELECT track_id, start_ps, dur_ps FROM steps WHERE run_id = $1) "
                    "WHERE track_id = $2 AND start_ps < $3 AND start_ps + dur_ps > $3 AND dur_ps < $4",
                    [run, t, t0, 1 << k],
                )[0]["n"]
    return agg, crossing


def test_tiles_from_the_pyramid_equal_tiles_from_the_events(db, runs):
    with Store.open(db, read_only=True) as store:
        seen = [pyramid_against_events(store, run) for run in runs.values()]
    assert sum(a for a, _ in seen) > 0


def test_pyramid_tiles_with_slices_and_markers_crossing_tile_starts(tmp_path):
    """A dense run whose short slices and step markers cross every tile start, in aggregated tiles."""
    import numpy as np

    from profiler.recorder import Recorder
    from profiler.trace_to_store import ingest_trace

    n = 40_000
    path, db = str(tmp_path / "dense.sctrace"), str(tmp_path / "dense.duckdb")
    with Recorder(path, run_name="dense", run_id="uuid-dense", start_time_unix_ns=0) as rec:
        track = rec.track("/device:TPU:0", "XLA Ops", "tensorcore", chip=0, core=0)
        rec.emit(
            track=[track] * n,
            name=[f"op{j % 3}" for j in range(n)],
            start_ps=(np.arange(n) * 100 + 7).tolist(),
            dur_ps=[150 + 40 * (j % 3) for j in range(n)],
        )
        starts = [(j << 18) - 100 for j in range(1, 16)]  # across level 8's tile starts (2^18 ps)
        rec.steps(track=[track] * len(starts), step=list(range(len(starts))), start_ps=starts, dur_ps=[200] * 15)
    with Store.open(db) as store:
        ingest_trace(store, path)
    with Store.open(db, read_only=True) as store:
        agg, crossing = pyramid_against_events(store, 1)
    assert agg > 10 and crossing > 10

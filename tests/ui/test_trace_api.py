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
    """rows(run) -> (slices rows, step_markers rows) of a run, from the store's views."""
    cache = {}

    def get(run: int):
        if run not in cache:
            with Store.open(db, read_only=True) as store:
                cache[run] = (
                    store.rows("SELECT * FROM slices WHERE run_id = ?", [run]),
                    store.rows("SELECT * FROM step_markers WHERE run_id = ?", [run]),
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

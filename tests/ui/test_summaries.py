"""The ingest-time summaries (profiler/summaries.py) against plain Python over the events, and the
UI's figures built from them (track counts, SparseCore and minibatch fallbacks) against the same
figures from the events."""

from __future__ import annotations

from collections import defaultdict

import duckdb
import numpy as np
import pytest

from profiler import sqltree
from profiler.recorder import Recorder
from profiler.schema import SCHEMA_VERSION, SUMMARY_TABLES
from profiler.store import Store
from profiler.summaries import TIMELINE_BINS
from profiler.trace_to_store import ingest_trace
from ui import data
from ui.app import create_app
from ui.store_access import StoreAccess, migrate_if_old
from ui.trace_api import run_tracks

SPAN_PS = 1_000_000_000
CATEGORIES = [None, "sc_forward", "sc_backward", "tc_forward"]
TABLES = ["table_a", "table_b", "table_c"]
BIN_PS = -(-1_600_000_000 // TIMELINE_BINS)


def maybe(rng: np.random.Generator, values: np.ndarray, p_none: float = 0.2) -> list:
    return [None if rng.random() < p_none else int(v) for v in values]


def write_mixed_trace(path: str, n: int = 4000, seed: int = 0) -> None:
    """Events of every shape: instants, short, bin-straddling and long ones; NULLs in every
    optional column; host, TensorCore, SparseCore and tile tracks; step markers."""
    rng = np.random.default_rng(seed)
    with Recorder(path, run_name=f"mixed-{seed}", run_id=f"uuid-mixed-{seed}", start_time_unix_ns=0) as rec:
        tracks = [
            rec.track("/host:CPU", "Host ops", "host", chip=-1),
            rec.track("/device:TPU:0", "XLA Ops", "tensorcore", chip=0, core=0),
            rec.track("/device:TPU:1", "XLA Ops", "tensorcore", chip=1, core=0),
            rec.track("/device:TPU:0 SparseCore 0", "Sparse Core Ops", "sparsecore", chip=0, core=0),
            rec.track("/device:TPU:0 SparseCore 1", "Sparse Core Ops", "sparsecore", chip=0, core=1),
            rec.track("/device:TPU:1 SparseCore 0", "Sparse Core Ops", "sparsecore", chip=1, core=0),
            rec.track("/device:TPU:1 SparseCore 0", "Tile 3", "sc_tile", chip=1, core=0, tile=3),
        ]
        kind = rng.integers(0, 4, n)
        dur = np.choose(
            kind,
            [
                np.zeros(n, np.int64),
                rng.integers(1, 20_000, n),
                rng.integers(20_000, 10_000_000, n),
                rng.integers(50_000_000, 300_000_000, n),
            ],
        )
        rec.emit(
            track=[tracks[i] for i in rng.integers(0, len(tracks), n)],
            name=[f"op{i}" for i in rng.integers(0, 5, n)],
            start_ps=rng.integers(1_000, SPAN_PS, n),
            dur_ps=dur,
            step=maybe(rng, rng.integers(0, 10, n), 0.1),
            category=[CATEGORIES[i] or "" for i in rng.integers(0, len(CATEGORIES), n)],
            table=[TABLES[i] if i < len(TABLES) else "" for i in rng.integers(0, len(TABLES) + 1, n)],
            sc=maybe(rng, rng.integers(0, 2, n)),
            minibatch=maybe(rng, rng.integers(0, 4, n), 0.5),
            ids=maybe(rng, rng.integers(1, 5000, n)),
            unique_ids=maybe(rng, rng.integers(1, 3000, n)),
            dropped_ids=maybe(rng, rng.integers(0, 50, n), 0.7),
        )
        # One event spanning the run fixes the span's width (1.6e9 / 16384, rounded up: BIN_PS), and
        # with it tile_sums' level; events of about that width, and instants at the origin.
        rec.emit(
            track=[tracks[0]] * 5,
            name=["run"] + ["edge"] * 4,
            start_ps=[0, 5_000, 123_456_789, 700_000_000, 9_000],
            dur_ps=[1_600_000_000, BIN_PS, BIN_PS, BIN_PS - 1, BIN_PS - 1],
        )
        for chip in (0, 1):
            steps_track = rec.track(f"/device:TPU:{chip}", "Steps", "tensorcore", chip=chip, core=0)
            rec.steps(
                track=[steps_track] * 10,
                step=list(range(10)),
                start_ps=[s * 100_000_000 for s in range(10)],
                dur_ps=[100_000_000 - 1_000 * chip] * 10,
            )
        rec.steps(track=[tracks[0]] * 3, step=[0, 1, 2], start_ps=[10, 500, 900], dur_ps=[0, 30, 100])


@pytest.fixture(scope="module")
def mixed_db(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("mixed")
    db = str(d / "mixed.duckdb")
    with Store.open(db) as store:
        for seed in (0, 1):
            path = str(d / f"mixed{seed}.sctrace")
            write_mixed_trace(path, seed=seed)
            ingest_trace(store, path)
    return db


@pytest.fixture
def mixed(mixed_db):
    with Store.open(mixed_db, read_only=True) as store:
        yield store


def reference_summaries(store: Store, run: int) -> dict:
    """Every summary of a run, computed in plain Python from the events, markers, tracks and strings."""
    strings = {
        r["string_id"]: r["value"] for r in store.rows("SELECT string_id, value FROM strings WHERE run_id = ?", [run])
    }
    tracks = {r["track_id"]: r for r in store.rows("SELECT * FROM tracks WHERE run_id = ?", [run])}
    events = store.rows("SELECT * FROM events WHERE run_id = ?", [run])
    markers = store.rows("SELECT track_id, start_ps, dur_ps FROM steps WHERE run_id = ?", [run])
    timeline = [(e["track_id"], e["start_ps"], e["dur_ps"]) for e in events] + [
        (m["track_id"], m["start_ps"], m["dur_ps"]) for m in markers
    ]
    origin = min(s for _, s, _ in timeline)
    span = max(s + d for _, s, d in timeline) - origin
    bin_ps = max(1, -(-span // TIMELINE_BINS))
    cells: dict = {}
    totals: dict = {}
    extents: dict = {}
    for e in events:
        if e["step"] is not None:
            k = (tracks[e["track_id"]]["chip"], e["step"])
            lo, hi = extents.get(k, (e["start_ps"], e["start_ps"] + e["dur_ps"]))
            extents[k] = (min(lo, e["start_ps"]), max(hi, e["start_ps"] + e["dur_ps"]))
        cat = strings.get(e["category_id"]) if e["category_id"] is not None else None
        t = tracks[e["track_id"]]
        if (
            e["step"] is not None
            and e["ids"] is not None
            and e["sc"] is not None
            and cat in (None, "sc_forward")
            and t["chip"] >= 0
            and t["kind"] in ("sparsecore", "sc_tile")
        ):
            c = cells.setdefault((e["step"], t["chip"], e["sc"]), [0, None, None, None])
            c[0] += e["ids"]
            c[1] = add(c[1], e["unique_ids"])
            c[2] = top(c[2], e["minibatch"])
            c[3] = add(c[3], e["dropped_ids"])
        if e["step"] is not None and (e["minibatch"] is not None or e["dropped_ids"] is not None):
            tot = totals.setdefault(e["step"], [None, None])
            tot[0] = top(tot[0], e["minibatch"])
            tot[1] = add(tot[1], e["dropped_ids"])
    level = max(0, (origin + bin_ps * TIMELINE_BINS).bit_length() - 16)  # [0, end) in at most 2^16 buckets
    tiles: dict = defaultdict(lambda: [0, 0])
    for e in events:
        cell = tiles[(e["track_id"], e["start_ps"] >> level, e["name_id"], None, max(level, e["dur_ps"].bit_length()))]
        cell[0] += 1
        cell[1] += e["dur_ps"]
    for m in store.rows("SELECT track_id, step, start_ps, dur_ps FROM steps WHERE run_id = ?", [run]):
        cell = tiles[(m["track_id"], m["start_ps"] >> level, None, m["step"], max(level, m["dur_ps"].bit_length()))]
        cell[0] += 1
        cell[1] += m["dur_ps"]
    return {
        "tiles": (level, {k: tuple(v) for k, v in tiles.items()}),
        "run": {
            "timeline_origin_ps": origin,
            "timeline_bin_ps": bin_ps,
            "max_event_dur_ps": max((e["dur_ps"] for e in events), default=0),
            "event_tables": sorted({strings[e["table_id"]] for e in events if e["table_id"] is not None}),
        },
        "cells": {k: (v[0], v[1], None if v[2] is None else v[2] + 1, v[3]) for k, v in cells.items()},
        "totals": {k: (None if v[0] is None else v[0] + 1, v[1]) for k, v in totals.items()},
        "extents": extents,
    }


def add(a: int | None, b: int | None) -> int | None:
    return a if b is None else (b if a is None else a + b)


def top(a: int | None, b: int | None) -> int | None:
    return a if b is None else (b if a is None else max(a, b))


def stored_summaries(store: Store, run: int) -> dict:
    r = store.rows("SELECT * FROM run_summaries WHERE run_id = ?", [run])[0]
    tiles = store.rows("SELECT * FROM tile_sums WHERE run_id = ?", [run])
    return {
        "tiles": (
            min(x["level"] for x in tiles),
            {
                (x["track_id"], x["bucket"], x["name_id"], x["step"], x["dur_class"]): (x["events"], x["busy_ps"])
                for x in tiles
            },
        ),
        "run": {k: r[k] for k in ("timeline_origin_ps", "timeline_bin_ps", "max_event_dur_ps", "event_tables")},
        "cells": {
            (x["step"], x["chip"], x["sc"]): (x["ids"], x["unique_ids"], x["minibatches"], x["dropped_ids"])
            for x in store.rows("SELECT * FROM sc_step_cells WHERE run_id = ?", [run])
        },
        "totals": {
            x["step"]: (x["minibatches"], x["dropped_ids"])
            for x in store.rows("SELECT * FROM sc_step_totals WHERE run_id = ?", [run])
        },
        "extents": {
            (x["chip"], x["step"]): (x["start_ps"], x["end_ps"])
            for x in store.rows("SELECT * FROM step_event_extents WHERE run_id = ?", [run])
        },
    }


def test_summaries_equal_plain_python_over_the_events(mixed):
    for run in (1, 2):
        ref, got = reference_summaries(mixed, run), stored_summaries(mixed, run)
        assert len(ref["tiles"][1]) > 1000 and ref["cells"] and ref["totals"]  # all shapes
        assert {chip for chip, _ in ref["extents"]} == {-1, 0, 1}
        assert ref["run"]["timeline_bin_ps"] == BIN_PS
        assert len({k[4] for k in ref["tiles"][1]}) > 10  # many duration classes
        assert got == ref


def test_tile_sums_duration_classes_are_exact_near_powers_of_two(tmp_path):
    # log2 of a BIGINT goes through a DOUBLE, which rounds 2^k - 1 up to 2^k for k > 53: the
    # class (the smallest c with dur < 2^c, Python's bit_length) must not follow it
    # (their sum stays within int64, as ingest requires: up to 2^60, 2^61 only less one)
    near = {k: (-1, 0, 1) if k < 50 else (-1, 0) if k < 60 else (-1,) for k in range(62)}
    durs = sorted({max(0, (1 << k) + d) for k, ds in near.items() for d in ds})
    path, db = str(tmp_path / "pow2.sctrace"), str(tmp_path / "pow2.duckdb")
    with Recorder(path, run_name="pow2", run_id="uuid-pow2", start_time_unix_ns=0) as rec:
        track = rec.track("/host:CPU", "Host ops", "host", chip=-1)
        rec.emit(track=[track] * len(durs), name=["op"] * len(durs), start_ps=[0] * len(durs), dur_ps=durs)
    with Store.open(db) as store:
        ingest_trace(store, path)
        ref, got = reference_summaries(store, 1)["tiles"], stored_summaries(store, 1)["tiles"]
    assert ref[0] == 46 and {k[4] for k in ref[1]} == set(range(46, 62))
    assert got == ref


def test_summaries_of_recorded_runs(ro_store):
    for (run,) in ro_store.con.execute("SELECT run_id FROM runs").fetchall():
        assert stored_summaries(ro_store, run) == reference_summaries(ro_store, run)


def test_track_counts_use_the_summary(mixed, mixed_db):
    """The viewer's tracks and their counts (ui.timeline.timeline_tracks over tile_sums, served by
    /api/trace/meta) count every event and step marker once."""
    app = create_app(mixed_db)
    client = app.server.test_client()
    for run in (1, 2):
        n = {
            r["track_id"]: r["n"]
            for r in mixed.rows(
                "SELECT track_id, count(*) AS n FROM (SELECT track_id FROM events WHERE run_id = ? "
                "UNION ALL SELECT track_id FROM steps WHERE run_id = ?) GROUP BY track_id",
                [run, run],
            )
        }
        assert {t.track_id: t.n for t in run_tracks(mixed, run)} == n
        meta = client.get(f"/api/trace/meta?run={run}").get_json()
        assert {t["id"]: t["n"] for t in meta["tracks"]} == n
    app.scprof_access.close()


def test_sparsecore_and_minibatch_fallbacks_equal_the_event_queries(mixed):
    # The queries the UI ran on the events before the summaries existed, kept as the reference;
    # minibatches per step over the counted steps (the run's steps 0..9: not its first and last),
    # dropped IDs over every step in range.
    event_minibatches = """
    SELECT avg(mb) FILTER (WHERE step BETWEEN 1 AND 8)::DOUBLE AS minibatches_per_step,
           max(mb) FILTER (WHERE step BETWEEN 1 AND 8) AS max_minibatches, sum(dropped)::DOUBLE AS dropped_ids
    FROM (SELECT step, max(minibatch) + 1 AS mb, sum(dropped_ids) AS dropped
          FROM events WHERE run_id = $run AND step BETWEEN $step_lo AND $step_hi
            AND (minibatch IS NOT NULL OR dropped_ids IS NOT NULL)
          GROUP BY step)"""
    forward = mixed.rows("SELECT string_id FROM strings WHERE run_id = 1 AND value = 'sc_forward'")[0]["string_id"]
    for lo, hi, sb in ((0, 9, 1), (2, 7, 3), (5, 5, 1)):
        kw = dict(run=1, step_lo=lo, step_hi=hi)
        got = sqltree.query(mixed.con, "ui.overview.step_minibatches", **kw).to_pylist()[0]
        assert {k: got[k] for k in ("minibatches_per_step", "max_minibatches", "dropped_ids")} == (
            mixed.query(event_minibatches, kw).to_pylist()[0]
        )
        fast = sqltree.query(mixed.con, "ui.sparsecore.sc_cells_from_summary", sb=sb, **kw).to_pylist()
        assert (
            fast
            and fast
            == sqltree.query(
                mixed.con, "ui.sparsecore.sc_cells_from_events", sb=sb, table_ids=[], forward_id=forward, **kw
            ).to_pylist()
        )
    tables, from_stats = data.sc_tables(mixed, 1)
    assert tables == TABLES and not from_stats
    assert not data.sparsecore(mixed, 1, (0, 9), [])["empty"]


def make_version_1(db: str) -> None:
    """Turn a current store into what schema version 1 was: no summary tables."""
    with duckdb.connect(db) as con:
        for t in SUMMARY_TABLES:
            con.execute(f"DROP TABLE {t.name}")
        con.execute("UPDATE scprof_meta SET value = '1' WHERE key = 'schema_version'")


def test_ui_migrates_a_version_1_store_once(tmp_path, mixed_db):
    import shutil

    db = str(tmp_path / "old.duckdb")
    shutil.copy(mixed_db, db)
    make_version_1(db)
    with pytest.raises(Exception, match="migrate"):
        Store.open(db, read_only=True)
    access = StoreAccess(db)
    with access.open() as store:
        assert store.schema_version() == SCHEMA_VERSION
        for run in (1, 2):
            assert stored_summaries(store, run) == reference_summaries(store, run)
    access.close()
    assert not migrate_if_old(db)  # current now


def test_the_largest_minibatch_index_is_ingested_and_capped(tmp_path):
    # minibatch is int32 in the trace: index 2**31 - 1 gives 2**31 minibatches, capped at 2**31 - 1
    # in the INTEGER summaries (the addition overflowed INT32 and failed the ingest)
    path, db = str(tmp_path / "big.sctrace"), str(tmp_path / "big.duckdb")
    with Recorder(path, run_name="big", run_id="uuid-big", start_time_unix_ns=0) as rec:
        sc = rec.track("/device:TPU:0 SparseCore 0", "Sparse Core Ops", "sparsecore", chip=0, core=0)
        rec.emit(track=[sc], name=["op"], start_ps=[0], dur_ps=[10], step=[0], sc=[0], minibatch=[2**31 - 1], ids=[5])
    with Store.open(db) as store:
        ingest_trace(store, path)
        assert store.rows("SELECT minibatches FROM sc_step_totals") == [{"minibatches": 2**31 - 1}]
        assert store.rows("SELECT minibatches FROM sc_step_cells") == [{"minibatches": 2**31 - 1}]
        kw = dict(run=1, step_lo=0, step_hi=0, sb=1)
        assert (
            sqltree.query(
                store.con, "ui.sparsecore.sc_cells_from_events", table_ids=[], forward_id=-1, **kw
            ).to_pylist()
            == sqltree.query(store.con, "ui.sparsecore.sc_cells_from_summary", **kw).to_pylist()
        )


def test_version_4_store_is_read_with_tile_sums_from_the_events_and_migrated(tmp_path, mixed_db):
    # Version 5 replaced timeline_bins and timeline_long by tile_sums. Read-only, a version 4 store
    # reads tile_sums as a TEMP view over the events (the same rows, the same tiles and track
    # counts); a writing open (scprof ui's too) builds it for the runs already there and drops
    # the old tables.
    import shutil

    from ui import trace_api

    db = str(tmp_path / "v4.duckdb")
    shutil.copy(mixed_db, db)

    def served(store: Store) -> list:
        trace_api.FACTS._values.clear()
        trace_api.TILES._values.clear()
        out = []
        for run in (1, 2):
            facts = trace_api.run_facts(store, run)
            top = facts.last_ps.bit_length() - 10
            out += [trace_api.tile_json(store, facts, k, 0, sorted(facts.track_ids)) for k in (top, top - 1)]
            out.append([(t.track_id, t.n) for t in run_tracks(store, run)])
        return out

    with Store.open(db, read_only=True) as store:
        fresh = store.rows("SELECT * FROM tile_sums ORDER BY ALL")
        views = served(store)
    assert {r["run_id"] for r in fresh} == {1, 2}
    with duckdb.connect(db) as con:  # what a version-4 store was: timeline_bins and _long, no tile_sums
        con.execute("DROP TABLE tile_sums")
        con.execute(
            "CREATE TABLE timeline_bins (run_id INTEGER, track_id INTEGER, bin INTEGER, events INTEGER, busy_ps BIGINT)"
        )
        con.execute("CREATE TABLE timeline_long (run_id INTEGER, track_id INTEGER, start_ps BIGINT, dur_ps BIGINT)")
        con.execute("UPDATE scprof_meta SET value = '4' WHERE key = 'schema_version'")
    with Store.open(db, read_only=True) as store:
        assert store.schema_version() == 4
        assert store.rows("SELECT * FROM tile_sums ORDER BY ALL") == fresh
        assert served(store) == views
    with Store.open(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.rows("SELECT * FROM tile_sums ORDER BY ALL") == fresh
        tables = {r["table_name"] for r in store.rows("SELECT table_name FROM duckdb_tables()")}
        assert "tile_sums" in tables and not tables & {"timeline_bins", "timeline_long"}

"""profiler/xspace/map_names.py (with the typed fields of profiler/trace_fields.py) is the one
definition of the XSpace mapping: the import and the export spell none of its names themselves,
and the typed fields match the store's events columns and the contract the import has always
kept (stat -> column, which stat wins)."""

from __future__ import annotations

import ast
from pathlib import Path

from exporters.xspace import export_run
from profiler import schema
from profiler import trace_fields as tf
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from profiler.wire import NULL_I32, NULL_I64
from profiler.xspace import map_names as m
from profiler.xspace import xplane_pb2 as xp

REPO = Path(__file__).resolve().parents[2]


def _mapping_names() -> set[str]:
    """Every name the mapping defines (plane, line, stat and fact names), less those that are also
    store column names or XSpace proto field names (which other modules rightly spell)."""
    names: set[str] = set()
    for attr, v in vars(m).items():
        if not attr.isupper() or attr in ("INT32", "COUNT", "STRING"):
            continue
        if isinstance(v, str):
            names.add(v)
        elif isinstance(v, tuple):
            names |= {x for x in v if isinstance(x, str)}
        elif isinstance(v, dict):
            names |= {k for k in v if isinstance(k, str)}
    for f in m.TYPED_FIELDS:
        names |= {*f.xspace_read, f.xspace_written}
    store = {c.name for t in schema.TABLES for c in t.columns} | {f.name for f in m.TYPED_FIELDS}
    proto = {f.name for msg in xp.DESCRIPTOR.message_types_by_name.values() for f in msg.fields}
    return names - store - proto


def test_import_and_export_spell_no_mapping_name_themselves():
    names = _mapping_names()
    assert {"group_id", "scprof_step_marker", "/host:scprof", "_counters_", "hlo_category", "run_uuid"} <= names
    modules = [
        p
        for p in sorted((REPO / "profiler" / "xspace").glob("*.py"))
        if p.name not in ("map_names.py", "xplane_pb2.py")
    ] + [REPO / "exporters" / "xspace.py"]
    found = [
        f"{p.relative_to(REPO)}:{node.lineno}: {node.value!r}"
        for p in modules
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]
    assert found == []


def test_typed_fields_are_the_store_typed_columns():
    """One field per typed events column, holding what the column's SQL type holds."""
    events = {c.name: c.type for c in schema.table("events").columns}
    typed = [c for c in events if c not in ("run_id", "event_id", "track_id", "name_id", "start_ps", "dur_ps")]
    assert sorted(f.column for f in m.TYPED_FIELDS) == sorted(typed)
    for f in m.TYPED_FIELDS:
        assert events[f.column] == {tf.INT32: "INTEGER", tf.COUNT: "BIGINT", tf.STRING: "INTEGER"}[f.holds]
        assert f.column.endswith("_id") == (f.holds == tf.STRING)


# The stat -> column contract the import has always kept (XProf's names and scprof's own).
CONTRACT = {
    "step_num": "step",
    "group_id": "step",
    "table": "table",
    "table_name": "table",
    "sc": "sc",
    "sparse_core": "sc",
    "minibatch": "minibatch",
    "ids": "ids",
    "unique_ids": "unique_ids",
    "dropped_ids": "dropped_ids",
    "bytes": "bytes",
    "bytes_accessed": "bytes",
    "bytes_transferred": "bytes",
    "flops": "flops",
    "hlo_category": "category",
    "category": "category",
}


def test_typed_stats_contract():
    """Stat -> column as the import reads it (a later stat of a column wins: group_id over step_num,
    as XProf groups by group_id), and the export writes a stat the import reads back. A typed field
    added later brings its own stats: these stay as they are."""
    assert CONTRACT.items() <= m.TYPED_STATS.items()
    assert set(m.TYPED_STATS) - set(CONTRACT) == {
        s for f in m.TYPED_FIELDS for s in f.xspace_read if f.name not in CONTRACT.values()
    }
    assert m.FIELD["step"].xspace_read[-1] == "group_id"
    for f in m.TYPED_FIELDS:
        assert f.xspace_written in f.xspace_read
    assert m.STRING_COLUMNS[:2] == ("table", "category")
    assert m.INT_COLUMNS[:7] == ("sc", "minibatch", "ids", "unique_ids", "dropped_ids", "bytes", "flops")


def test_plane_kind_reads_xprof_plane_names():
    assert m.plane_kind(m.tpu_plane(3)) == ("tensorcore", 3, 0)
    assert m.plane_kind(m.sc_plane(3, 1)) == ("sparsecore", 3, 1)
    assert m.plane_kind("/device:TPU:0 SparseCore Lite 2") == ("sparsecore", 0, 2)
    assert m.plane_kind(m.HOST_PLANE) == ("host", -1, -1)
    assert m.plane_kind(m.SCPROF_PLANE) == ("host", -1, -1)
    assert m.plane_kind("/device:GPU:7") == ("gpu", 7, 0)
    assert m.plane_kind("/device:CUSTOM:3") == ("device", 3, 0)
    assert m.plane_kind("Task Environment") == ("unknown", -1, -1)
    assert m.plane_kind("/device:TPU:" + "9" * 13)[1] > (1 << 31)  # refused later by check_plane_ids


# --------------------------------------------------------------------------- round trip
I32_LO, I32_HI, I64_HI = -(1 << 31) + 1, (1 << 31) - 1, (1 << 63) - 1  # int32 min is the trace's NULL
_EDGE = {tf.INT32: [0, 7, I32_LO, 1 << 30], tf.COUNT: [0, 1, 1 << 40, 12345], tf.STRING: ["t0", "t1", "²x", "t0"]}
_NO_VALUE = {tf.INT32: NULL_I32, tf.COUNT: NULL_I64, tf.STRING: ""}  # what emit() takes for "none"
HARDWARE = {
    "generation": "v6e",
    "num_chips": 2,
    "sparsecores_per_chip": 2,
    "tiles_per_sparsecore": 16,
    "simd_width": 8,
    "hbm_bytes": 1 << 35,
    "spmem_bytes_per_tile": 1 << 19,
    "hbm_bandwidth_bytes_per_s": 1.6e12,
    "tc_peak_flops": 9.18e14,
    "ici_bandwidth_bytes_per_s": 4.5e11,
    "board": "test rig",
}  # "board": not a runs column, kept in hardware_extra


def _typed_values(f: m.TypedField, n: int) -> list:
    """n values of field f: its edge values in turn, every fifth one "none" (the step: always set,
    as the import gives an event without a step the step of the marker around it)."""
    edge = _EDGE[f.holds]
    vals = [edge[i % len(edge)] for i in range(n)]
    if f.name != "step":
        vals = [_NO_VALUE[f.holds] if i % 5 == 3 else v for i, v in enumerate(vals)]
    if f.name in ("flops", "bytes"):  # one event far above the others (written on the event, not metadata)
        vals[1] = I64_HI
    return vals


def _every_field_run(path: str) -> None:
    """A run whose events set every typed field of TYPED_FIELDS (edge values, none), with steps,
    counters, event arguments and every hardware fact."""
    with Recorder(
        path,
        run_name="mapped",
        producer="test",
        hardware=HARDWARE,
        config={"model": {"layers": 3}},
        tags={"who": "me"},
        start_time_unix_ns=1_700_000_000_000_000_000,
    ) as rec:
        tc_steps = rec.track(m.tpu_plane(1), m.TC_LINES[0], kind="tensorcore", chip=1, core=0)
        tc_ops = rec.track(m.tpu_plane(1), m.TC_LINES[2], kind="tensorcore", chip=1, core=0)
        sc_steps = rec.track(m.sc_plane(1, 1), m.SC_LINES[0], kind="sparsecore", chip=1, core=1)
        sc_ops = rec.track(m.sc_plane(1, 1), m.SC_LINES[2], kind="sparsecore", chip=1, core=1)
        hbm = rec.track(m.tpu_plane(1), "HBM heap", kind="counter", chip=1, unit="bytes")
        n = 20
        typed = {f.name: _typed_values(f, n) for f in m.TYPED_FIELDS}
        typed["step"] = [i // 10 for i in range(n)]  # inside the markers below
        rec.emit(
            track=[tc_ops if i % 2 else sc_ops for i in range(n)],
            name=[f"op{i % 3}" for i in range(n)],
            start_ps=[100 * i + 1 for i in range(n)],
            dur_ps=[50 + i for i in range(n)],
            **typed,
            args={
                "note": [f"n{i}" for i in range(n)],
                "ratio": [i / 4 for i in range(n)],
                "count": [i - 3 for i in range(n)],
            },
        )
        rec.steps(
            track=[tc_steps, tc_steps, sc_steps, sc_steps],
            step=[0, 1, 0, 1],
            start_ps=[0, 1000, 0, 1000],
            dur_ps=[1000, 1000, 1000, 1000],
        )
        rec.counters(track=[hbm, hbm, hbm], ts_ps=[0, 450, 1900], value=[1e6, 2.5e6, 0.0])


def _mapped(db: str) -> dict[str, list]:
    """Every field the mapping carries, read from the store: typed columns (strings resolved),
    steps, counters, arguments, tracks and the run facts."""
    typed = ", ".join(
        f"(SELECT value FROM strings s WHERE s.run_id = e.run_id AND s.string_id = e.{f.column}) AS {f.name}"
        if f.holds == tf.STRING
        else f"e.{f.column}"
        for f in m.TYPED_FIELDS
    )
    facts = ", ".join(
        [
            "uuid",
            "name",
            "producer",
            "config",
            "tags",
            "start_time_unix_ns",
            "hardware_extra",
            *(k for k in m.HARDWARE_FACTS),
        ]
    )
    queries = {
        "events": f"SELECT t.plane, t.line, n.value AS name, e.start_ps, e.dur_ps, {typed} FROM events e "
        "JOIN tracks t USING (run_id, track_id) JOIN strings n ON n.run_id = e.run_id "
        "AND n.string_id = e.name_id ORDER BY ALL",
        "args": "SELECT s.plane, s.start_ps, a.key, a.int_value, a.double_value, a.string_value "
        "FROM event_args a JOIN slices s USING (run_id, event_id) ORDER BY ALL",
        "steps": "SELECT t.plane, t.line, s.step, s.start_ps, s.dur_ps FROM steps s JOIN tracks t "
        "USING (run_id, track_id) ORDER BY ALL",
        "counters": "SELECT plane, counter, unit, ts_ps, value FROM counter_samples ORDER BY ALL",
        "tracks": "SELECT plane, line, kind, chip, core FROM tracks ORDER BY ALL",
        "runs": f"SELECT {facts} FROM runs",
    }
    with Store.open(db, read_only=True) as st:
        return {k: st.rows(q) for k, q in queries.items()}


def test_every_mapped_field_comes_back_from_an_exported_xspace(tmp_path):
    """Export a run to XSpace, import the file: each typed field of TYPED_FIELDS (edge values and
    none), the plane and line names, steps, counters, arguments and every run fact come back equal."""
    trace, a, b, out = (str(tmp_path / x) for x in ("run.sctrace", "a.duckdb", "b.duckdb", "run.xplane.pb"))
    _every_field_run(trace)
    with Store.open(a) as st:
        (r,) = ingest_traces(st, [trace])
        export_run(st, r.run_id, out)
    with Store.open(b) as st:
        ingest_traces(st, [out])
    before, after = _mapped(a), _mapped(b)
    for f in m.TYPED_FIELDS:  # the run exercises every field: values, and "none" (but the step)
        vals = [e[f.name] for e in before["events"]]
        assert len({v for v in vals if v is not None}) >= 2, f.name
        assert (None in vals) == (f.name != "step"), f.name
    assert {e["plane"] for e in before["events"]} == {m.tpu_plane(1), m.sc_plane(1, 1)}
    assert before["runs"][0]["generation"] == "v6e" and before["counters"] and before["steps"] and before["args"]
    for k in before:
        assert after[k] == before[k], k

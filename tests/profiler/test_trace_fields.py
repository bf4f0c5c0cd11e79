"""The one list of typed event fields agrees with the proto, the store and the recorder."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pytest

from profiler import scprof_trace_pb2 as pb
from profiler.errors import StoreError
from profiler.recorder import Recorder
from profiler.schema import TABLES
from profiler.store import Store
from profiler.trace_fields import BY_NAME, EVENT_CORE, GENERIC_ARG_PREFIX, TYPED_FIELDS, TYPED_NAMES
from profiler.trace_to_store import ingest_trace
from profiler.wire import NULL_I32, NULL_I64
from tests.tracekit import REPO

_SQL_TYPE = {"fixed32": "INTEGER", "sfixed32": "INTEGER", "sfixed64": "BIGINT"}
_NULL = {"fixed32": 0, "sfixed32": NULL_I32, "sfixed64": NULL_I64}


def proto_typed_fields() -> dict[str, tuple[int, str, int]]:
    """EventBatch's typed fields read from the .proto text itself (not the compiled descriptor)."""
    text = (REPO / "proto" / "scprof_trace.proto").read_text()
    body = re.search(r"message EventBatch \{(.*?)\n\}", text, re.S).group(1)
    out = {}
    for wire_type, name, number in re.findall(r"repeated (\w+) (\w+) = (\d+);", body):
        if name not in EVENT_CORE and not name.startswith(GENERIC_ARG_PREFIX):
            out[name] = (int(number), _SQL_TYPE[wire_type], _NULL[wire_type])
    return out


def test_the_list_is_the_protos_typed_fields_in_order():
    assert {f.name: (f.number, f.sql_type, f.null) for f in TYPED_FIELDS} == proto_typed_fields()
    numbers = [f.number for f in TYPED_FIELDS]
    assert numbers == sorted(numbers)
    every = {f.name for f in pb.EventBatch.DESCRIPTOR.fields}
    rest = every - set(TYPED_NAMES) - set(EVENT_CORE)
    assert rest and all(n.startswith(GENERIC_ARG_PREFIX) for n in rest)


def test_the_events_table_has_one_column_per_field():
    events = next(t for t in TABLES if t.name == "events")
    cols = {c.name: c.type for c in events.columns}
    for f in TYPED_FIELDS:
        assert cols[f.column] == f.sql_type
    assert BY_NAME["table"].column == "table_id" and BY_NAME["category"].column == "category_id"
    assert {"step", "ids", "flops", "category"} <= set(proto_typed_fields())  # the reading finds them


def test_every_field_goes_from_recorder_to_store(tmp_path):
    """A value in every typed field survives record and ingest; an absent one reads NULL."""
    path = tmp_path / "t.sctrace"
    cols = {f.name: ["tbl_a", ""] if f.is_string else np.array([7 + f.number, f.null], np.int64) for f in TYPED_FIELDS}
    with Recorder(str(path), run_name="fields") as rec:
        tr = rec.track("/device:TPU:0", "XLA Ops", kind="tensorcore", chip=0, core=0)
        rec.emit(track=[tr, tr], name=["a", "b"], start_ps=[0, 10], dur_ps=[5, 5], **cols)
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        run = ingest_trace(store, str(path)).run_id
        names = ", ".join(
            f"(SELECT value FROM strings s WHERE s.run_id = e.run_id AND s.string_id = e.{f.column})"
            if f.is_string
            else f.column
            for f in TYPED_FIELDS
        )
        rows = store.query(f"SELECT {names} FROM events e WHERE run_id = $r ORDER BY event_id", {"r": run}).to_pylist()
    first, second = (list(r.values()) for r in rows)
    assert first == ["tbl_a" if f.is_string else 7 + f.number for f in TYPED_FIELDS]
    assert second == [None] * len(TYPED_FIELDS)


def test_a_store_without_a_typed_column_gets_it_on_a_writing_open(tmp_path, small_trace):
    """A store made before a typed field existed: a read-only open names the field and refuses,
    a writing open adds the column, and the next ingest fills it."""
    db = str(tmp_path / "old.duckdb")
    with Store.open(db) as store:
        ingest_trace(store, str(small_trace))
    con = duckdb.connect(db)
    con.execute("ALTER TABLE events DROP COLUMN flops")  # as a store made before `flops` was a field
    con.close()
    with pytest.raises(StoreError, match=r"old\.duckdb: store predates the typed event field\(s\) flops; open it once"):
        Store.open(db, read_only=True)
    with Store.open(db) as store:
        run = ingest_trace(store, str(small_trace), replace=True).run_id
        got = store.query("SELECT count(flops) AS n FROM events WHERE run_id = $r", {"r": run})
        assert got.to_pylist()[0]["n"] > 0
    with Store.open(db, read_only=True) as store:
        assert store.query("SELECT count(*) AS n FROM slices WHERE flops IS NOT NULL").to_pylist()[0]["n"] > 0

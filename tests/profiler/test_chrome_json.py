"""Chrome trace JSON import (profiler/chrome_json_scan.py, profiler/chrome_json_to_store.py).

References are independent of the import: Python's `json` module over the same files (the
events, the ProfilerStep numbers), hand-computed picoseconds for a trace built here, the same
JAX capture imported from its XSpace, and the step times the torch generator measured itself.
"""

from __future__ import annotations

import glob
import gzip
import json
import os

import pytest

from profiler import chrome_json_scan as scan
from profiler.store import Store
from profiler.trace_to_store import ingest_traces
from tests.tracekit import REPO, assert_one_error, cli, snapshot

DATA = REPO / "tests" / "data"
WILD_JSON = sorted(glob.glob(str(DATA / "wild" / "**" / "*.json.gz"), recursive=True))
TORCH = DATA / "torch_dataloader"
JAX_RUN = DATA / "jax_cpu_json" / "plugins" / "profile" / "run1"
STORED_PHASES = ("X", "B", "i", "I", "R")


def _events(path: str) -> list[dict]:
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


# --------------------------------------------------------------------------- the streamed scan


@pytest.mark.parametrize("chunk", [97, 4096, scan.CHUNK_BYTES])
@pytest.mark.parametrize("path", WILD_JSON[:4] + [str(JAX_RUN / "jaxhost.trace.json.gz")], ids=os.path.basename)
def test_ndjson_lines_are_the_events_json_reads(monkeypatch, path, chunk):
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    meta: dict = {}
    lines = [ln for b in scan.ndjson_blocks(path, meta) for ln in b.split(b"\n") if ln.strip()]
    want = _events(path)
    assert len(lines) == len(want)
    for line, ref in zip(lines, want, strict=True):
        got = json.loads(line)
        for k in ("ts", "dur"):  # made strings, digits unchanged
            if isinstance(ref.get(k), int | float):
                assert isinstance(got[k], str) and float(got[k]) == float(ref[k])
                got[k] = ref[k]
        assert got == ref


TRICKY = (
    '{"a": "x]}", "traceEvents" : [\n'
    '{"ph": "X", "name": "q\\\\\\"ts\\": 7, \\\\", "pid": 1, "tid": 1, "ts": 1700000000000000.125, "dur" : 2.5,'
    ' "args": {"ts": 3, "s": "\\\\\\\\", "n": [[{"ts": 1}]]}},\n'
    '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1700000000000003, "dur": 1e-06}\n'
    '], "baseTimeNanoseconds": 5, "z": {"k": "[["}}'
)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_escapes_nesting_and_keys_across_chunk_edges(tmp_path, monkeypatch, chunk):
    """Escaped quotes and backslash runs, brackets inside strings, nested `ts` keys, cut anywhere."""
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    p = tmp_path / "t.json"
    p.write_text(TRICKY)
    meta: dict = {}
    lines = [json.loads(ln) for b in scan.ndjson_blocks(str(p), meta) for ln in b.split(b"\n") if ln.strip()]
    ref = json.loads(TRICKY)
    assert meta == {"a": "x]}", "baseTimeNanoseconds": 5, "z": {"k": "[["}}
    assert [ln["ts"] for ln in lines] == ["1700000000000000.125", "1700000000000003"]
    assert lines[0]["dur"] == "2.5" and lines[1]["dur"] == "1e-06"
    assert lines[0]["args"] == ref["traceEvents"][0]["args"]  # nested ts left as numbers
    assert lines[0]["name"] == ref["traceEvents"][0]["name"]


# --------------------------------------------------------------------------- the mapping, by hand


def _kineto_like() -> dict:
    """A Kineto-shaped trace: host thread with steps, a DataLoader span and launches; a GPU stream."""
    t0 = 1_700_000_000_000_000  # epoch microseconds
    ev = [
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {"name": "thread 9 (python3)"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    ]
    for s in (3, 4):
        b = t0 + (s - 3) * 1000
        ev += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 9,
                "tid": 9,
                "ts": b,
                "dur": 1000,
            },
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                "pid": 9,
                "tid": 9,
                "ts": b + 1,
                "dur": 600,
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 9,
                "tid": 9,
                "ts": b + 700,
                "dur": 5,
                "args": {"correlation": 11, "External id": 18446744073709551615},
            },
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": 7,
                "ts": f"{b + 610}.250",
                "dur": 20,
                "args": {"bytes": 4096, "device": 0},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": b + 710,
                "dur": 250.5,
                "args": {"grid": [2, 1, 1], "device": 0},
            },
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 0,
                "tid": 7,
                "ts": b + 610,
                "dur": 360,
            },
        ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": ev}


def _table(db: str, sql: str) -> list[dict]:
    with Store.open(db, read_only=True) as st:
        return st.rows(sql)


def test_a_kineto_trace_maps_like_an_xspace_capture(tmp_path):
    p = tmp_path / "run.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(_kineto_like()).replace('"ts": "', '"ts": ').encode()))
    text = gzip.decompress(p.read_bytes()).decode().replace('.250"', ".250")  # the memcpy's ts as a number
    p.write_bytes(gzip.compress(text.encode()))
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as st:
        (r,) = ingest_traces(st, [str(p)])
    assert r.name == "run" and r.events == 12
    rows = _table(
        db,
        """
        SELECT n.value AS name, e.start_ps, e.dur_ps, e.step, e.bytes, t.plane, t.line, t.kind, t.chip,
               c.value AS category
        FROM events e JOIN tracks t USING (run_id, track_id)
        JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
        LEFT JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id ORDER BY e.event_id""",
    )
    by = {(x["name"], x["step"], x["line"]): x for x in rows}
    # times: microseconds after the first event, in ps, digits kept (610.25 us at epoch scale)
    memcpy = by[("Memcpy HtoD (Pageable -> Device)", 4, "stream 7")]
    assert (memcpy["start_ps"], memcpy["dur_ps"], memcpy["bytes"]) == (1_610_250_000, 20_000_000, 4096)
    assert memcpy["category"] == "host_to_device" and memcpy["plane"] == "/device:GPU:0" and memcpy["kind"] == "gpu"
    gemm = by[("gemm", 3, "stream 7")]
    assert (gemm["start_ps"], gemm["dur_ps"], gemm["category"]) == (710_000_000, 250_500_000, "device_compute")
    step = by[("ProfilerStep#4", 4, "Steps")]
    assert (step["plane"], step["kind"], step["start_ps"], step["dur_ps"]) == ("/host:CPU", "host", 1_000_000_000, 1e9)
    assert by[("ProfilerStep#3", 3, "Annotations")]["plane"] == "/device:GPU:0"  # a GPU annotation holds no ops
    loader = by[("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 3, "thread 9 (python3)")]
    assert loader["category"] == "host_preprocess"
    assert by[("cudaLaunchKernel", 3, "thread 9 (python3)")]["category"] == "host_launch"
    steps = _table(db, "SELECT step, start_ps, dur_ps FROM steps ORDER BY step")
    assert steps == [{"step": 3, "start_ps": 0, "dur_ps": 10**9}, {"step": 4, "start_ps": 10**9, "dur_ps": 10**9}]
    args = {(a["key"], a["int_value"], a["string_value"]) for a in _table(db, "SELECT * FROM event_args")}
    assert ("External id", None, "18446744073709551615") in args  # beyond int64: exact, as text
    assert ("grid", None, "[2,1,1]") in args and ("correlation", 11, None) in args and ("cat", None, "kernel") in args
    run = _table(db, "SELECT source, producer, start_time_unix_ns, hardware_extra FROM runs")[0]
    assert (run["source"], run["producer"]) == ("chrome-json", "pytorch-kineto")
    assert run["start_time_unix_ns"] == 1_700_000_000_000_000_000
    assert json.loads(run["hardware_extra"])["chrome_trace"]["deviceProperties"] == [{"id": 0, "name": "GPU"}]


def test_begin_end_pairs_instants_and_counters(tmp_path):
    """The JSON Array Format (no closing bracket): nested B/E pairs, an instant, a counter of two series."""
    p = tmp_path / "chrome.json"
    p.write_text(
        '[{"ph":"B","name":"outer","pid":1,"tid":2,"ts":10},{"ph":"B","name":"inner","pid":1,"tid":2,"ts":11},'
        '{"ph":"i","name":"tick","pid":1,"tid":2,"ts":12,"s":"t"},{"ph":"E","pid":1,"tid":2,"ts":14},'
        '{"ph":"E","pid":1,"tid":2,"ts":19},{"ph":"C","name":"mem","pid":1,"ts":13,"args":{"used":5,"free":7.5}},'
        '{"ph":"s","id":1,"name":"flow","pid":1,"tid":2,"ts":12},'
    )
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as st:
        ingest_traces(st, [str(p)])
    rows = _table(
        db,
        "SELECT n.value AS name, start_ps, dur_ps FROM events e JOIN strings n "
        "ON n.run_id = e.run_id AND n.string_id = e.name_id ORDER BY start_ps",
    )
    assert [(x["name"], x["start_ps"], x["dur_ps"]) for x in rows] == [
        ("outer", 0, 9_000_000),
        ("inner", 1_000_000, 3_000_000),
        ("tick", 2_000_000, 0),
    ]
    counters = _table(
        db, "SELECT t.line, c.ts_ps, c.value FROM counters c JOIN tracks t USING (run_id, track_id) ORDER BY 1"
    )
    assert counters == [
        {"line": "mem free", "ts_ps": 3_000_000, "value": 7.5},
        {"line": "mem used", "ts_ps": 3_000_000, "value": 5.0},
    ]
    assert json.loads(_table(db, "SELECT tags FROM runs")[0]["tags"])["json_skipped_events"] == "s: 1"


# --------------------------------------------------------------------------- real traces


@pytest.mark.parametrize("path", WILD_JSON, ids=lambda p: os.path.relpath(p, DATA / "wild"))
def test_wild_traces_import_every_event_and_step(tmp_path, path):
    """Against json: every X/B/i event stored, on the track of its thread; ProfilerStep#N are the steps."""
    want = _events(path)
    stored = [e for e in want if e.get("ph") in STORED_PHASES]
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as st:
        (r,) = ingest_traces(st, [path])
    assert r.events == len(stored)
    host_steps = {
        int(e["name"].split("#")[1])
        for e in stored
        if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"
    }
    got = {x["step"] for x in _table(db, "SELECT DISTINCT step FROM steps")}
    assert got == host_steps
    total = sum(round(float(e.get("dur", 0)) * 1e6) for e in stored if e["ph"] == "X")
    assert _table(db, "SELECT sum(dur_ps)::BIGINT AS s FROM events")[0]["s"] == pytest.approx(total, rel=1e-9)


def test_jax_json_and_xspace_of_one_capture_give_the_same_run(tmp_path):
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as st:
        ingest_traces(st, [str(JAX_RUN / "jaxhost.xplane.pb")], name="xspace")
        ingest_traces(st, [str(JAX_RUN / "jaxhost.trace.json.gz")], name="json")
    per_track = _table(
        db,
        """
        SELECT r.name AS run, t.line, t.kind, count(*) AS n, sum(e.dur_ps) AS ps
        FROM events e JOIN tracks t USING (run_id, track_id) JOIN runs r USING (run_id) GROUP BY ALL""",
    )
    x = {(a["line"], a["kind"]): a for a in per_track if a["run"] == "xspace"}
    j = {(a["line"], a["kind"]): a for a in per_track if a["run"] == "json"}
    assert x.keys() == j.keys() and any(k == "cpu" for _, k in x)
    for key in x:  # the JSON holds times to the ns: sums within 1 ns per event
        assert j[key]["n"] == x[key]["n"] and abs(j[key]["ps"] - x[key]["ps"]) <= 1000 * x[key]["n"]
    steps = _table(db, "SELECT r.name, s.step, s.dur_ps FROM step_times s JOIN runs r USING (run_id) ORDER BY 2")
    by = {}
    for s in steps:
        by.setdefault(s["step"], {})[s["name"]] = s["dur_ps"]
    assert len(by) == 5 and all(abs(v["json"] - v["xspace"]) <= 2000 for v in by.values())


def test_dataloader_bound_pair_finding_and_compare(tmp_path, capsys):
    """The DataLoader-bound trace is found input-bound; with workers, compare says improved (CI below 0)."""
    db = str(tmp_path / "s.duckdb")
    bound, workers = (str(TORCH / f"{n}.pt.trace.json.gz") for n in ("dataloader_bound", "dataloader_workers"))
    assert cli(capsys, "ingest", bound, workers, "--db", db).code == 0
    report = json.loads(cli(capsys, "analyze", "dataloader_bound", "--json", "--db", db).out)
    bound_findings = {f["rule"]: f for f in report["findings"]}
    assert bound_findings["host_bound"]["value"] > 0.5  # the device waits for its input most of each step
    for name in ("dataloader_bound", "dataloader_workers"):  # scprof's mean step against the script's own timing
        with open(TORCH / f"{name}.steps.json") as f:
            ref = json.load(f)["step_s"]
        mean = _table(db, f"SELECT mean_step_ps FROM run_list WHERE name = '{name}'")[0]["mean_step_ps"]
        assert mean / 1e12 == pytest.approx(sum(ref[1:-1]) / len(ref[1:-1]), rel=0.25)
    c = json.loads(cli(capsys, "compare", "dataloader_bound", "dataloader_workers", "--json", "--db", db).out)
    assert c["step_time"]["verdict"] == "improved" and c["step_time"]["ci_high"] < 0, c["step_time"]


# --------------------------------------------------------------------------- bad input


BAD = {
    "csv.json": (b"step,time\n1,2\n", "scprof reads .sctrace files, XProf captures"),
    "csv.txt": (b"step,time\n1,2\n", "scprof reads .sctrace files, XProf captures"),
    "noevents.json": (b'{"foo": [1, 2]}', "Chrome trace JSON (.json, .json.gz"),
    "empty.json": (b'{"traceEvents": []}', "no events"),
    "cut.json": (b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "ts": 1, "dur": 2}', "cut short"),
    "badjson.json": (b'{"traceEvents": [{"ph": "X" "name": "a"}]}', "not valid trace JSON"),
    "notobject.json": (b'{"traceEvents": [5]}', "not valid trace JSON"),
    "negative.json": (b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "ts": 1, "dur": -2}]}', "negative"),
    "nots.json": (b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "dur": 2}]}', "ts is missing"),
    "far.json": (
        b'{"traceEvents": [{"ph":"X","name":"a","pid":1,"ts":0},{"ph":"X","name":"b","pid":1,"ts":1e15}]}',
        "over 2^62 ps",
    ),
    "cutgz.json.gz": (
        gzip.compress(b'{"traceEvents": [' + b'{"ph":"X","name":"a","pid":1,"ts":1},' * 500)[:300],
        "cut short",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_json_is_one_line_and_store_unchanged(tmp_path, capsys, name):
    db = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", str(TORCH / "dataloader_workers.pt.trace.json.gz"), "--db", db).code == 0
    before = snapshot(db)
    data, needle = BAD[name]
    p = tmp_path / name
    p.write_bytes(data)
    assert_one_error(cli(capsys, "ingest", str(p), "--db", db), str(p), needle)
    assert snapshot(db) == before


@pytest.mark.parametrize("chunk", [1 << 12, scan.CHUNK_BYTES])
def test_an_endless_event_is_refused(tmp_path, monkeypatch, capsys, chunk):
    monkeypatch.setattr(scan, "MAX_EVENT_BYTES", 1 << 16)
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    p = tmp_path / "long.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "' + b"a" * (1 << 18) + b'", "ts": 1}]}')
    assert_one_error(cli(capsys, "ingest", str(p), "--db", tmp_path / "s.duckdb"), "longer than")
    assert not (tmp_path / "s.duckdb").exists()


def test_a_gzip_bomb_is_refused(tmp_path, capsys):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20) + b"]}", 9))
    assert_one_error(cli(capsys, "ingest", str(bomb), "--db", tmp_path / "s.duckdb"), "zip bomb")
    assert not (tmp_path / "s.duckdb").exists()


def test_the_reader_accepts_the_largest_event_a_block_holds():
    """DuckDB's JSON reader (profiler/sql/ingest/chrome_json.sql: read_block) takes objects up to
    the scanner's MAX_EVENT_BYTES, written there as a number."""
    from profiler import sqltree

    assert f"maximum_object_size = {scan.MAX_EVENT_BYTES})" in sqltree.get("ingest.chrome_json.read_block").sql


def test_the_line_names_are_those_the_mapping_writes():
    """The lines statement (profiler/sql/ingest/chrome_json.sql) names the lines the Python side
    tells apart (chrome_json_to_store.ANNOTATIONS_LINE, STEPS_LINE)."""
    from profiler import sqltree
    from profiler.chrome_json_to_store import ANNOTATIONS_LINE, STEPS_LINE

    lines = sqltree.get("ingest.chrome_json.lines").sql
    assert f"THEN '{ANNOTATIONS_LINE}'" in lines and f"THEN '{STEPS_LINE}'" in lines

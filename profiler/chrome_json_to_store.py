"""Ingest Chrome trace JSON (PyTorch Kineto `*.pt.trace.json(.gz)`, XProf / JAX `*.trace.json.gz`,
other Chrome traces) into the store, mapped as an XSpace capture is.

    file -> NDJSON blocks (profiler/chrome_json_scan.py) -> DuckDB's JSON reader -> a table of events
    -> planes, lines, times, typed fields, arguments and counters in SQL (one statement each)
    -> a Decoded, as an XSpace import makes -> xspace_store.insert_decoded (kinds, steps, rows)

The parse and the mapping run in a DuckDB connection of their own (in memory, spilling to disk
past its memory limit), in SQL: no Python object or step per event. The mapping
(docs/trace-format.md, "Chrome trace JSON mapping"):

- a process is a plane: its `process_name` when it is an XProf plane name (`/device:TPU:0`,
  `/host:CPU`: XProf's and JAX's JSON), `/device:GPU:N` for Kineto's GPU processes (label
  `GPU N`, or kernels and memcpys), else `/host:CPU`; a thread is a line, named by its
  `thread_name` (threads of one name merge, as lines do in an XSpace);
- `X` events are events; `B`/`E` pairs (per thread, nested) are events; instants (`i`, `I`,
  `R`) are zero-length events; `C` samples are counter tracks (`<name> <key>`); metadata (`M`)
  names the planes and lines; flows, async and object events are counted in the run's tags;
- `ts` and `dur` (microseconds, read as decimal text) become picoseconds after the earliest
  event's start; `runs.start_time_unix_ns` is `baseTimeNanoseconds` (Kineto) plus that start,
  or the start itself when it reads as microseconds since 1970;
- `args` are the event's stats: `group_id`, `step_num`, `flops`, `bytes*`, ... fill the typed
  columns as XSpace stats do (numbers may be written as strings), the others, and `cat`, are
  event_args rows;
- steps: Kineto's `ProfilerStep#N` is step N's marker on the host's `Steps` line, events with a
  `step_num` arg (jax.profiler.StepTraceAnnotation) are markers as in an XSpace; Kineto's GPU
  annotations (`gpu_user_annotation`) and profiler spans (`Trace`) go to an `Annotations` line,
  which holds no ops (profiler/sql/stdlib/ops.sql: op_tracks);
- a Kineto trace without GPUs ran its model on the CPU: the threads running `cpu_op` events are
  the CPU device (kind `cpu`, as JAX's XLA threads are), their ops `device_compute`, except ops
  inside a DataLoader's (input) span, which are the input pipeline's (`host_preprocess`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile

import duckdb
import numpy as np
import pyarrow as pa

from profiler import chrome_json_scan as scan
from profiler.errors import TraceFormatError, one_line
from profiler.xspace import store as xspace_store
from profiler.xspace.check import NULL
from profiler.xspace.decode import Decoded, Interner, Tracks
from profiler.xspace.map_kinds import CATEGORY_RULES
from profiler.xspace.map_names import STRING_COLUMNS, TYPED_FIELDS, plane_kind

JSON_SUFFIXES = (".json", ".json.gz")
SOURCE = "chrome-json"
MAX_TIME_PS = 1 << 62  # as the XSpace import: a run spans < 2^63 ps and start + dur fits int64
ANNOTATIONS_LINE = "Annotations"  # spans over ops (GPU annotations, profiler spans): no ops of their own
STEPS_LINE = "Steps"
_INPUT_RE = dict(CATEGORY_RULES["host"])["host_preprocess"]
_STEP_RE = r"^ProfilerStep#(\d+)$"
_COLUMNS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args")
_READ = (
    "{ph: 'VARCHAR', name: 'VARCHAR', cat: 'VARCHAR', pid: 'JSON', tid: 'JSON', ts: 'VARCHAR', "
    "dur: 'VARCHAR', id: 'JSON', args: 'JSON'}"
)
_EVENT_PHASES = ("X", "B", "i", "I", "R")  # phases stored as events (E closes a B)
MEMORY_LIMIT = "1GB"  # the parse's DuckDB connection; its tables spill to a temporary directory past it


def is_json_path(path: str) -> bool:
    """A Chrome trace JSON file: named `*.json` / `*.json.gz`, or any file whose text starts as JSON."""
    return os.path.isfile(path) and (path.endswith(JSON_SUFFIXES) or scan.sniff(path))


def run_name(path: str) -> str:
    """The run's default name: the file's name without `.pt.trace.json.gz` and the like."""
    base = os.path.basename(path)
    for suffix in (".gz", ".json", ".trace", ".pt"):
        base = base.removesuffix(suffix)
    return base or "trace"


def ingest_json_run(con, run_id: int, name: str | None, path: str, insert_arrow) -> dict:
    """Insert the Chrome trace at `path` as run `run_id` (inside the caller's transaction);
    returns the run facts (as xspace_store's, with source, producer and start time set)."""
    d, meta, skipped = decode_json(path)
    facts = xspace_store.insert_decoded(con, run_id, name or run_name(path), d, [path], insert_arrow)
    facts["producer"] = _producer(meta, d)
    facts["start_time_unix_ns"] = _start_ns(meta, d.origin_ns)
    extra = {
        k: meta[k]
        for k in (
            "deviceProperties",
            "distributedInfo",
            "displayTimeUnit",
            "schemaVersion",
            "traceName",
            "baseTimeNanoseconds",
            "metadata",
        )
        if k in meta
    }
    facts["hardware_extra"] = json.dumps({"chrome_trace": extra}, default=str, sort_keys=True)
    tags = json.loads(facts["tags"])
    if skipped:
        tags["json_skipped_events"] = ", ".join(f"{ph}: {n}" for ph, n in sorted(skipped.items()))
    facts["tags"] = json.dumps(tags, sort_keys=True)
    return facts


def _producer(meta: dict, d: Decoded) -> str:
    if "schemaVersion" in meta or "deviceProperties" in meta or "baseTimeNanoseconds" in meta:
        return "pytorch-kineto"
    if any(r["plane"].startswith(("/device:", "/host:")) and r["plane"] != "/host:CPU" for r in d.tracks.rows) or (
        meta.get("metadata", {}).get("highres-ticks") if isinstance(meta.get("metadata"), dict) else False
    ):
        return "xprof-trace-json"
    return "chrome-trace-json"


def _start_ns(meta: dict, origin_us_ns: int) -> int:
    """Wall-clock start: Kineto's baseTimeNanoseconds plus the first event's ts, or the ts itself
    when it reads as an epoch time (after 2001 in microseconds), else 0 (unknown)."""
    base = meta.get("baseTimeNanoseconds")
    if isinstance(base, int) and 0 <= base < 1 << 62:
        return base + origin_us_ns
    return origin_us_ns if origin_us_ns > 10**18 else 0


def decode_json(path: str) -> tuple[Decoded, dict, dict[str, int]]:
    """The trace's events as a Decoded (what an XSpace decode gives), its top-level metadata and
    the events of phases it does not store, counted by phase."""
    meta: dict = {}
    digest = hashlib.sha1()
    with tempfile.TemporaryDirectory(prefix="scprof-json-") as tmp:
        con = duckdb.connect(":memory:")
        try:
            con.execute("SET enable_progress_bar = false")
            # its tables spill to the temporary directory past the limit (an in-memory database has none)
            con.execute(f"SET temp_directory = '{os.path.join(tmp, 'spill')}'")
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
            con.execute(f"CREATE TABLE raw ({', '.join(f'{c} VARCHAR' for c in _COLUMNS[:-1])}, args JSON)")
            block_path = os.path.join(tmp, "block.ndjson")
            for block in scan.ndjson_blocks(path, meta, digest):
                with open(block_path, "wb") as f:
                    f.write(block)
                try:
                    con.execute(
                        f"INSERT INTO raw SELECT {', '.join(_COLUMNS)} FROM read_json('{block_path}', "
                        f"format = 'newline_delimited', columns = {_READ}, "
                        f"maximum_object_size = {scan.MAX_EVENT_BYTES})"
                    )
                except duckdb.Error as e:
                    raise TraceFormatError(f"{path}: not valid trace JSON ({_clean(one_line(e), tmp)})") from None
            if os.path.exists(block_path):  # the blocks are in the table: free the disk for its spill
                os.remove(block_path)
            return _map(con, path, digest.digest(), meta)
        finally:
            con.close()


def _clean(message: str, tmp: str) -> str:
    """DuckDB's message without our temporary file's name."""
    return message.replace(os.path.join(tmp, "block.ndjson"), "the trace")[:300]


def _arrow(con, path: str, sql: str, params=None):
    """A query's result as an Arrow table (errors as _sql's)."""
    try:
        return con.sql(sql, params=params or []).to_arrow_table()
    except duckdb.Error as e:
        raise TraceFormatError(f"{path}: {one_line(e)[:300]}") from None


def _sql(con, path: str, sql: str, params=None):
    try:
        return con.execute(sql, params or [])
    except duckdb.Error as e:
        raise TraceFormatError(f"{path}: {one_line(e)[:300]}") from None


# Step 1: planes (processes) and lines (threads).
_PLANES = """
CREATE TABLE planes AS
WITH p AS (
    SELECT pid,
           arg_max(json_extract_string(args, '$.name'), rowid) FILTER (WHERE ph = 'M' AND name = 'process_name') AS pname,
           arg_max(json_extract_string(args, '$.labels'), rowid) FILTER (WHERE ph = 'M' AND name = 'process_labels') AS labels,
           bool_or(cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'gpu_user_annotation')) AS gpu_work,
           min(TRY_CAST(json_extract(args, '$.device') AS INTEGER)) FILTER (WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')) AS device
    FROM raw GROUP BY pid
)
SELECT pid,
       CASE WHEN pname LIKE '/%' THEN pname
            WHEN regexp_matches(labels, '^GPU \\d+') THEN '/device:GPU:' || regexp_extract(labels, '^GPU (\\d+)', 1)
            WHEN gpu_work THEN '/device:GPU:' || coalesce(device, TRY_CAST(pid AS INTEGER), 0)
            ELSE '/host:CPU' END AS plane
FROM p"""
_THREADS = """
CREATE TABLE threads AS
SELECT pid, tid, trim(arg_max(json_extract_string(args, '$.name'), rowid)) AS tname
FROM raw WHERE ph = 'M' AND name = 'thread_name' GROUP BY ALL"""

# Step 2: the events with their plane, line and times (decimal microseconds, exact).
_EVENTS = """
CREATE TABLE ev AS
WITH x AS (
    SELECT r.rowid AS i, r.ph, coalesce(r.name, '') AS name, r.cat, r.pid, r.tid, r.args,
           TRY_CAST(r.ts AS DECIMAL(38, 9)) AS ts, coalesce(TRY_CAST(r.dur AS DECIMAL(38, 9)), 0) AS dur, p.plane
    FROM raw r JOIN planes p USING (pid)
    WHERE r.ph IN ('X', 'B', 'E', 'i', 'I', 'R')
),
be AS (
    SELECT *, CASE ph WHEN 'B' THEN d ELSE d + 1 END AS lvl
    FROM (SELECT *, sum(CASE ph WHEN 'B' THEN 1 ELSE -1 END) OVER (PARTITION BY pid, tid ORDER BY i) AS d
          FROM x WHERE ph IN ('B', 'E'))
),
ranked AS (SELECT *, row_number() OVER (PARTITION BY pid, tid, lvl, ph ORDER BY i) AS k FROM be),
pairs AS (
    SELECT b.i, b.ph, b.name, b.cat, b.pid, b.tid, b.args, b.ts, e.ts - b.ts AS dur, b.plane
    FROM ranked b LEFT JOIN ranked e ON e.ph = 'E' AND e.pid = b.pid AND e.tid = b.tid AND e.lvl = b.lvl AND e.k = b.k
    WHERE b.ph = 'B'
)
SELECT i, ph, name, cat, pid, tid, args, ts, CASE WHEN ph = 'X' THEN dur ELSE 0 END AS dur, plane
FROM x WHERE ph NOT IN ('B', 'E')
UNION ALL SELECT i, ph, name, cat, pid, tid, args, ts, coalesce(dur, 0), plane FROM pairs"""

_LINES = f"""
CREATE TABLE ev_lines AS
SELECT e.i,
       CASE WHEN e.cat = 'gpu_user_annotation' OR (e.cat = 'Trace' AND TRY_CAST(e.pid AS BIGINT) IS NULL)
                THEN '{ANNOTATIONS_LINE}'
            WHEN e.plane NOT LIKE '/device:%' AND regexp_matches(e.name, '{_STEP_RE}') THEN '{STEPS_LINE}'
            ELSE coalesce(nullif(t.tname, ''), 'thread ' || trim(e.tid, '"')) END AS line
FROM ev e LEFT JOIN threads t USING (pid, tid)"""


def _map(con, path: str, sha1: bytes, meta: dict) -> tuple[Decoded, dict, dict[str, int]]:
    """The table `raw` mapped onto a Decoded."""
    for sql in (_PLANES, _THREADS, _EVENTS, _LINES):
        _sql(con, path, sql)
    skipped = dict(
        _sql(
            con,
            path,
            "SELECT ph, count(*) FROM raw WHERE ph NOT IN ('X', 'B', 'E', 'i', 'I', 'R', 'M', 'C') "
            "OR ph IS NULL GROUP BY ALL",
        ).fetchall()
    )
    skipped = {str(k): int(v) for k, v in skipped.items()}
    n, bad = _sql(con, path, "SELECT count(*), min(i) FILTER (WHERE ts IS NULL) FROM ev").fetchall()[0]
    counters = _sql(con, path, "SELECT count(*) FROM raw WHERE ph = 'C'").fetchall()[0][0]
    if bad is not None:
        raise TraceFormatError(f"{path}: event {bad}: ts is missing or not a number")
    if not n and not counters:
        raise TraceFormatError(f"{path}: the trace holds no events")
    origin = _sql(
        con, path, "SELECT least(min(ts), (SELECT min(TRY_CAST(ts AS DECIMAL(38, 9))) FROM raw WHERE ph = 'C')) FROM ev"
    ).fetchall()[0][0]
    _times(con, path, origin)
    d = Decoded(int(origin * 1000), [sha1])
    d.host_prefixes = [""]
    typed = _typed(con, path)
    _strings(con, path, d)
    tracks = _tracks(con, path, d)
    ev = _event_columns(con, path, d, tracks, typed, n)
    _categories(con, path, d, ev, tracks)
    d.events, d.n_events, d.capacity = ev, n, n
    _args(con, path, d, typed)
    _counters(con, path, d, origin)
    return d, meta, skipped


def _times(con, path: str, origin) -> None:
    """Start and duration in ps after the origin, checked (as the XSpace import's limits)."""
    _sql(
        con,
        path,
        """
        CREATE TABLE ev_ps AS
        SELECT i, CAST(round((ts - ?::DECIMAL(38, 9)) * 1000000) AS HUGEINT) AS start_ps,
               CAST(round(dur * 1000000) AS HUGEINT) AS dur_ps FROM ev""",
        [origin],
    )
    row = _sql(
        con,
        path,
        f"""
        SELECT i, start_ps, dur_ps FROM ev_ps
        WHERE dur_ps < 0 OR start_ps >= {MAX_TIME_PS} OR start_ps + dur_ps >= {MAX_TIME_PS}
        ORDER BY i LIMIT 1""",
    ).fetchall()
    if row:
        i, start, dur = row[0]
        what = (
            f"dur = {dur / 1e6:g} us: negative"
            if dur < 0
            else f"ends {(start + dur) / 1e6:g} us after the first event (over 2^62 ps)"
        )
        raise TraceFormatError(f"{path}: event {i}: {what}")


def _typed(con, path: str) -> dict[str, str]:
    """Every arg as a row, parsed once (table `arg_rows`: i, key, int, double or text value, and
    whether it fills a typed column), and the typed columns' values (table `typed`: i, field, int
    or string value; the stat names read per field, later names winning, numbers written as strings
    read too). Returns field -> 'int' or 'str'."""
    names = {s: (f.name, j) for f in TYPED_FIELDS for j, s in enumerate(f.xspace_read)}
    strings = set(STRING_COLUMNS)
    rows = [(s, f, j, f in strings) for s, (f, j) in names.items()]
    con.execute("CREATE TABLE typed_names (stat VARCHAR, field VARCHAR, rank INTEGER, is_str BOOLEAN)")
    con.executemany("INSERT INTO typed_names VALUES (?, ?, ?, ?)", rows)
    _sql(
        con,
        path,
        """
        CREATE TABLE arg_rows AS
        WITH j AS (
            SELECT e.i, j.key, j.type, j.value,
                   CASE WHEN j.type IN ('BIGINT', 'UBIGINT') THEN TRY_CAST(j.value::VARCHAR AS BIGINT) END AS ival
            FROM ev e, json_each(e.args) j WHERE json_type(e.args) = 'OBJECT'
        )
        SELECT j.i, j.key, j.type, j.ival,
               CASE WHEN j.type = 'DOUBLE' THEN TRY_CAST(j.value::VARCHAR AS DOUBLE) END AS dval,
               CASE WHEN j.type = 'VARCHAR' THEN j.value ->> '$'
                    WHEN j.type IN ('DOUBLE', 'NULL') OR j.ival IS NOT NULL THEN NULL
                    ELSE j.value::VARCHAR END AS text,
               n.field, n.rank, n.stat,
               CASE WHEN n.is_str THEN NULL ELSE coalesce(j.ival, TRY_CAST(j.value ->> '$' AS BIGINT)) END AS typed_int,
               CASE WHEN n.is_str AND j.type = 'VARCHAR' THEN j.value ->> '$' END AS typed_str
        FROM j LEFT JOIN typed_names n ON n.stat = j.key""",
    )
    _sql(
        con,
        path,
        f"""
        UPDATE arg_rows SET field = NULL
        WHERE field IS NOT NULL AND NOT (typed_int IS NOT NULL AND typed_int > {NULL} OR typed_str IS NOT NULL)""",
    )
    _sql(
        con,
        path,
        """
        CREATE TABLE typed AS
        SELECT i, field, arg_max(typed_int, rank) AS ival, arg_max(typed_str, rank) AS sval,
               bool_or(stat = 'step_num') AS step_num
        FROM arg_rows WHERE field IS NOT NULL GROUP BY ALL""",
    )
    return {f.name: ("str" if f.name in strings else "int") for f in TYPED_FIELDS}


def _strings(con, path: str, d: Decoded) -> None:
    """Every string the run stores, interned in SQL (table `strs`: s, id) and in d.strings."""
    _sql(
        con,
        path,
        """
        CREATE TABLE strs AS
        SELECT s, (row_number() OVER ())::BIGINT AS id FROM (
            SELECT DISTINCT s FROM (
                SELECT name AS s FROM ev UNION ALL SELECT plane FROM ev UNION ALL SELECT line FROM ev_lines
                UNION ALL SELECT sval FROM typed UNION ALL SELECT 'cat' UNION ALL SELECT cat FROM ev
                UNION ALL SELECT key FROM arg_rows UNION ALL SELECT text FROM arg_rows WHERE field IS NULL
                UNION ALL SELECT 'device_compute' UNION ALL SELECT 'host_preprocess'
            ) WHERE s IS NOT NULL AND s <> ''
        )""",
    )
    values = [""] + [None] * _sql(con, path, "SELECT count(*) FROM strs").fetchall()[0][0]
    t = _arrow(con, path, "SELECT id, s FROM strs")
    for i, s in zip(t.column("id").to_pylist(), t.column("s").to_pylist(), strict=True):
        values[i] = s
    d.strings = Interner(values, dict(zip(values, range(len(values)), strict=True)))


def _tracks(con, path: str, d: Decoded) -> dict[tuple[str, str], int]:
    """One track per (plane, line); a Kineto trace without GPUs: its op threads are the CPU device."""
    rows = _sql(
        con,
        path,
        """
        SELECT e.plane, l.line, min(e.i) AS first, bool_or(e.cat = 'cpu_op') AS ops
        FROM ev e JOIN ev_lines l USING (i) GROUP BY ALL ORDER BY first""",
    ).fetchall()
    cpu_device = not any(plane_kind(p)[0] != "host" for p, *_ in rows)
    d.tracks = Tracks()
    for plane, line, _, ops in rows:
        kind, chip, core = plane_kind(plane)
        if cpu_device and ops and line not in (STEPS_LINE, ANNOTATIONS_LINE):
            kind, chip, core = "cpu", 0, 0
        d.tracks(plane, line, kind, chip, core)
    t = [(tid, r["plane"], r["line"]) for r in d.tracks.rows for tid in [r["track_id"]]]
    con.execute("CREATE TABLE track_ids (track INTEGER, plane VARCHAR, line VARCHAR)")
    con.executemany("INSERT INTO track_ids VALUES (?, ?, ?)", t)
    return {(p, ln): tid for tid, p, ln in t}


def _event_columns(con, path: str, d: Decoded, tracks, typed: dict[str, str], n: int) -> dict[str, np.ndarray]:
    """The Decoded's events columns, in file order (event_id = position)."""
    typed_cols = ", ".join(
        f"max(CASE WHEN y.field = '{f}' THEN {'sv.id' if kind == 'str' else 'y.ival'} END) AS f_{f}"
        for f, kind in typed.items()
    )
    t = _sql(
        con,
        path,
        f"""
        CREATE TABLE ev_cols AS
        SELECT e.i, k.track, n.id AS name, p.start_ps::BIGINT AS start_ps, p.dur_ps::BIGINT AS dur_ps,
               pl.id AS plane_id, l.line = '{STEPS_LINE}' AS is_step_line,
               TRY_CAST(regexp_extract(e.name, '{_STEP_RE}', 1) AS INTEGER) AS profiler_step,
               coalesce(bool_or(y.step_num), false) AS has_step_num, {typed_cols}
        FROM ev e JOIN ev_lines l USING (i) JOIN ev_ps p USING (i)
        JOIN track_ids k ON k.plane = e.plane AND k.line = l.line
        LEFT JOIN strs n ON n.s = e.name JOIN strs pl ON pl.s = e.plane
        LEFT JOIN typed y USING (i) LEFT JOIN strs sv ON sv.s = y.sval
        GROUP BY ALL ORDER BY e.i""",
    )
    del t
    a = _arrow(con, path, "SELECT * FROM ev_cols ORDER BY i")
    col = {c: a.column(c).to_numpy(zero_copy_only=False) for c in a.column_names}

    def ints(c: str) -> np.ndarray:
        return a.column(c).cast(pa.int64()).fill_null(NULL).to_numpy().copy()

    ev = {
        "track": col["track"].astype(np.int32),
        "name": np.where(
            a.column("name").is_null().to_numpy(zero_copy_only=False), 0, a.column("name").fill_null(0).to_numpy()
        ).astype(np.int64),
        "start_ps": col["start_ps"].astype(np.int64),
        "dur_ps": col["dur_ps"].astype(np.int64),
        "plane_id": col["plane_id"].astype(np.int64),
        "is_step_line": col["is_step_line"].astype(bool),
        "only_marker": np.zeros(n, bool),
    }
    for f in typed:
        ev[f] = ints(f"f_{f}")
    prof = ints("profiler_step")
    ev["step"] = np.where(ev["is_step_line"] & (prof != NULL), prof, ev["step"])
    ev["has_step_num"] = col["has_step_num"].astype(bool) & (ev["step"] != NULL)
    return ev


def _categories(con, path: str, d: Decoded, ev: dict[str, np.ndarray], tracks) -> None:
    """On a Kineto CPU device: ops are device_compute, ops inside an input span host_preprocess
    (the rest is profiler/xspace/map_kinds.py's classify, by name, as for any capture)."""
    cpu_tracks = [r["track_id"] for r in d.tracks.rows if r["kind"] == "cpu"]
    if not cpu_tracks:
        return
    cat = _arrow(con, path, "SELECT cat = 'cpu_op' AS op FROM ev_cols c JOIN ev USING (i) ORDER BY i")
    is_op = cat.column("op").fill_null(False).to_numpy(zero_copy_only=False) & np.isin(ev["track"], cpu_tracks)
    uniq, inv = np.unique(ev["name"], return_inverse=True)
    named = np.array([bool(re.search(_INPUT_RE, d.strings.values[s])) for s in uniq.tolist()], bool)
    is_input = named[inv.ravel()] & np.isin(ev["track"], cpu_tracks)
    ev["category"][is_op & (ev["category"] == NULL)] = d.strings("device_compute")
    end = ev["start_ps"] + ev["dur_ps"]
    for t in cpu_tracks:  # per track: input spans sorted by start, each op looked up among them
        spans = np.flatnonzero(is_input & (ev["track"] == t))
        ops = np.flatnonzero(is_op & (ev["track"] == t))
        if not spans.size or not ops.size:
            continue
        spans = spans[np.argsort(ev["start_ps"][spans], kind="stable")]
        reach = np.maximum.accumulate(end[spans])  # the furthest end of any span starting before
        k = np.searchsorted(ev["start_ps"][spans], ev["start_ps"][ops], side="right") - 1
        inside = (k >= 0) & (end[ops] <= reach[np.maximum(k, 0)])
        ev["category"][ops[inside]] = d.strings("host_preprocess")


def _args(con, path: str, d: Decoded, typed: dict[str, str]) -> None:
    """Every arg not read into a typed column, and `cat`, as event_args rows."""
    t = _arrow(
        con,
        path,
        """
        SELECT c.rowid AS event_id, k.id AS key, a.ival AS int_value, a.dval AS double_value, v.id AS string_id
        FROM arg_rows a JOIN ev_cols c USING (i) JOIN strs k ON k.s = a.key LEFT JOIN strs v ON v.s = a.text
        WHERE a.field IS NULL
        UNION ALL
        SELECT c.rowid, (SELECT id FROM strs WHERE s = 'cat'), NULL, NULL, v.id
        FROM ev_cols c JOIN ev e USING (i) JOIN strs v ON v.s = e.cat
        ORDER BY event_id""",
    )
    if not len(t):
        return
    iv = t.column("int_value")
    d.args = {
        "event_id": [t.column("event_id").to_numpy().astype(np.int64)],
        "key": [t.column("key").to_numpy().astype(np.int64)],
        "int_value": [iv.fill_null(NULL).to_numpy().astype(np.int64)],
        "double_value": [t.column("double_value").fill_null(np.nan).to_numpy().astype(np.float64)],
        "string_id": [t.column("string_id").fill_null(0).to_numpy().astype(np.int64)],
    }


def _counters(con, path: str, d: Decoded, origin) -> None:
    """`C` events: one counter track per (plane, name and key), a sample per event and key."""
    _sql(
        con,
        path,
        """
        CREATE TABLE samples AS
        SELECT p.plane, CASE WHEN count(*) OVER (PARTITION BY r.rowid) = 1 THEN coalesce(r.name, 'counter')
                             ELSE coalesce(r.name, 'counter') || ' ' || j.key END AS counter,
               CAST(round((TRY_CAST(r.ts AS DECIMAL(38, 9)) - ?::DECIMAL(38, 9)) * 1000000) AS HUGEINT) AS ts_ps,
               TRY_CAST(j.value::VARCHAR AS DOUBLE) AS value, r.rowid AS i
        FROM raw r JOIN planes p USING (pid), json_each(r.args) j
        WHERE r.ph = 'C' AND json_type(r.args) = 'OBJECT' AND j.type IN ('BIGINT', 'UBIGINT', 'DOUBLE')""",
        [origin],
    )
    bad = _sql(con, path, f"SELECT min(i) FROM samples WHERE ts_ps IS NULL OR ts_ps < 0 OR ts_ps >= {MAX_TIME_PS}")
    if (i := bad.fetchall()[0][0]) is not None:
        raise TraceFormatError(f"{path}: event {i}: a counter sample's ts is missing or out of range")
    for plane, counter in _sql(con, path, "SELECT DISTINCT plane, counter FROM samples ORDER BY ALL").fetchall():
        track = d.tracks(plane, counter, "counter", plane_kind(plane)[1], -1)
        t = _arrow(
            con,
            path,
            "SELECT ts_ps::BIGINT AS ts, value FROM samples WHERE plane = ? AND counter = ? ORDER BY i",
            [plane, counter],
        )
        d.add_counter(track, t.column("ts").to_numpy(), t.column("value").to_numpy())

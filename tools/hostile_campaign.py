"""Hostile-input campaign: scprof tried as an attacker and a careless user would; what held.

Each case runs the real CLI (or the UI server) in a child process inside a scratch folder,
with a wall-clock limit, and checks what must hold for it:
- a refused input: exit 2 and one line on stderr (no traceback, no "internal error");
- an accepted one: exit 0 and the right result;
- always: nothing written outside the scratch folder's own places (names point into an
  `escape/` folder that must stay empty), the store byte-identical after a refused command,
  no temporary folder left behind (children get a private TMPDIR that must end empty),
  no hang (the limit), and for resource cases the child's peak RSS.
Cases are grouped in classes (docs/security.md's table): the first eight here, the rest (the
what-if commands, paths stored configs name, refusals that keep the store, outputs, damaged
stores and full disks) in _campaign_whatif_stores.py; the harness is _campaign_kit.py. Prints each
case that did not hold, a table per class, and as its last line one JSON object with the counts.

    python tools/hostile_campaign.py [--only CLASS ...] [--keep] [--verbose]
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from _campaign_kit import (
    Campaign,
    _tail,
    accepted,
    case,
    clean,
    refused,
    refuses_untouched,
    run_campaign,
)

from profiler.xspace import xplane_pb2 as xp

T0_NS = 1_700_000_000_000_000_000


# -- names become paths ----------------------------------------------------------------------

ESCAPING_NAMES = [
    "../../escape/n1",
    "../../../../../../../../tmp/../" + "x" * 3,
    "/abs/../escape",
    "..",
    ".",
    "x" * 5000,
    "~root",
    "con\\..\\..\\escape",
]


for i, hostile in enumerate(ESCAPING_NAMES):

    @case("names-as-paths", f"record --name {hostile!r}")
    def _record_name(c: Campaign, hostile: str = hostile, i: int = i) -> str | None:
        res = c.cli("record", str(c.small), "--name", hostile, "--replace", timeout=120)
        problem = clean(res)
        written = [p for p in c.root.rglob("*") if p.is_file() and not p.is_relative_to(c.ws)]
        written = [p for p in written if not p.is_relative_to(c.tmp)]
        outside = [p for p in (c.ws.rglob("*")) if p.is_file() and "runs" not in p.relative_to(c.ws).parts[:1]]
        outside = [p for p in outside if p.name not in ("scprof.duckdb", "small.toml") and p.suffix != ".toml"]
        if written or outside:
            return f"wrote outside runs/: {[str(p) for p in written + outside][:3]}"
        return problem


@case("names-as-paths", "config name = '../../escape/cfg'")
def _config_name(c: Campaign) -> str | None:
    cfg = c.ws / "evil.toml"
    cfg.write_text(f'extends = "{c.small}"\nname = "../../escape/cfg"\n')
    res = c.cli("record", str(cfg), timeout=120)
    if any(c.escape.rglob("*")):
        return f"wrote into escape/: {[str(p) for p in c.escape.rglob('*')][:3]}"
    return clean(res)


def _space_named(run_name: str) -> bytes:
    """A small TPU capture whose /host:scprof plane names the run `run_name`."""
    space = xp.XSpace(hostnames=["h"])
    tc = space.planes.add(id=1, name="/device:TPU:0")
    tc.event_metadata[1].id, tc.event_metadata[1].name = 1, "fusion"
    tc.stat_metadata[1].id, tc.stat_metadata[1].name = 1, "group_id"
    line = tc.lines.add(id=1, name="XLA Ops", timestamp_ns=T0_NS)
    for s in range(3):
        ev = line.events.add(metadata_id=1, offset_ps=s * 1_000_000, duration_ps=500_000)
        ev.stats.add(metadata_id=1, int64_value=s)
    facts = space.planes.add(id=99, name="/host:scprof")
    facts.stat_metadata[1].id, facts.stat_metadata[1].name = 1, "run_name"
    facts.stats.add(metadata_id=1, str_value=run_name)
    return space.SerializeToString()


for hostile in ("../../escape/imported", "../../../../../../../../../tmp/scprof-escape-probe", "a/b\\c\x00d"):

    @case("names-as-paths", f"UI Perfetto download of an imported run named {hostile!r}")
    def _ui_download(c: Campaign, hostile: str = hostile) -> str | None:
        path = c.ws / "named.xplane.pb"
        path.write_bytes(_space_named(hostile))
        res = c.cli("ingest", str(path), "--replace")
        if res.rc != 0:
            return clean(res)  # refusing the name at import also holds
        probe = Path("/tmp/scprof-escape-probe.perfetto-trace")
        probe.unlink(missing_ok=True)
        with UiServer(c) as ui:
            runs = json.loads(c.cli("runs", "--json").out)
            run_id = next(r["run_id"] for r in runs if r["name"] == hostile)
            status, body = ui.get(f"/download/perfetto?run={run_id}")
        written = [str(p) for p in c.escape.rglob("*")] + ([str(probe)] if probe.exists() else [])
        probe.unlink(missing_ok=True)
        if written:
            return f"wrote {written}"
        if status != 200 or not body:
            return f"download gave HTTP {status}"
        return None


# -- commands destroy what they did not make ---------------------------------------------------


def _export_targets(c: Campaign) -> dict[str, Path]:
    link = c.ws / "link.out"
    link.unlink(missing_ok=True)
    link.symlink_to(c.db)
    hard = c.ws / "hard.out"
    hard.unlink(missing_ok=True)
    os.link(c.db, hard)
    return {
        "the store": c.db,
        "the store's WAL": Path(str(c.db) + ".wal"),
        "a symlink to the store": link,
        "a hard link to the store": hard,
        "the run's source trace": c.trace,
        "the store via ./x/../": c.ws / "runs" / ".." / "scprof.duckdb",
    }


for fmt in ("perfetto", "xspace"):
    for what in (
        "the store",
        "the store's WAL",
        "a symlink to the store",
        "a hard link to the store",
        "the run's source trace",
        "the store via ./x/../",
    ):

        @case("destroy", f"export {fmt} -o {what} --check")
        def _export_onto(c: Campaign, fmt: str = fmt, what: str = what) -> str | None:
            target = _export_targets(c)[what]
            trace_before = c.trace.read_bytes()
            problem = refuses_untouched(c, "export", fmt, "small", "-o", str(target), "--check")
            if c.trace.read_bytes() != trace_before:
                problem = "the source trace changed"
            if what == "the store's WAL" and target.exists():
                problem = "a WAL file was written next to the store"
            return problem


@case("destroy", "record an existing name without --replace")
def _record_again(c: Campaign) -> str | None:
    before = c.trace.read_bytes()
    problem = refuses_untouched(c, "record", str(c.small), timeout=120)
    if c.trace.read_bytes() != before:
        return "the existing run's trace file was overwritten"
    return problem


@case("destroy", "ingest --replace of a missing file")
def _ingest_missing(c: Campaign) -> str | None:
    return refuses_untouched(c, "ingest", "nothing-here.sctrace", "--replace")


# -- SQL guard --------------------------------------------------------------------------------

REFUSED_SQL = [
    "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN CREATE TABLE t AS SELECT 1",
    "explain /* hidden */ analyze insert into runs select * from runs",
    "UPDATE EXTENSIONS",
    "ATTACH 'other.duckdb' AS o",
    "DETACH scprof",
    "COPY (SELECT 1) TO 'out.csv'",
    "EXPORT DATABASE 'dump'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET memory_limit = '100GB'",
    "RESET memory_limit",
    "PRAGMA enable_external_access",
    "CHECKPOINT",
    "VACUUM",
    "DROP TABLE runs",
    "DELETE FROM runs",
    "UPDATE runs SET name = 'x'",
    "INSERT INTO runs SELECT * FROM runs",
    "CREATE MACRO m(x) AS x",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE SECRET s (TYPE s3)",
    "USE memory",
    "BEGIN TRANSACTION",
    "SELECT 1; DROP TABLE runs",
    "SELECT 1; SELECT 2",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM parquet_scan('/tmp/x.parquet')",
    "SELECT * FROM duckdb_extensions() WHERE installed AND NOT loaded AND load_extension(extension_name)",
    "CALL enable_logging()",
    "SELECT getenv('HOME')",
    "SELECT * FROM read_json_auto('/etc/passwd')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "FROM duckdb_secrets()",
    "SELECT * FROM read_parquet('http://127.0.0.1:1/x.parquet')",
    "EXPLAIN (FORMAT json) ANALYZE DELETE FROM runs",
    "WITH x AS (SELECT 1) DELETE FROM runs",
    "PIVOT runs ON name",
]


for sql in REFUSED_SQL:

    @case("sql", f"refuse {sql!r}")
    def _sql_refused(c: Campaign, sql: str = sql) -> str | None:
        problem = refuses_untouched(c, "sql", sql, timeout=30)
        if problem is None and any(p.name in ("x.csv", "out.csv", "dump") for p in c.ws.iterdir()):
            problem = "a file was written"
        return problem


for sql in ("SELECT count(*) FROM slices", "SUMMARIZE runs", "DESCRIBE runs", "EXPLAIN ANALYZE SELECT 1"):

    @case("sql", f"accept {sql!r}")
    def _sql_ok(c: Campaign, sql: str = sql) -> str | None:
        return accepted(c.cli("sql", sql, timeout=30))


RUNAWAY_SQL = [
    "SELECT length(repeat('x', 2000000000))",
    "SELECT count(*) FROM range(10000000000000)",
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)",
    "SELECT count(*) FROM slices a, slices b, slices c",
    "SELECT list_sum(range(3000000000))",
]


for sql in RUNAWAY_SQL:

    @case("sql", f"--timeout 5 stops {sql!r}")
    def _sql_runaway(c: Campaign, sql: str = sql) -> str | None:
        res = c.cli("sql", sql, "--timeout", "5", timeout=60)
        if res.rc is None:
            return "hung"
        if res.wall_s > 12:
            return f"took {res.wall_s:.1f} s against a 5 s limit"
        if res.peak_rss_bytes > 2.5 * 2**30:
            return f"peak RSS {res.peak_rss_bytes / 2**30:.1f} GiB against the 1 GB cap"
        return clean(res)  # stopped at the limit (exit 2), or done within it


for sql in ("SELECT repeat('x', 100000000) AS s FROM range(100)", "SELECT repeat('y', 10000000) FROM range(1000)"):

    @case("sql", f"wide result {sql!r}")
    def _sql_wide(c: Campaign, sql: str = sql) -> str | None:
        res = c.cli("sql", sql, "--format", "csv", timeout=120)
        if res.rc is None:
            return "hung"
        if res.peak_rss_bytes > 3 * 2**30:
            return f"peak RSS {res.peak_rss_bytes / 2**30:.1f} GiB"
        return clean(res)


for flag, value in (
    ("--timeout", "inf"),
    ("--timeout", "nan"),
    ("--timeout", "0"),
    ("--timeout", "-1"),
    ("--timeout", "1e309"),
    ("--max-rows", "0"),
    ("--max-rows", "-5"),
    ("--max-rows", "1000000000000"),
    ("--max-rows", "1" + "0" * 30),
):

    @case("sql", f"sql {flag} {value}")
    def _sql_flag(c: Campaign, flag: str = flag, value: str = value) -> str | None:
        return refuses_untouched(c, "sql", "SELECT 1", flag, value, mention=flag)


# -- untrusted captures ------------------------------------------------------------------------


def _space(**over) -> xp.XSpace:
    """One TPU plane, a Steps line and an XLA Ops line with typed stats; `over` spoils one value."""
    space = xp.XSpace(hostnames=["h"])
    p = space.planes.add(id=1, name=over.get("plane", "/device:TPU:0"))
    names = ["group_id", "flops", "bytes_accessed", "ids", "step_num"]
    for i, n in enumerate(names, 1):
        p.stat_metadata[i].id, p.stat_metadata[i].name = i, n
    for i, n in enumerate((over.get("step_name", "0"), "fusion", "SparseDenseMatmulOp"), 1):
        p.event_metadata[i].id, p.event_metadata[i].name = i, n
    steps = p.lines.add(id=1, name="Steps", timestamp_ns=over.get("ts_ns", T0_NS))
    ops = p.lines.add(id=2, name="XLA Ops", timestamp_ns=over.get("ts_ns", T0_NS))
    for s in range(3):
        ev = steps.events.add(metadata_id=1, offset_ps=s * 10**9, duration_ps=10**9 - 10)
        ev.stats.add(metadata_id=1, int64_value=over.get("group_id", s))
        op = ops.events.add(
            metadata_id=2, offset_ps=s * 10**9 + over.get("offset_ps", 0), duration_ps=over.get("dur_ps", 10**6)
        )
        op.stats.add(metadata_id=1, int64_value=s)
        if "flops_str" in over:
            op.stats.add(metadata_id=2, str_value=over["flops_str"])
        else:
            op.stats.add(metadata_id=2, int64_value=1000)
        if "ids" in over:
            op.stats.add(metadata_id=4, uint64_value=over["ids"])
    if "facts" in over:
        f = space.planes.add(id=99, name="/host:scprof")
        for i, (k, v) in enumerate(over["facts"].items(), 1):
            f.stat_metadata[i].id, f.stat_metadata[i].name = i, k
            f.stats.add(metadata_id=i, str_value=v)
    return space


HOSTILE_CAPTURES: dict[str, Callable[[], bytes]] = {
    "line timestamp near 2^62 ns": lambda: _space(ts_ns=2**62).SerializeToString(),
    "line timestamp 2^63-1 ns": lambda: _space(ts_ns=2**63 - 1).SerializeToString(),
    "negative line timestamp": lambda: _space(ts_ns=-(2**62)).SerializeToString(),
    "duration 2^63-1 ps": lambda: _space(dur_ps=2**63 - 1).SerializeToString(),
    "negative duration": lambda: _space(dur_ps=-5).SerializeToString(),
    "offset 2^63-1 ps": lambda: _space(offset_ps=2**63 - 1 - 3 * 10**9).SerializeToString(),
    "ids 2^64-1": lambda: _space(ids=2**64 - 1).SerializeToString(),
    "group id 2^40": lambda: _space(group_id=2**40).SerializeToString(),
    "group id -2^63": lambda: _space(group_id=-(2**63)).SerializeToString(),
    "chip id 2^40": lambda: _space(plane="/device:TPU:1099511627776").SerializeToString(),
    "SparseCore id 2^40": lambda: _space(plane="/device:TPU:0 SparseCore 1099511627776").SerializeToString(),
    "chip id of 400 digits": lambda: _space(plane="/device:TPU:" + "9" * 400).SerializeToString(),
    "string-typed flops": lambda: _space(flops_str="lots").SerializeToString(),
    "malformed JSON facts": lambda: _space(facts={"run_name": "x", "hardware_json": "{not json"}).SerializeToString(),
    "JSON facts of the wrong shape": lambda: _space(facts={"hardware_json": "[1, 2]"}).SerializeToString(),
    "JSON facts with a huge number": lambda: _space(
        facts={"hardware_json": '{"num_chips": 1e400}'}
    ).SerializeToString(),
    "start_time not a number": lambda: _space(facts={"start_time_unix_ns": "soon"}).SerializeToString(),
    "step name 'step 1e999'": lambda: _space(step_name="step 1e999").SerializeToString(),
    "step name of 10,000 digits": lambda: _space(step_name="9" * 10_000).SerializeToString(),
    "step name with control chars": lambda: _space(step_name="\x1b[2J\n0").SerializeToString(),
    "capture appended to itself": lambda: _space().SerializeToString() * 2,
    "random bytes": lambda: os.urandom(4096),
    "empty file": lambda: b"",
    "truncated capture": lambda: _space().SerializeToString()[:-7],
    "varint of 11 bytes": lambda: b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    "length prefix 2^62": lambda: b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x3f",
}


for label, make in HOSTILE_CAPTURES.items():

    @case("captures", f"ingest: {label}")
    def _capture(c: Campaign, label: str = label, make: Callable[[], bytes] = make) -> str | None:
        path = c.ws / "hostile.xplane.pb"
        path.write_bytes(make())
        before = c.store_digest()
        res = c.cli("ingest", str(path), "--name", "hostile", "--replace", timeout=60)
        if res.rc == 2:
            return refused(res) or (None if c.store_digest() == before else "refused, yet the store changed")
        if (problem := accepted(res)) is not None:
            return problem
        return _imported_values_sane(c, label)


def _imported_values_sane(c: Campaign, label: str) -> str | None:
    """An import that was accepted stored what the file said (or refused it), never a wrapped value."""
    q = (
        "SELECT count(*) FILTER (WHERE dur_ps < 0) AS neg_dur, count(*) FILTER (WHERE ids < 0) AS neg_ids, "
        "count(*) AS n FROM slices WHERE run_id = (SELECT run_id FROM runs WHERE name = 'hostile')"
    )
    res = c.cli("sql", q, "--format", "json")
    if res.rc != 0:
        return f"imported, but the run cannot be queried: {_tail(res.err)}"
    row = json.loads(res.out)[0]
    if row["neg_dur"] or row["neg_ids"]:
        return f"stored wrong values: {row}"
    if label == "capture appended to itself" and row["n"] > 6:
        return f"every event imported twice ({row['n']} slices for 6 events)"
    if label == "negative duration":
        return "a negative duration was accepted silently" if "warn" not in res.err.lower() else None
    return None


@case("captures", "ingest a FIFO")
def _fifo(c: Campaign) -> str | None:
    fifo = c.ws / "pipe.xplane.pb"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    return refuses_untouched(c, "ingest", str(fifo), timeout=20)


for special in ("/dev/zero", "/dev/urandom", "/dev/null"):

    @case("captures", f"ingest {special}")
    def _device(c: Campaign, special: str = special) -> str | None:
        return refuses_untouched(c, "ingest", special, timeout=20)


@case("captures", "ingest a 100 GiB sparse capture")
def _sparse(c: Campaign) -> str | None:
    path = c.ws / "huge.xplane.pb"
    with open(path, "wb") as f:
        f.truncate(100 * 2**30)
    try:
        res = c.cli("ingest", str(path), timeout=30)
    finally:
        path.unlink()
    return refused(res) or (None if res.peak_rss_bytes < 2**30 else f"peak RSS {res.peak_rss_bytes >> 20} MiB")


@case("captures", "ingest a symlink to /dev/zero named .xplane.pb")
def _link_to_device(c: Campaign) -> str | None:
    link = c.ws / "zero.xplane.pb"
    link.unlink(missing_ok=True)
    link.symlink_to("/dev/zero")
    return refuses_untouched(c, "ingest", str(link), timeout=20)


@case("captures", "ingest a run directory holding a FIFO capture")
def _fifo_in_dir(c: Campaign) -> str | None:
    d = c.ws / "rundir" / "plugins" / "profile" / "r1"
    d.mkdir(parents=True, exist_ok=True)
    (d / "h.xplane.pb").unlink(missing_ok=True)
    os.mkfifo(d / "h.xplane.pb")
    return refuses_untouched(c, "ingest", str(c.ws / "rundir"), timeout=20)


@case("captures", "ingest a FIFO named .sctrace")
def _fifo_trace(c: Campaign) -> str | None:
    fifo = c.ws / "pipe.sctrace"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    return refuses_untouched(c, "ingest", str(fifo), timeout=20)


@case("captures", "ingest one capture twice on the command line")
def _twice(c: Campaign) -> str | None:
    path = c.ws / "twice.xplane.pb"
    path.write_bytes(_space().SerializeToString())
    res = c.cli("ingest", str(path), str(path), "--name", "twice", "--replace")
    if res.rc == 2:
        return refused(res)
    n = c.cli(
        "sql", "SELECT count(*) AS n FROM slices JOIN runs USING (run_id) WHERE runs.name = 'twice'", "--format", "json"
    )
    got = json.loads(n.out)[0]["n"] if n.rc == 0 else None
    return None if got == 6 else f"exit {res.rc}; {got} slices for 6 events"


# -- hangs and absurd sizes ---------------------------------------------------------------------

ABSURD_SETTINGS = [
    "steps=100000000000000000000",
    "steps=1000000000",
    "features.cat_0.multi_hot=1000000000",
    "features.cat_0.zipf_exponent=nan",
    "features.cat_0.zipf_exponent=inf",
    "hardware.host_to_device_bandwidth_bytes_per_s=inf",
    "hardware.ici_bandwidth_bytes_per_s=nan",
    "hardware.hbm_bandwidth_bytes_per_s=1e-300",
    "host.num_threads=1000000",
    "global_batch=1000000000000",
    "tables.t0.vocab=1000000000000000000",
    "tables.t0.width=1000000000",
    "hardware.num_chips=1000000",
    "sparsecore.max_ids_per_partition=-1",
    "seed=-1",
    "cost.host_ps_per_id=nan",
]


for setting in ABSURD_SETTINGS:

    @case("hangs-sizes", f"record --set {setting}")
    def _absurd(c: Campaign, setting: str = setting) -> str | None:
        key = setting.split("=")[0].split(".")[-1]
        key = None if key == "num_chips" else key  # the batch no longer divides: that line names global_batch
        return refuses_untouched(
            c, "record", str(c.small), "--set", setting, "--name", "absurd", mention=key, timeout=40
        )


@case("hangs-sizes", "record --steps 10000000000")
def _steps_flag(c: Campaign) -> str | None:
    return refuses_untouched(c, "record", str(c.small), "--steps", "10000000000", "--name", "absurd", timeout=40)


# -- exit 1 where the user is at fault ---------------------------------------------------------


def _bad_inputs(c: Campaign) -> dict[str, tuple[list[str], str | None]]:
    (c.ws / "cfgdir").mkdir(exist_ok=True)
    (c.ws / "latin1.toml").write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    (c.ws / "extends_dir.toml").write_text('extends = "cfgdir"\nname = "x"\n')
    (c.ws / "loop_a.toml").write_text('extends = "loop_b.toml"\n')
    (c.ws / "loop_b.toml").write_text('extends = "loop_a.toml"\n')
    (c.ws / "notastore.duckdb").write_text("hello")
    (c.ws / "outdir").mkdir(exist_ok=True)
    return {
        "config is a directory": (["record", "cfgdir"], "cfgdir"),
        "config is not UTF-8": (["record", "latin1.toml"], "latin1.toml"),
        "config missing": (["record", "missing.toml"], "missing.toml"),
        "extends a directory": (["record", "extends_dir.toml"], "cfgdir"),
        "extends in a loop": (["record", "loop_a.toml"], "loop_"),
        "--perf-tables a file": (
            ["record", str(c.small), "--perf-tables", str(c.small), "--name", "p"],
            "--perf-tables",
        ),
        "export -o a directory": (["export", "perfetto", "small", "-o", "outdir"], "outdir"),
        "export -o in a missing directory": (["export", "perfetto", "small", "-o", "no/such/dir/x.pftrace"], "no/such"),
        "export -o unwritable (/proc)": (["export", "xspace", "small", "-o", "/proc/version"], "/proc/version"),
        "record --out a file": (["record", str(c.small), "--out", str(c.small), "--name", "o"], None),
        "record --out unwritable (/proc)": (["record", str(c.small), "--out", "/proc/scprof", "--name", "o"], None),
        "--db a directory": (["runs", "--db", "outdir"], "outdir"),
        "--db not a store": (["runs", "--db", "notastore.duckdb"], "notastore.duckdb"),
        "ingest a directory without traces": (["ingest", "outdir"], "outdir"),
        "sql --max-rows too large": (["sql", "SELECT 1", "--max-rows", "99999999999999"], "--max-rows"),
        "analyze an unknown run": (["analyze", "no-such-run"], "no-such-run"),
        "export --steps backwards": (["export", "perfetto", "small", "-o", "x.pftrace", "--steps", "5:2"], "--steps"),
        "ui on a port in use": (["ui", "--port", "{busy_port}"], "port"),
        "ui on an unresolvable host": (["ui", "--host", "no-such-host.invalid", "--port", "{free_port}"], "host"),
        "ui --port 0": (["ui", "--port", "0"], "--port"),
    }


for label in (
    "config is a directory",
    "config is not UTF-8",
    "config missing",
    "extends a directory",
    "extends in a loop",
    "--perf-tables a file",
    "export -o a directory",
    "export -o in a missing directory",
    "export -o unwritable (/proc)",
    "record --out a file",
    "record --out unwritable (/proc)",
    "--db a directory",
    "--db not a store",
    "ingest a directory without traces",
    "sql --max-rows too large",
    "analyze an unknown run",
    "export --steps backwards",
    "ui on a port in use",
    "ui on an unresolvable host",
    "ui --port 0",
):

    @case("exit-codes", label)
    def _bad(c: Campaign, label: str = label) -> str | None:
        argv, mention = _bad_inputs(c)[label]
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            argv = [a.format(busy_port=busy.getsockname()[1], free_port=_free_port()) for a in argv]
            return refuses_untouched(c, *argv, mention=mention, timeout=30)


# -- exposure -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UiServer:
    """`scprof ui` in a child process; get/post against it."""

    def __init__(self, c: Campaign, host: str = "127.0.0.1", extra: tuple[str, ...] = ()):
        self.c, self.port = c, _free_port()
        self.argv = [sys.executable, "-m", "scprof.cli", "ui", "--host", host, "--port", str(self.port), *extra]
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = ""
        self.new_session()

    def new_session(self) -> None:
        """A browser without cookies (each case starts as a stranger)."""
        import http.cookiejar

        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def __enter__(self) -> UiServer:
        self.log = open(self.c.root / "ui.log", "w+b")  # noqa: SIM115 - closed in __exit__
        self.p = subprocess.Popen(
            self.argv,
            cwd=self.c.ws,
            env=self.c.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(300):
            time.sleep(0.1)
            self.log.seek(0)
            text = self.log.read().decode(errors="replace")
            if m := re.search(r"token=([A-Za-z0-9_\-]+)", text):
                self.token = m[1]
            try:
                urllib.request.urlopen(self.base + "/_dash-layout", timeout=2)
                return self
            except urllib.error.HTTPError:
                return self  # up, and refusing us
            except OSError:
                if self.p.poll() is not None:
                    raise RuntimeError(f"ui exited: {text[-300:]}") from None
        raise RuntimeError("ui did not start in 30 s")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def get(self, path: str, headers: dict | None = None) -> tuple[int, bytes]:
        return self._do(urllib.request.Request(self.base + path, headers=headers or {}))

    def post(self, path: str, body: object, headers: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        return self._do(urllib.request.Request(self.base + path, data=data, headers=h))

    def _do(self, req: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with self.opener.open(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def __exit__(self, *exc: object) -> None:
        os.killpg(self.p.pid, signal.SIGTERM)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.log.close()


@case("exposure", "ui --host 0.0.0.0 warns and needs a token")
def _off_loopback(c: Campaign) -> str | None:
    with UiServer(c, "0.0.0.0") as ui:
        out = ui.output()
        if "warn" not in out.lower():
            return "no warning printed"
        if not ui.token:
            return "no token printed"
        for path in ("/", "/runs", "/_dash-layout", "/_dash-dependencies", "/download/sql.csv?q=SELECT%201"):
            status, _ = ui.get(path)
            if status not in (401, 403):
                return f"GET {path} without a token gave HTTP {status}"
        status, _ = ui.post("/_dash-update-component", {"output": "page.children", "inputs": []})
        if status not in (401, 403):
            return f"a callback without a token gave HTTP {status}"
        status, _ = ui.get(f"/runs?token=wrong{ui.token}")
        if status not in (401, 403):
            return f"a wrong token gave HTTP {status}"
        status, _ = ui.get(f"/runs?token={ui.token}")
        if status != 200:
            return f"the right token gave HTTP {status}"
        status, _ = ui.get("/_dash-layout")  # then its cookie alone
        if status != 200:
            return f"the token's cookie gave HTTP {status}"
    return None


@case("exposure", "ui --host 0.0.0.0 --token T accepts only T")
def _given_token(c: Campaign) -> str | None:
    with UiServer(c, "0.0.0.0", ("--token", "correct-horse-battery")) as ui:
        if ui.get("/runs?token=correct-horse-battery")[0] != 200:
            return "the given token was refused"
        ui.new_session()
        if ui.get("/runs?token=correct-horse")[0] not in (401, 403):
            return "a prefix of the token was accepted"
    return None


@case("exposure", "UI on loopback: path traversal and a foreign Host header")
def _traversal(c: Campaign) -> str | None:
    with UiServer(c) as ui:
        for path in (
            "/assets/../../../../etc/passwd",
            "/assets/..%2f..%2f..%2fetc%2fpasswd",
            "/_dash-component-suites/../../etc/passwd",
        ):
            status, body = ui.get(path)
            if b"root:" in body:
                return f"GET {path} served /etc/passwd"
        status, _ = ui.get("/runs", headers={"Host": "evil.example:80"})
        if status not in (400, 401, 403):
            return f"a foreign Host header (DNS rebinding) gave HTTP {status}"
        status, _ = ui.get("/download/sql.csv?q=COPY%20runs%20TO%20%27x.csv%27")
        if status != 400:
            return f"a write through the CSV download gave HTTP {status}"
    return None


FORGED_VALUES = [
    None,
    0,
    -1,
    2**70,
    1e308,
    "",
    "x" * 200_000,
    "../../etc/passwd",
    [],
    [1, [2, [3]]],
    {"a": {"b": 1}},
    True,
]


@case("exposure", "forged callback inputs never give HTTP 500")
def _forged(c: Campaign) -> str | None:
    with UiServer(c) as ui:
        status, body = ui.get("/_dash-dependencies")
        if status != 200:
            return f"/_dash-dependencies gave HTTP {status}"
        deps = json.loads(body)
        failures, tried = [], 0
        for dep in deps:
            for value in FORGED_VALUES:
                payload = {
                    "output": dep["output"],
                    "outputs": _outputs_of(dep["output"]),
                    "inputs": [{**i, "value": value} for i in dep["inputs"]],
                    "state": [{**s, "value": value} for s in dep.get("state", [])],
                    "changedPropIds": [f"{_id_text(i['id'])}.{i['property']}" for i in dep["inputs"][:1]],
                }
                tried += 1
                status, _ = ui.post("/_dash-update-component", payload)
                if status >= 500:
                    failures.append(f"{dep['output'][:40]} <- {str(value)[:20]}: HTTP {status}")
        c.forged_tried = tried  # type: ignore[attr-defined]
        return f"{len(failures)} of {tried} gave 5xx, e.g. {failures[:3]}" if failures else None


def _id_text(i: object) -> str:
    return json.dumps(i, separators=(",", ":"), sort_keys=True) if isinstance(i, dict) else str(i)


def _outputs_of(output: str) -> list[dict] | dict:
    parts = [p for p in output.strip(".").split("...") if p]
    outs = []
    for p in parts:
        ident, _, prop = p.rpartition(".")
        outs.append({"id": json.loads(ident) if ident.startswith("{") else ident, "property": prop})
    return outs if output.startswith("..") else outs[0]


for hostile in ("line1\nline2", "\x1b[2J\x1b[31mred", "bell\x07", "c1\x9b31m", "del\x7f"):

    @case("exposure", f"control characters in a run name {hostile!r} are escaped in the terminal")
    def _control(c: Campaign, hostile: str = hostile) -> str | None:
        res = c.cli("record", str(c.small), "--name", hostile, "--replace", timeout=120)
        if res.rc != 0:
            return clean(res)
        shown = c.cli("runs").out + c.cli("analyze", hostile).out + res.out
        if hostile in shown or any(ch in shown for ch in hostile if ch not in "\n" and _control(ch)):
            return f"printed raw: {sorted({hex(ord(ch)) for ch in hostile if _control(ch)})}"
        err = c.cli("analyze", hostile + "-missing").err.rstrip("\n")
        if hostile in err or any(ch in err for ch in hostile if _control(ch)):
            return "printed raw in an error line"
        return None


def _control(ch: str) -> bool:
    return ord(ch) < 32 or 127 <= ord(ch) < 160


# -- crash mid-record -------------------------------------------------------------------------


@case("crash-mid-record", "SIGKILL 20 s into a 2,000-step record keeps the finished chunks")
def _crash(c: Campaign) -> str | None:
    out = c.ws / "runs" / "crash"
    p = subprocess.Popen(
        [sys.executable, "-m", "scprof.cli", "record", str(c.small), "--steps", "2000", "--name", "crash"],
        cwd=c.ws,
        env=c.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(20)
    if p.poll() is not None:
        return "the record finished before the kill"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    files = [f for f in out.rglob("*") if f.is_file()] if out.exists() else []
    if not files:
        return "nothing left on disk"
    res = c.cli("ingest", str(max(files, key=lambda f: f.stat().st_size)), "--allow-truncated", "--name", "crash")
    if res.rc != 0:
        return f"the partial trace does not ingest: {_tail(res.err)}"
    n = json.loads(
        c.cli(
            "sql",
            "SELECT count(*) AS n FROM slices JOIN runs USING (run_id) WHERE runs.name = 'crash'",
            "--format",
            "json",
        ).out
    )[0]["n"]
    return None if n > 0 else "the partial trace holds no events"


if __name__ == "__main__":
    import _campaign_whatif_stores  # noqa: F401  (registers its cases after these)

    counts = run_campaign(__doc__.splitlines()[0])
    total = {"tried": sum(t["tried"] for t in counts.values()), "held": sum(t["held"] for t in counts.values())}
    print(json.dumps({"benchmark": "hostile_campaign", "classes": counts, **total}))

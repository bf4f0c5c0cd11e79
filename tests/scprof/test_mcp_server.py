"""`scprof mcp` (scprof/mcp_server.py) driven by the SDK's own client over stdio, as an agent's client
drives it: the tool list and schemas, each read tool's structured result against the CLI's `--json`
on the same store (emulated runs, a failed run, a real capture without steps), refusals as one-line
tool errors with the store's bytes unchanged, and a scripted agent session.

One server process serves each group of calls (CALLS): starting one costs about a second of imports.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK (a dependency of `scprof mcp`) is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from analyzers import materialize  # noqa: E402
from profiler.schema import markdown  # noqa: E402
from profiler.store import Store  # noqa: E402
from profiler.trace_to_store import ingest_trace  # noqa: E402
from scprof.mcp_server import MAX_RESULT_BYTES, guide_text  # noqa: E402
from tests.tracekit import REPO, cli, record_into  # noqa: E402

CAPTURE = REPO / "tests" / "data" / "wild" / "tpu_v6e_inference" / "tpu_inference_2.xplane.pb"
RUNS = ("baseline", "host_bound", "spmem_overflow", "tpu_inference_2")  # ok, ok, failed, a capture without steps
READ_TOOLS = {
    "list_runs",
    "run_summary",
    "analyze",
    "compare",
    "top_ops",
    "find_events",
    "sql",
    "timeline_link",
    "compare_link",
    "events",
    "step_breakdown",
}

# name -> (tool, arguments): every call the read-only server answers in one session
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "runs": ("list_runs", {}),
    **{f"analyze {r}": ("analyze", {"run": r}) for r in RUNS},
    **{f"summary {r}": ("run_summary", {"run": r}) for r in RUNS},
    "compare": ("compare", {"base": "baseline", "cand": "host_bound"}),
    "compare by id": ("compare", {"base": "1", "cand": "2"}),
    "top_ops": ("top_ops", {"run": "baseline"}),
    "top_ops step 1 chip 0": ("top_ops", {"run": "baseline", "steps": "1:2", "chip": 0, "limit": 1000}),
    "top_ops capture": ("top_ops", {"run": "tpu_inference_2", "limit": 5}),
    "find": ("find_events", {"run": "baseline", "name": "MATMUL", "limit": 5}),
    "find in window": ("find_events", {"run": "baseline", "name": "matmul", "t0_ps": 0, "t1_ps": 10**9, "limit": 1000}),
    "sql": ("sql", {"query": "SELECT run_id, name, status, events FROM runs ORDER BY run_id"}),
    "sql rows cap": ("sql", {"query": "SELECT range AS i FROM range(5000)", "max_rows": 100}),
    "sql bytes cap": ("sql", {"query": "SELECT range AS i, repeat('x', 2000) AS s FROM range(2000)", "max_rows": 5000}),
    "timeline_link": ("timeline_link", {"run": "host_bound", "steps": "1:3"}),
    "compare_link": ("compare_link", {"base": "baseline", "cand": "host_bound"}),
    # refusals
    "verify refused": ("analyze", {"run": "host_bound", "verify": True}),
    "sql ddl": ("sql", {"query": "CREATE TABLE t AS SELECT 1"}),
    "sql write": ("sql", {"query": "DELETE FROM runs"}),
    "sql two statements": ("sql", {"query": "SELECT 1; SELECT 2"}),
    "sql attach": ("sql", {"query": "ATTACH 'other.duckdb'"}),
    "sql max_rows": ("sql", {"query": "SELECT 1", "max_rows": 10_000_000}),
    "sql unknown column": ("sql", {"query": "SELECT name FROM events"}),
    "unknown run": ("analyze", {"run": "no_such_run"}),
    "compare without steps": ("compare", {"base": "baseline", "cand": "tpu_inference_2"}),
    "bad steps": ("top_ops", {"run": "baseline", "steps": "3:1"}),
    "bad window": ("timeline_link", {"run": "baseline", "t0_ps": 5}),
    "find nothing": ("find_events", {"run": "baseline", "name": " "}),
    "ingest not offered": ("ingest", {"paths": [str(CAPTURE)]}),
}


def last_bits(value: Any) -> Any:
    """`value` with every float rounded to 12 significant digits: two computations of one figure
    (a server's and the CLI's) agree to the last bits only, as DuckDB sums doubles in parallel."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: last_bits(v) for k, v in value.items()}
    if isinstance(value, list):
        return [last_bits(v) for v in value]
    return value


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store_db(tmp_path_factory) -> Path:
    """Two emulated runs of 7 steps (5 counted: enough for a step-time interval), a failed one (a compile error) and a real capture without steps,
    each with its stored analysis, as `scprof record` / `ingest` store them."""
    d = tmp_path_factory.mktemp("mcp")
    db = d / "store.duckdb"
    with Store.open(str(db)) as store:
        for config in RUNS[:3]:
            run_id = record_into(store, str(REPO / "configs" / f"{config}.toml"), config, 7, str(d / config))
            materialize.build(store, run_id)
        materialize.build(store, ingest_trace(store, str(CAPTURE)).run_id)
    return db


def _server(db: Path, *flags: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SCPROF_DB", None)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "scprof.cli", "mcp", "--db", str(db), *flags], env=env, cwd=str(db.parent)
    )


async def _session(params: StdioServerParameters, calls: dict[str, tuple[str, dict]], errlog) -> dict[str, Any]:
    async with Client(stdio_client(params, errlog=errlog)) as client:
        out: dict[str, Any] = {
            "tools": {t.name: t for t in (await client.list_tools()).tools},
            "resources": {str(r.uri): r for r in (await client.list_resources()).resources},
            "prompts": {p.name: p for p in (await client.list_prompts()).prompts},
        }
        out["guide"] = (await client.read_resource("scprof://guide")).contents[0].text
        out["schema"] = (await client.read_resource("scprof://schema")).contents[0].text
        for key, (tool, args) in calls.items():
            out[key] = await client.call_tool(tool, args)
        return out


def drive(db: Path, calls: dict[str, tuple[str, dict]], *flags: str, log: Path | None = None) -> dict[str, Any]:
    with open(log or os.devnull, "w") as errlog:
        return asyncio.run(_session(_server(db, *flags), calls, errlog))


@pytest.fixture(scope="module")
def served(store_db, tmp_path_factory) -> dict[str, Any]:
    """Every call of CALLS answered by one read-only server, and the store's sha256 before and after."""
    before = _sha256(store_db)
    log = tmp_path_factory.mktemp("log") / "server.stderr"
    out = drive(store_db, CALLS, log=log)
    out["sha256"] = (before, _sha256(store_db))
    out["wal"] = Path(str(store_db) + ".wal").exists()
    return out


def cli_json(capsys, db: Path, *argv: str) -> Any:
    result = cli(capsys, *argv, "--db", db)
    assert result.code == 0, result.err
    return json.loads(result.out)


def ok(result) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content  # text content: the same JSON
    return result.structured_content


def error_line(result) -> str:
    assert result.is_error and result.structured_content is None
    (block,) = result.content
    assert "\n" not in block.text and block.text.strip() == block.text, block.text
    return block.text


# --- tools and schemas --------------------------------------------------------------------------


def test_tool_list_schemas_and_annotations(served):
    tools = served["tools"]
    assert set(tools) == READ_TOOLS  # no ingest without --allow-ingest
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 60, name
        assert tool.input_schema["type"] == "object", name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False, name
    assert tools["analyze"].input_schema["required"] == ["run"]
    assert tools["analyze"].input_schema["properties"]["verify"]["default"] is False
    assert "ctx" not in tools["analyze"].input_schema["properties"]
    assert set(tools["compare"].input_schema["required"]) == {"base", "cand"}
    assert tools["sql"].input_schema["properties"]["max_rows"]["default"] == 200
    assert {"verdict", "ci_low", "ci_high"} <= set(tools["compare"].output_schema["$defs"]["StepTime"]["properties"])


def test_resources_and_prompts(served):
    assert {"scprof://guide", "scprof://schema"} <= set(served["resources"])
    assert served["guide"] == guide_text() and served["guide"].startswith("---\nname: scprof\n")
    assert served["schema"] == markdown() == (REPO / "docs" / "schema.md").read_text()
    assert set(served["prompts"]) == {"diagnose", "did_it_improve"}


# --- each read tool equals the CLI's --json ------------------------------------------------------


def test_list_runs_equals_cli(served, store_db, capsys):
    doc = ok(served["runs"])
    assert doc["runs"] == cli_json(capsys, store_db, "runs", "--json")
    assert [r["name"] for r in doc["runs"]] == list(RUNS)
    assert [r["status"] for r in doc["runs"]] == ["ok", "ok", "failed", "ok"]


@pytest.mark.parametrize("run", RUNS)
def test_analyze_equals_cli(served, store_db, capsys, run):
    assert ok(served[f"analyze {run}"]) == cli_json(capsys, store_db, "analyze", run, "--json")


@pytest.mark.parametrize("run", RUNS)
def test_run_summary_is_cut_from_analyze(served, run):
    summary, analysis = ok(served[f"summary {run}"]), ok(served[f"analyze {run}"])
    assert summary["run"] == analysis["run"]
    bd = analysis["figures"].get("breakdown")
    if bd:
        assert summary["step_time"]["step_ps_mean"] == bd["step_ps_mean"] and summary["share"] == bd.get("share")
    else:  # a failed run, a capture without steps: no step time, never a zero
        assert summary["step_time"] is None
    assert summary["findings"] == len(analysis["findings"])
    assert [f["rule"] for f in summary["top_findings"]] == [f["rule"] for f in analysis["findings"][:5]]
    assert summary["notes"] == analysis["notes"]


def test_compare_equals_cli(served, store_db, capsys):
    doc = ok(served["compare"])
    assert doc == cli_json(capsys, store_db, "compare", "baseline", "host_bound", "--json")
    assert ok(served["compare by id"]) == doc
    assert doc["step_time"]["verdict"] in ("improved", "regressed", "no change", "inconclusive", "not enough steps")


def test_top_ops_over_the_run_are_analyzes_ops(served):
    doc = ok(served["top_ops"])
    ops = ok(served["analyze baseline"])["figures"]["ops"]
    assert doc["rows"] == ops["top"][:20] and doc["ops"] == ops["ops"]
    part = ok(served["top_ops step 1 chip 0"])
    assert part["steps"] == [1, 2] and part["chip"] == 0 and not part["truncated"]
    whole = {(r["track_kind"], r["name"], r["category"]): r["events"] for r in doc["rows"]}
    for r in part["rows"]:  # one step of one chip of 4: fewer events of each op
        assert r["events"] < whole[(r["track_kind"], r["name"], r["category"])]
    capture = ok(served["top_ops capture"])
    assert len(capture["rows"]) == 5 and capture["truncated"] and capture["ops"] > 5


FIND_SQL = """SELECT event_id, track_id, plane, line, track_kind, chip, name, step, start_ps, dur_ps FROM slices
WHERE run_id = 1 AND contains(lower(name), 'matmul') AND start_ps < {t1} AND (start_ps >= {t0} OR start_ps + dur_ps > {t0})
ORDER BY start_ps, event_id"""


def test_find_events_equals_the_same_rule_in_sql(served, store_db, capsys):
    every = cli_json(capsys, store_db, "sql", FIND_SQL.format(t0=0, t1=2**62), "--format", "json")
    found = ok(served["find"])
    assert found["rows"] == every[:5] and found["count"] == len(every) > 5
    assert found["truncated"] and "give a window" in found["note"]
    window = ok(served["find in window"])
    assert window["window_ps"] == [0, 10**9] and not window["truncated"]
    assert window["rows"] == cli_json(capsys, store_db, "sql", FIND_SQL.format(t0=0, t1=10**9), "--format", "json")
    assert 0 < window["count"] < found["count"]


def test_sql_equals_cli(served, store_db, capsys):
    doc = ok(served["sql"])
    query = CALLS["sql"][1]["query"]
    assert doc["rows"] == cli_json(capsys, store_db, "sql", query, "--format", "json")
    assert doc["columns"] == ["run_id", "name", "status", "events"] and not doc["truncated"]


def test_sql_results_are_capped_in_rows_and_bytes(served):
    rows = ok(served["sql rows cap"])
    assert len(rows["rows"]) == 100 and rows["truncated"] and rows["capped_by"] == "rows"
    assert "narrow the query" in rows["note"]
    big = served["sql bytes cap"]
    doc = ok(big)
    assert doc["truncated"] and 0 < len(doc["rows"]) < 2000 and "narrow the query" in doc["note"]
    assert len(big.content[0].text.encode()) <= MAX_RESULT_BYTES
    assert [r["i"] for r in doc["rows"]] == list(range(len(doc["rows"])))  # the first rows, in order


def test_links_open_the_ui_pages(served, store_db):
    assert ok(served["timeline_link"])["url"] == "http://127.0.0.1:8050/timeline?run=2&steps=1%3A3"
    link = ok(served["compare_link"])
    assert link["url"] == "http://127.0.0.1:8050/compare?base=1&cand=2"
    assert link["serve"] == f"scprof ui --db {store_db}"


# --- refusals -------------------------------------------------------------------------------------


REFUSALS = {
    "verify refused": ["--allow-simulate"],
    "sql ddl": ["only read-only SELECT", "CREATE"],
    "sql write": ["only read-only SELECT", "DELETE"],
    "sql two statements": ["exactly one statement"],
    "sql attach": ["ATTACH"],
    "sql max_rows": ["max_rows", "10,000"],
    "sql unknown column": ["hint: events stores name_id; the views slices"],
    "unknown run": ["'no_such_run' not found", "baseline"],
    "compare without steps": ["has no steps"],
    "bad steps": ["0 <= A < B"],
    "bad window": ["t0_ps, t1_ps"],
    "find nothing": ["name: give some text"],
    "ingest not offered": ["ingest"],
}


@pytest.mark.parametrize("key", sorted(REFUSALS))
def test_refusals_are_one_line_tool_errors(served, key):
    line = error_line(served[key])
    for needle in REFUSALS[key]:
        assert needle in line, line


def test_refusals_name_the_clis_error(served, store_db, capsys):
    """The same mistake gets the CLI's message."""
    result = cli(capsys, "compare", "baseline", "tpu_inference_2", "--db", store_db)
    assert result.code == 2
    assert result.err.strip().removeprefix("scprof: error: ") in error_line(served["compare without steps"])


def test_the_store_is_unchanged(served):
    before, after = served["sha256"]
    assert before == after and not served["wal"]


# --- the what-if tools, allowed ------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_copies(store_db, tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("copies")
    copies = (d / "a" / "store.duckdb", d / "b" / "store.duckdb")
    for c in copies:
        c.parent.mkdir()
        shutil.copyfile(store_db, c)
    return copies


def test_agent_session_reaches_the_verified_fix_and_its_interval(two_copies, capsys, monkeypatch):
    """A scripted agent (no language model): list_runs -> analyze -> analyze verify -> compare, on a
    server allowed to simulate; it decides from tool results alone, and the verified report equals
    `scprof analyze --verify --json` on an identical copy of the store."""
    db, twin = two_copies
    script = {"runs": ("list_runs", {})}
    runs = ok(drive(db, script, "--allow-simulate")["runs"])["runs"]
    emulated = [r for r in runs if r["status"] == "ok" and r["source"] == "scprof-trace"]
    slowest = max(emulated, key=lambda r: r["mean_step_ps"])["name"]
    fastest = min(emulated, key=lambda r: r["mean_step_ps"])["name"]
    assert (slowest, fastest) == ("host_bound", "baseline")

    script = {
        "analyze": ("analyze", {"run": slowest}),
        "verify": ("analyze", {"run": slowest, "verify": True}),
        "compare": ("compare", {"base": fastest, "cand": slowest}),
    }
    answers = drive(db, script, "--allow-simulate")
    assert answers["tools"]["analyze"].annotations.read_only_hint is True
    top = ok(answers["analyze"])["findings"][0]
    assert top["rule"] == "host_bound" and top["fix"]["set"] == {"host.num_threads": 4}
    verified = ok(answers["verify"])
    fix = next(f for f in verified["findings"] if f["rule"] == top["rule"])["verified"]
    assert fix["recommended"] is True and fix["ci_high"] < 0 and fix["ci_low"] <= fix["change"] <= fix["ci_high"]
    assert verified["simulations"] >= 1 and verified["not_verified"] is None
    step = ok(answers["compare"])["step_time"]
    assert step["ci_low"] <= step["change"] <= step["ci_high"]

    monkeypatch.chdir(twin.parent)  # the CLI's trials land beside its copy, as the server's did
    # the same figures, up to the last bits of DuckDB's parallel sums of doubles (as tests/test_consistency.py)
    assert last_bits(verified) == last_bits(cli_json(capsys, twin, "analyze", slowest, "--verify", "--json"))


def test_ingest_reads_only_inside_the_allowed_folders(store_db, tmp_path):
    db, allowed = tmp_path / "store.duckdb", tmp_path / "captures"
    shutil.copyfile(store_db, db)
    allowed.mkdir()
    shutil.copyfile(CAPTURE, allowed / "again.xplane.pb")
    (allowed / "link.xplane.pb").symlink_to(CAPTURE)  # inside by name, outside in fact
    script = {
        "outside": ("ingest", {"paths": [str(CAPTURE)]}),
        "link out": ("ingest", {"paths": [str(allowed / "link.xplane.pb")]}),
        "dotdot": ("ingest", {"paths": [f"{allowed}/../../{CAPTURE.relative_to(CAPTURE.anchor)}"]}),
    }
    before = _sha256(db)
    refused = drive(db, script, "--allow-ingest", str(allowed))
    assert refused["tools"]["ingest"].annotations.read_only_hint is False
    for key in script:
        assert "outside the folders this server may ingest from" in error_line(refused[key]), key
    assert _sha256(db) == before

    inside = str(allowed / "again.xplane.pb")  # the capture the store holds (as tpu_inference_2)
    script = {
        "again": ("ingest", {"paths": [inside], "name": "again"}),
        "replace": ("ingest", {"paths": [inside], "name": "again", "replace": True}),
    }
    done = drive(db, script, "--allow-ingest", str(allowed))
    assert "already holds this run" in error_line(done["again"])  # the ingest's own checks, as a user's
    (run,) = ok(done["replace"])["runs"]
    assert run["name"] == "again" and run["events"] > 0
    with Store.open(str(db), read_only=True) as store:
        assert store.resolve_run("again") == run["run_id"]


# --- the command line -----------------------------------------------------------------------------


def test_guide_is_printed(capsys):
    result = cli(capsys, "mcp", "--guide")
    assert result.code == 0 and result.out == guide_text()
    assert "## 3. Verify before you recommend" in result.out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--transport", "http", "--host", "0.0.0.0"], "give --token"),
        (["--transport", "http", "--token", "short"], "--token: use 16 to 256 characters"),
        (["--transport", "http", "--port", "0"], "--port: must be 1..65535"),
        (["--token", "a" * 20], "--host and --token are for --transport http"),
        (["--allow-ingest", "no/such/folder"], "--allow-ingest: no/such/folder is not a folder"),
        (["--transport", "carrier-pigeon"], "invalid choice"),
        (["--workers", "0"], "--workers: must be 1..32, got 0"),
    ],
)
def test_bad_flags_are_one_line_before_serving(capsys, store_db, argv, needle):
    result = cli(capsys, "mcp", "--db", store_db, *argv)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert needle in result.err


# --- streamable HTTP ------------------------------------------------------------------------------

TOKEN = "scprof-test-token-0123456789"


@pytest.fixture(scope="module")
def http_url(store_db):
    """`scprof mcp --transport http --token ...` on a free loopback port; its /mcp address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = _server(store_db, "--transport", "http", "--port", str(port), "--token", TOKEN)
    proc = subprocess.Popen(
        [params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the HTTP server did not start in 60 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def _http_session(url: str, calls: dict[str, tuple[str, dict]], headers: dict[str, str]) -> dict[str, Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        out: dict[str, Any] = {"tools": {t.name for t in (await client.list_tools()).tools}}
        for key, (tool, args) in calls.items():
            out[key] = await client.call_tool(tool, args)
        return out


def test_http_answers_equal_stdio_and_the_cli(http_url, served, store_db, capsys):
    before = _sha256(store_db)
    calls = {k: CALLS[k] for k in ("runs", "analyze host_bound", "compare", "sql", "sql ddl", "verify refused")}
    # the view tools, each against its CLI command's --json (scprof/query_cmds.py)
    views = {
        "summary": ("run_summary", {"run": "host_bound"}, ["summary", "host_bound"]),
        "ops": (
            "top_ops",
            {"run": "host_bound", "steps": "1:2", "chip": 0},
            ["ops", "host_bound", "--steps", "1:2", "--chip", "0"],
        ),
        "events": (
            "events",
            {"run": "host_bound", "steps": "1:2", "chip": 0},
            ["events", "host_bound", "--steps", "1:2", "--chip", "0"],
        ),
        "find": ("find_events", {"run": "host_bound", "name": "dense"}, ["find", "host_bound", "dense"]),
        "breakdown": ("step_breakdown", {"run": "host_bound"}, ["breakdown", "host_bound"]),
    }
    calls.update({k: (tool, args) for k, (tool, args, _) in views.items()})
    out = asyncio.run(_http_session(http_url, calls, {"Authorization": f"Bearer {TOKEN}"}))
    assert out["tools"] == READ_TOOLS
    assert ok(out["runs"])["runs"] == cli_json(capsys, store_db, "runs", "--json")
    for key in ("analyze host_bound", "compare", "sql"):
        assert last_bits(ok(out[key])) == last_bits(ok(served[key])), key
    for key, (_, _, argv) in views.items():
        doc = {k: v for k, v in ok(out[key]).items() if k != "note"}
        assert last_bits(doc) == last_bits(cli_json(capsys, store_db, *argv, "--json")), key
    assert error_line(out["sql ddl"]) == error_line(served["sql ddl"])
    assert error_line(out["verify refused"]) == error_line(served["verify refused"])
    assert _sha256(store_db) == before


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong-token-0123456789"}, 401),
        ({"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}, 421),  # DNS rebinding: the SDK's check
    ],
)
def test_http_refuses_requests_without_the_token_or_a_loopback_host(http_url, headers, status):
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    response = httpx2.post(http_url, json=body, headers={**accept, **headers}, timeout=30)
    assert response.status_code == status, response.text


def test_a_long_series_is_cut_with_a_note_naming_it(store_db, capsys):
    """A long run's per-step series would pass the byte cap (11,700 steps: 724 KiB): analyze's are cut
    to their first rows, each cut named in its analyzer's notes; the rest of the document is the CLI's."""
    from scprof.mcp_tools import SERIES_MAX, series_cut

    full = cli_json(capsys, store_db, "analyze", "baseline", "--json")
    series = [(a, k, v) for a, f in full["figures"].items() for k, v in f.items() if isinstance(v, list) and len(v) > 2]
    assert series  # the 7-step run's per-step series (idle_gaps' tensorcore_by_step, ...)
    cut = series_cut(full, most=2)
    for a, k, v in series:
        assert cut["figures"][a][k] == v[:2]
        assert f"{k}: the first 2 of {len(v):,} rows here" in " ".join(cut["notes"][a])
    rest = {
        a: {k: x for k, x in f.items() if (a, k) not in {(s[0], s[1]) for s in series}}
        for a, f in full["figures"].items()
    }
    assert {a: {k: x for k, x in f.items() if k in rest[a]} for a, f in cut["figures"].items()} == rest
    assert cut["findings"] == full["findings"] and series_cut(full) == full and SERIES_MAX >= 100

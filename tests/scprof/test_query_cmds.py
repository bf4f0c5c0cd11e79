"""`scprof summary|ops|events|find|breakdown` (scprof/query_cmds.py): each `--json` equals the MCP tool
of the same question (run_summary, top_ops, events, find_events, step_breakdown) served by `scprof mcp`
over stdio on the same store (emulated runs, a failed run, a real capture without steps); a question
a run cannot answer is the same one line on both surfaces; the text output holds the document's rows;
bad flags are one line and exit 2. And a narrowed op profile (steps, chip), read from the events of the
steps' span only, equals the one cut from the whole run's op arrays (an emulated run, and a real JAX
capture whose host events nest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("mcp", reason="the mcp SDK (a dependency of `scprof mcp`) is not installed")

from analyzers.context import RunContext  # noqa: E402
from analyzers.op_arrays import op_arrays  # noqa: E402
from analyzers.rules.op_profile import self_times  # noqa: E402
from profiler.store import Store  # noqa: E402
from profiler.trace_to_store import ingest_traces  # noqa: E402
from scprof import answers  # noqa: E402
from tests.scprof import test_mcp_server as base  # noqa: E402
from tests.scprof.test_mcp_server import drive, error_line, ok  # noqa: E402
from tests.tracekit import REPO, assert_one_error, cli  # noqa: E402

store_db = base.store_db  # two emulated runs (baseline, host_bound), a failed one, a real capture without steps

# name -> (tool, its arguments, the CLI's argv for the same question)
SAME: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    **{f"summary {r}": ("run_summary", {"run": r}, ["summary", r]) for r in base.RUNS},
    "ops": ("top_ops", {"run": "baseline", "limit": 10}, ["ops", "baseline", "--limit", "10"]),
    "ops steps chip": (
        "top_ops",
        {"run": "host_bound", "steps": "1:3", "chip": 1, "limit": 50},
        ["ops", "host_bound", "--steps", "1:3", "--chip", "1", "--limit", "50"],
    ),
    "ops capture": ("top_ops", {"run": "tpu_inference_2", "limit": 5}, ["ops", "tpu_inference_2", "--limit", "5"]),
    "events": (
        "events",
        {"run": "baseline", "steps": "1:2", "kind": "sparsecore", "chip": 0, "limit": 30},
        ["events", "baseline", "--steps", "1:2", "--kind", "sparsecore", "--chip", "0", "--limit", "30"],
    ),
    "events window": (
        "events",
        {"run": "host_bound", "t0_ps": 10**9, "t1_ps": 2 * 10**9, "line": "ops", "limit": 5000},
        ["events", "host_bound", "--window", f"{10**9}:{2 * 10**9}", "--line", "ops", "--limit", "5000"],
    ),
    "events capture": (
        "events",
        {"run": "tpu_inference_2", "limit": 20},
        ["events", "tpu_inference_2", "--limit", "20"],
    ),
    "find": (
        "find_events",
        {"run": "baseline", "name": "MatMul", "limit": 7},
        ["find", "baseline", "MatMul", "--limit", "7"],
    ),
    "find window": (
        "find_events",
        {"run": "host_bound", "name": "dense", "t0_ps": 0, "t1_ps": 10**9},
        ["find", "host_bound", "dense", "--window", f"0:{10**9}"],
    ),
    "breakdown": ("step_breakdown", {"run": "baseline"}, ["breakdown", "baseline"]),
    "breakdown chip steps": (
        "step_breakdown",
        {"run": "host_bound", "steps": "1:3", "chip": 1, "limit": 1},
        ["breakdown", "host_bound", "--steps", "1:3", "--chip", "1", "--limit", "1"],
    ),
    # questions a run cannot answer: the same line on both surfaces
    "breakdown failed": ("step_breakdown", {"run": "spmem_overflow"}, ["breakdown", "spmem_overflow"]),
    "breakdown capture": ("step_breakdown", {"run": "tpu_inference_2"}, ["breakdown", "tpu_inference_2"]),
    "events beyond": ("events", {"run": "baseline", "steps": "50:60"}, ["events", "baseline", "--steps", "50:60"]),
    "find blank": ("find_events", {"run": "baseline", "name": " "}, ["find", "baseline", " "]),
}
REFUSED = ("breakdown failed", "breakdown capture", "events beyond", "find blank")


@pytest.fixture(scope="module")
def served(store_db) -> dict[str, Any]:
    return drive(store_db, {k: (tool, args) for k, (tool, args, _) in SAME.items()})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("key", [k for k in SAME if k not in REFUSED])
def test_cli_json_equals_the_tool(served, store_db, capsys, key):
    result = cli(capsys, *SAME[key][2], "--json", "--db", store_db)
    assert result.code == 0, result.err
    note = ok(served[key]).get("note")  # the tool's hint on how to ask less; the CLI says it in its text
    doc = {k: v for k, v in ok(served[key]).items() if k != "note"}
    assert json.loads(result.out) == doc
    assert (note is not None) == doc.get("truncated", False) or key.startswith("summary")


@pytest.mark.parametrize("key", REFUSED)
def test_a_question_the_run_cannot_answer_is_one_line_on_both(served, store_db, capsys, key):
    line = assert_one_error(cli(capsys, *SAME[key][2], "--db", store_db))
    tool_line = error_line(served[key])
    assert line.split(": ", 2)[2] == tool_line.split(": ", 1)[1] or tool_line in line


def test_the_failed_run_and_the_capture_have_no_step_time(served):
    for run in ("spmem_overflow", "tpu_inference_2"):
        assert ok(served[f"summary {run}"])["step_time"] is None
    capture = ok(served["ops capture"])
    assert capture["truncated"] and capture["ops"] > 5 and len(capture["rows"]) == 5


def _table_rows(text: str) -> list[list[str]]:
    """The body rows of each text table in `text` (after its ----- rule), as split cells."""
    lines, rows, inside = text.splitlines(), [], False
    for line in lines:
        if line.startswith("---"):
            inside = True
            continue
        if inside and (not line or line.startswith("(") or line.endswith(":")):
            inside = False
        if inside:
            rows.append(line.split())
    return rows


def test_the_text_holds_the_documents_rows(served, store_db, capsys):
    ops = ok(served["ops"])
    text = cli(capsys, "ops", "baseline", "--limit", "10", "--db", store_db).out
    assert [r[1] for r in _table_rows(text)] == [r["name"] for r in ops["rows"]]
    assert f"({len(ops['rows'])} of {ops['ops']} ops" in text

    events = ok(served["events"])
    text = cli(capsys, *SAME["events"][2], "--db", store_db).out
    assert [int(r[0]) for r in _table_rows(text)] == [r["start_ps"] for r in events["rows"]]
    assert f"of {events['count']:,} events" in text

    bd = ok(served["breakdown"])
    text = cli(capsys, "breakdown", "baseline", "--db", store_db).out
    body = _table_rows(text)
    assert [int(r[0]) for r in body[: len(bd["rows"])]] == [r["step"] for r in bd["rows"]]
    assert [int(r[0]) for r in body[len(bd["rows"]) :]] == [r["chip"] for r in bd["per_chip"]]
    assert f"{bd['counted_steps']} counted steps" in text

    summary = ok(served["summary baseline"])
    text = cli(capsys, "summary", "baseline", "--db", store_db).out
    assert f"findings   {summary['findings']} ({summary['fixable']} with a config fix)" in text
    assert all(f["title"] in text for f in summary["top_findings"])
    capture = ok(served["summary tpu_inference_2"])
    text = cli(capsys, "summary", "tpu_inference_2", "--db", store_db).out
    assert capture["notes"] and "step time  - (no steps)" in text
    for analyzer, reasons in capture["notes"].items():
        assert all(f"not analysed ({analyzer}): {why}" in text for why in reasons)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["ops", "baseline", "--limit", "0"], ["--limit", "1.."]),
        (["ops", "baseline", "--steps", "3:1"], ["--steps", "0 <= A < B"]),
        (["events", "baseline", "--window", "5:1"], ["--window", "T0 < T1"]),
        (["events", "baseline", "--window", "a:b"], ["--window", "T0:T1"]),
        (["events", "baseline", "--steps", "0:1", "--window", "0:5"], ["steps", "not both"]),
        (["find", "baseline", "x", "--limit", "2000000"], ["--limit"]),
        (["breakdown", "no_such_run"], ["no_such_run"]),
        (["summary", "baseline", "--chip", "1"], ["unrecognized arguments"]),
    ],
)
def test_bad_flags_are_one_line_and_leave_the_store(store_db, capsys, argv, needles):
    before = _sha256(store_db)
    assert_one_error(cli(capsys, *argv, "--db", store_db), *needles)
    assert _sha256(store_db) == before


# --- a narrowed op profile equals the one cut from the whole run ---------------------------------


def _cut_from_the_whole_run(store: Store, run_id: int, steps: tuple[int, int], chip: int | None) -> list[dict]:
    """The reference: every op event's self time over the whole run's op arrays, then the events of
    steps A..B-1 (and the chip) kept, and the op profile's SQL over them."""
    ctx = RunContext(store, run_id)
    a = op_arrays(ctx)
    track = np.repeat(np.arange(len(a.track_id)), np.diff(a.bounds))
    keep = (a.step >= steps[0]) & (a.step < steps[1])
    if chip is not None:
        keep &= a.track_chip[track] == chip
    rows = pa.table(
        {
            "track_id": a.track_id[track][keep],
            "name_id": a.name_scan[a.source][keep],
            "category_id": a.category_scan[a.source][keep],
            "dur_ps": (a.end - a.start)[keep],
            "self_ps": self_times(a)[keep],
        }
    )
    table = ctx.sql("analysis.ops.op_profile", {"rows": rows}, step_lo=steps[0], step_hi=steps[1])
    return answers.jsonable(table.to_pylist())


@pytest.fixture(scope="module")
def capture_db(tmp_path_factory) -> Path:
    """The real host-bound JAX capture (host scopes nest around launches), ingested."""
    db = tmp_path_factory.mktemp("capture") / "store.duckdb"
    with Store.open(str(db)) as store:
        ingest_traces(store, [str(REPO / "tests" / "data" / "input_pipeline" / "host_bound")], "host_bound", False)
    return db


@pytest.mark.parametrize(("steps", "chip"), [((1, 2), 0), ((0, 3), None), ((2, 3), 1)])
def test_narrowed_ops_of_an_emulated_run(store_db, steps, chip):
    with Store.open(str(store_db), read_only=True) as store:
        run_id = store.resolve_run("host_bound")
        doc = answers.top_ops_doc(store, run_id, steps, chip, limit=1000)
        assert doc["rows"] == _cut_from_the_whole_run(store, run_id, steps, chip) and doc["rows"]


@pytest.mark.parametrize(("steps", "chip"), [((1, 2), 0), ((0, 3), None)])
def test_narrowed_ops_flops_and_bytes_are_those_of_the_chosen_steps(store_db, steps, chip):
    """The FLOPs and bytes of a narrowed profile are its events' (plain SQL over the steps and chip),
    not the whole run's beside the steps' times; the achieved FLOP/s is over those events' self time."""
    with Store.open(str(store_db), read_only=True) as store:
        run_id = store.resolve_run("host_bound")
        rows = answers.top_ops_doc(store, run_id, steps, chip, limit=1000)["rows"]
        want = {
            (r["track_kind"], r["name"]): (r["f"], r["b"])
            for r in store.rows(
                "SELECT track_kind, name, sum(flops)::BIGINT AS f, sum(bytes)::BIGINT AS b FROM slices "
                "WHERE run_id = ? AND step >= ? AND step < ? AND (? IS NULL OR chip = ?) "
                "AND track_id IN (SELECT track_id FROM op_tracks WHERE run_id = ?) GROUP BY ALL",
                [run_id, steps[0], steps[1], chip, chip, run_id],
            )
        }
        with_flops = [r for r in rows if r["flops"]]
        assert with_flops, "the emulated run's dense ops record FLOPs"
        for r in rows:
            assert (r["flops"], r["bytes"]) == want[(r["track_kind"], r["name"])]
        for r in with_flops:
            assert r["flop_per_s"] == pytest.approx(r["flops"] / (r["self_ps"] * 1e-12), rel=1e-12)


def test_narrowed_ops_of_a_real_capture_with_nesting(capture_db):
    with Store.open(str(capture_db), read_only=True) as store:
        run_id = store.resolve_run("host_bound")
        a = op_arrays(RunContext(store, run_id))
        assert np.any(self_times(a) < a.end - a.start), "the capture should nest events (self < duration)"
        n_steps = int(a.step.max()) + 1
        for steps in ((0, 1), (3, 5), (n_steps - 2, n_steps)):
            doc = answers.top_ops_doc(store, run_id, steps, None, limit=1000)
            assert doc["rows"] == _cut_from_the_whole_run(store, run_id, steps, None) and doc["rows"], steps

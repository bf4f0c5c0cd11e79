"""`scprof mcp --allow-simulate`'s tools through the SDK's client over stdio: compare with attribute,
record and tune equal to the CLI on an identical copy of the store; their files only under the
server's out folder; tune's progress notifications and a cancelled tune that leaves no
half-written trial; and a scripted agent session on real captures (host-bound vs prefetched)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK (a dependency of `scprof mcp`) is not installed")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from profiler.store import Store  # noqa: E402
from tests.scprof import test_mcp_server as base  # noqa: E402
from tests.scprof.test_mcp_server import _server, _sha256, cli_json, drive, error_line, ok  # noqa: E402
from tests.tracekit import REPO, cli  # noqa: E402

store_db = base.store_db  # two emulated runs of 3 steps (baseline, host_bound), a failed one, a real capture
PIPELINE = REPO / "tests" / "data" / "input_pipeline"


def _copies(store_db: Path, tmp: Path, *names: str) -> list[Path]:
    out = []
    for n in names:
        (tmp / n).mkdir()
        shutil.copyfile(store_db, tmp / n / "store.duckdb")
        out.append(tmp / n / "store.duckdb")
    return out


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


# --- refused without the flag ---------------------------------------------------------------------


def test_simulating_is_refused_without_the_flag(store_db):
    calls = {
        "attribute": ("compare", {"base": "baseline", "cand": "host_bound", "attribute": True}),
        "record": ("record", {"config": "baseline"}),
        "tune": ("tune", {"run": "host_bound"}),
    }
    before = _sha256(store_db)
    out = drive(store_db, calls)
    assert "attribute: this server may not simulate" in error_line(out["attribute"])
    assert "--allow-simulate" in error_line(out["attribute"])
    assert {"record", "tune"}.isdisjoint(out["tools"])  # not offered at all
    assert "record" in error_line(out["record"]) and "tune" in error_line(out["tune"])
    assert _sha256(store_db) == before and not (store_db.parent / "runs").exists()


# --- compare with attribute -----------------------------------------------------------------------


def test_compare_attribute_equals_the_cli(store_db, tmp_path, capsys, monkeypatch):
    db, twin = _copies(store_db, tmp_path, "a", "b")
    out = drive(
        db, {"attr": ("compare", {"base": "baseline", "cand": "host_bound", "attribute": True})}, "--allow-simulate"
    )
    assert out["tools"]["record"].annotations.read_only_hint is False
    doc = ok(out["attr"])
    assert doc["attribution"] and doc["not_attributed"] is None
    assert {c["key"] for c in doc["attribution"]["changes"]} >= {"host.num_threads"}
    monkeypatch.chdir(twin.parent)  # the CLI's trials go to ./runs/whatif, the server's to runs/ beside its store
    assert doc == cli_json(capsys, twin, "compare", "baseline", "host_bound", "--attribute", "--json")
    assert all(f.startswith("runs/whatif/") for f in _files(db.parent) - {"store.duckdb"})


# --- record ---------------------------------------------------------------------------------------


def test_record_equals_the_cli_and_writes_under_the_out_folder(store_db, tmp_path, capsys, monkeypatch):
    db, twin = _copies(store_db, tmp_path, "a", "b")
    out_dir, allowed = tmp_path / "out", tmp_path / "configs"
    allowed.mkdir()
    shutil.copyfile(REPO / "configs" / "baseline.toml", allowed / "mine.toml")
    (allowed / "escape.toml").symlink_to(REPO / "configs" / "host_bound.toml")  # inside by name only
    calls = {
        "record": ("record", {"config": "baseline", "sets": {"host.num_threads": 2}, "name": "b2", "steps": 4}),
        "again": ("record", {"config": "baseline", "sets": {"host.num_threads": 2}, "name": "b2", "steps": 4}),
        "traversal": ("record", {"config": "mine.toml", "steps": 3}),
        "by path": ("record", {"config": str(allowed / "mine.toml"), "name": "mine", "steps": 3}),
        "outside": ("record", {"config": str(REPO / "configs" / "host_bound.toml")}),
        "link": ("record", {"config": str(allowed / "escape.toml")}),
        "etc": ("record", {"config": "/etc/passwd"}),
        "failed": ("record", {"config": "spmem_overflow", "name": "oom", "steps": 3}),
        "bad set": ("record", {"config": "baseline", "sets": {"no.such_key": 1}}),
        "runs": ("list_runs", {}),
    }
    got = drive(db, calls, "--allow-simulate", "--out", str(out_dir), "--allow-ingest", str(allowed))
    rec = ok(got["record"])
    assert rec["name"] == "b2" and rec["status"] == "ok" and rec["trace"] == str(out_dir / "b2" / "trace.sctrace")
    assert "already holds" in error_line(got["again"])
    assert "outside the folders" in error_line(got["traversal"])  # not bundled: a path, relative to the server's folder
    assert ok(got["by path"])["name"] == "mine"
    for key in ("outside", "link", "etc"):
        assert "outside the folders this server may read configs from" in error_line(got[key]), key
    failed = ok(got["failed"])
    assert failed["status"] == "failed" and failed["failure"] and failed["name"] == "oom"
    assert "no: unknown key" in error_line(got["bad set"])
    assert {r["name"] for r in ok(got["runs"])["runs"]} >= {"b2", "mine", "oom"}
    assert not (db.parent / "runs").exists()  # everything went under --out
    assert {f.split("/")[0] for f in _files(out_dir)} == {"b2", "mine", "oom"}

    monkeypatch.chdir(twin.parent)
    result = cli(
        capsys,
        "record",
        str(REPO / "configs" / "baseline.toml"),
        "--set",
        "host.num_threads=2",
        "--name",
        "b2",
        "--steps",
        "4",
        "--db",
        twin,
    )
    assert result.code == 0, result.err
    query = "SELECT name, steps, counted_steps, mean_step_ps, events FROM run_list WHERE name = 'b2'"
    with Store.open(str(db), read_only=True) as a, Store.open(str(twin), read_only=True) as b:
        assert a.rows(query) == b.rows(query) and a.rows(query)


def test_record_names_never_leave_the_out_folder(store_db, tmp_path):
    (db,) = _copies(store_db, tmp_path, "a")
    out_dir = tmp_path / "out"
    calls = {"evil": ("record", {"config": "baseline", "name": "../../evil/../x", "steps": 3})}
    got = drive(db, calls, "--allow-simulate", "--out", str(out_dir))
    assert ok(got["evil"])["name"] == "../../evil/../x"
    (folder,) = out_dir.iterdir()  # one folder, a safe component of the name
    assert "/" not in folder.name and folder.name not in (".", "..")
    assert all(f.startswith(("a/", "out/")) for f in _files(tmp_path)), _files(tmp_path)


def test_paths_an_agent_names_in_a_config_are_checked_like_a_users(store_db, tmp_path):
    """A path in `sets` (by its dotted key, or inside a table given whole) or in a config file from an
    allowed folder must lie in a folder the server may read: never a secret, a FIFO, a device. Each
    refusal is one line, before anything is read or written; the store's bytes stay as they were."""
    (db,) = _copies(store_db, tmp_path, "a")
    out_dir, allowed = tmp_path / "out", tmp_path / "configs"
    allowed.mkdir()
    secret = tmp_path / "secret.toml"
    secret.write_text('token = "s3cret"\n')  # valid TOML: it would be read as a limits file
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = (REPO / "configs" / "baseline.toml").read_text()
    assert text.count("\n[flags]\n") == 1
    (allowed / "names_secret.toml").write_text(
        text.replace("\n[flags]\n", f'\n[flags]\nxla_sparse_core_max_ids_file = "{secret}"\n')
    )
    (allowed / "extends_secret.toml").write_text(f'extends = "{secret}"\n')
    (allowed / "extends_fifo.toml").write_text('extends = "../fifo"\n')
    limits = "flags.xla_sparse_core_max_ids_file"
    bundled_limits = str(REPO / "configs" / "limits" / "baseline_limits.toml")
    calls = {
        "secret": ("record", {"config": "baseline", "sets": {limits: str(secret)}, "steps": 2}),
        "fifo": ("record", {"config": "baseline", "sets": {limits: str(fifo)}, "steps": 2}),
        "device": ("record", {"config": "baseline", "sets": {"perf_tables": "/dev"}, "steps": 2}),
        "relative": ("record", {"config": "baseline", "sets": {limits: "../secret.toml"}, "steps": 2}),
        "in a table": (
            "record",
            {"config": "baseline", "sets": {"flags": {"xla_sparse_core_max_ids_file": str(secret)}}},
        ),
        "in the file": ("record", {"config": str(allowed / "names_secret.toml"), "steps": 2}),
        "extends a secret": ("record", {"config": str(allowed / "extends_secret.toml"), "steps": 2}),
        "extends a fifo": ("tune", {"config": str(allowed / "extends_fifo.toml"), "budget": 2}),
        "tune run": ("tune", {"run": "host_bound", "sets": {limits: str(fifo)}, "budget": 2}),
        "tune config": ("tune", {"config": "baseline", "sets": {limits: str(secret)}, "budget": 2}),
        "bundled limits": (
            "record",
            {"config": "baseline", "sets": {limits: bundled_limits}, "name": "ok", "steps": 2},
        ),
    }
    before = _sha256(db)
    refusals = {k: v for k, v in calls.items() if k != "bundled limits"}
    got = drive(db, refusals, "--allow-simulate", "--out", str(out_dir), "--allow-ingest", str(allowed))
    for key in refusals:
        line = error_line(got[key])
        assert "outside the folders this server may read from" in line and "s3cret" not in line, (key, line)
    assert _sha256(db) == before and not out_dir.exists()
    got = drive(db, {"ok": calls["bundled limits"]}, "--allow-simulate", "--out", str(out_dir))
    assert ok(got["ok"])["status"] == "ok"  # the bundled configs' own limits files may be read


# --- tune -----------------------------------------------------------------------------------------


async def _tune_session(params, args: dict[str, Any], cancel_at: int | None) -> dict[str, Any]:
    """Call tune with a progress callback; with cancel_at, cancel the call at that notification, then
    ask list_runs (which waits for the tune's thread to let go of the store)."""
    progress: list[tuple[float, float | None]] = []
    scope = anyio.CancelScope()
    out: dict[str, Any] = {"progress": progress, "result": None}

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))
        if cancel_at is not None and len(progress) >= cancel_at:
            scope.cancel()

    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            with scope:
                out["result"] = await client.call_tool("tune", args, progress_callback=on_progress)
            out["cancelled"] = scope.cancel_called
            out["runs"] = await client.call_tool("list_runs", {})
    return out


def test_tune_reports_progress_and_equals_the_cli(store_db, tmp_path, capsys, monkeypatch):
    """The server's trials on 2 Dask workers (`--workers 2`), the CLI's in its process: the same tune."""
    db, twin = _copies(store_db, tmp_path, "a", "b")
    server = _server(db, "--allow-simulate", "--workers", "2")
    out = asyncio.run(_tune_session(server, {"run": "host_bound", "budget": 10}, None))
    doc = ok(out["result"])
    progress = out["progress"]
    assert progress and all(total == 10 for _, total in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress) and progress[-1][0] <= 10
    # one tick per simulation; a trial its steps could not decide costs more (Session.decide)
    assert len(progress) == doc["simulations"] >= len(doc["trials"])
    tuned = db.parent / "runs" / "tuned" / "host_bound" / "tuned.toml"
    assert doc["best"]["config"] == str(tuned) and tuned.is_file()
    assert doc["best"]["ci_high"] < 0  # the fix found, proven faster

    monkeypatch.chdir(twin.parent)
    cli_doc = cli_json(capsys, twin, "tune", "host_bound", "--budget", "10", "--workers", "1", "--json")
    assert cli_doc["best"].pop("config") == "runs/tuned/host_bound/tuned.toml"
    doc["best"].pop("config")
    assert doc == cli_doc


def test_tune_from_a_config_equals_the_clis(store_db, tmp_path, capsys, monkeypatch):
    """`tune` with a bundled config's name (and a change) records it into the out folder's whatif/
    first, as `scprof tune CONFIG --set ...` does, and finds the same best config."""
    db, twin = _copies(store_db, tmp_path, "a", "b")
    args = {"config": "host_bound", "sets": {"flags.maximum_parallel_iterations": 1}, "budget": 4}
    out = asyncio.run(_tune_session(_server(db, "--allow-simulate"), args, None))
    doc = ok(out["result"])
    assert (db.parent / "runs" / "whatif").is_dir()  # the config's run, under the out folder
    monkeypatch.chdir(twin.parent)
    config = str(REPO / "configs" / "host_bound.toml")
    cli_doc = cli_json(
        capsys,
        twin,
        "tune",
        config,
        "--set",
        "flags.maximum_parallel_iterations=1",
        "--budget",
        "4",
        "--workers",
        "1",
        "--json",
    )
    for d in (doc, cli_doc):
        d["best"].pop("config")
    assert doc == cli_doc and doc["best"]["ci_high"] < 0
    both = drive(
        db,
        {"both": ("tune", {"run": "host_bound", "config": "host_bound"}), "neither": ("tune", {})},
        "--allow-simulate",
    )
    assert "not both" in error_line(both["both"]) and "not both" in error_line(both["neither"])


def test_a_cancelled_tune_leaves_no_half_written_trial(store_db, tmp_path):
    """A longer run (30 steps, recorded through the server) so the tune is cancelled mid-way."""
    (db,) = _copies(store_db, tmp_path, "a")
    drive(db, {"rec": ("record", {"config": "host_bound", "name": "long", "steps": 30})}, "--allow-simulate")
    out = asyncio.run(_tune_session(_server(db, "--allow-simulate"), {"run": "long", "budget": 40}, 1))
    assert out["cancelled"] and out["result"] is None and out["progress"]
    ok(out["runs"])  # answered after the tune's thread stopped
    trials_dir = db.parent / "runs" / "tuned" / "long" / "trials"
    assert not (trials_dir.parent / "tuned.toml").exists()  # stopped before the end
    with Store.open(str(db), read_only=True) as store:
        rows = store.rows("SELECT trial_run_id FROM whatif_trials WHERE purpose = 'tune'")
        trials = store.rows("SELECT run_id, source_path FROM runs WHERE name LIKE 'long~%'")
    assert {r["trial_run_id"] for r in rows} == {r["run_id"] for r in trials}  # every stored trial has its row
    stored = {Path(r["source_path"]).resolve().parent for r in trials}
    folders = {p.resolve() for p in trials_dir.iterdir()} if trials_dir.exists() else set()
    assert folders == stored  # no folder of a trial that was not stored
    assert not [p for p in db.parent.rglob("*") if "partial" in p.name]  # no partial trace
    assert len(trials) < 7  # a whole tune of this run takes 7 trials


# --- a scripted agent session on real captures --------------------------------------------------


def test_agent_session_on_real_captures_reaches_the_finding_and_the_interval(tmp_path, capsys):
    """No language model: list_runs -> analyze -> analyze verify -> compare on two real JAX captures, a
    host-bound loop and the same loop with prefetching; every decision from tool results alone."""
    db, captures = tmp_path / "store.duckdb", tmp_path / "captures"
    shutil.copytree(PIPELINE / "host_bound", captures / "host_bound")
    shutil.copytree(PIPELINE / "prefetched", captures / "prefetched")
    ingest = {n: ("ingest", {"paths": [str(captures / n)], "name": f"jax_{n}"}) for n in ("host_bound", "prefetched")}
    for key in ingest:
        assert ok(drive(db, {key: ingest[key]}, "--allow-ingest", str(captures))[key])["runs"][0]["status"] == "ok"

    runs = ok(drive(db, {"runs": ("list_runs", {})})["runs"])["runs"]
    real = [r for r in runs if r["source"] == "xplane" and r["status"] == "ok" and r["counted_steps"]]
    slow = max(real, key=lambda r: r["mean_step_ps"])["name"]
    fast = min(real, key=lambda r: r["mean_step_ps"])["name"]
    assert (slow, fast) == ("jax_host_bound", "jax_prefetched")

    script = {
        "analyze": ("analyze", {"run": slow}),
        "verify": ("analyze", {"run": slow, "verify": True}),
        "compare": ("compare", {"base": slow, "cand": fast}),
        "attribute": ("compare", {"base": slow, "cand": fast, "attribute": True}),
    }
    answers = drive(db, script, "--allow-simulate")
    top = ok(answers["analyze"])["findings"][0]
    assert top["rule"] == "host_bound" and top["severity"] == "critical"
    verified = ok(answers["verify"])
    assert verified["simulations"] == 0 and "fixes not verified" in verified["not_verified"]  # a real capture
    step = ok(answers["compare"])["step_time"]
    assert step["verdict"] == "improved" and step["ci_low"] <= step["change"] <= step["ci_high"] < 0
    assert step["base_steps"] == step["cand_steps"] == 14
    attr = ok(answers["attribute"])
    assert attr["attribution"] is None and "gain not attributed" in attr["not_attributed"]
    assert {k: attr[k] for k in ("step_time", "ops")} == {k: ok(answers["compare"])[k] for k in ("step_time", "ops")}
    assert json.loads(answers["compare"].content[0].text) == cli_json(capsys, db, "compare", slow, fast, "--json")

"""The MCP tools that simulate (only on a server started with `--allow-simulate`): analyze with
verify, compare with attribute, record and tune. Their files go under one folder the server was
given (Settings.out_root: `scprof mcp --out DIR`, default runs/ beside the store), never under a
path an agent names; a config an agent names is read only from the bundled configs/ or a folder
the server may read (--allow-ingest, the out folder). Each writes to the store through the
tools' write gate (scprof/mcp_tools.py), one writer at a time.

`tune` reports MCP progress (trials done of the budget, never going back) and honours
cancellation: it stops after the trial simulating when the client cancels, before that batch's
trials are stored, and removes their folders; every stored trial has its row, none is half
written.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from profiler import sqltree
from profiler.errors import ScprofError
from scprof import answers
from scprof import mcp_schemas as schemas
from scprof.mcp_tools import Cancelled, Tools, answer, progress_of, run_cancellable, series_cut

BUNDLED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TUNE_BUDGET_MAX = 200
RECORD_STEPS_MAX = 1_000
SIMULATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class Simulating:
    """The simulating tools' work, over the read tools' store and gate."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self.settings = tools.settings

    def allowed(self, what: str) -> None:
        if not self.settings.allow_simulate:
            raise ScprofError(
                f"{what}: this server may not simulate; restart it with `scprof mcp --allow-simulate` "
                "(each simulation is stored as a run)"
            )

    def whatif_root(self) -> str:
        return os.path.join(self.settings.out_root, "whatif")

    def verified_analysis(self, run: str, progress: Callable[[int, int], None] | None) -> dict[str, Any]:
        self.allowed("verify")
        with self.tools.writing() as store:
            doc = answers.verified_analysis_doc(store, run, progress, self.whatif_root(), self.settings.workers)
            return series_cut(doc)  # as analyze without verify

    def attribution(self, base: str, cand: str, progress: Callable[[int, int], None] | None) -> dict[str, Any]:
        self.allowed("attribute")
        with self.tools.writing() as store:
            return answers.attribution_doc(store, base, cand, progress, self.whatif_root(), self.settings.workers)

    def config_path(self, config: str) -> str:
        """A bundled config by name (`host_bound`), or a TOML file in a folder the server may read."""
        if isinstance(config, str) and config.removesuffix(".toml").replace("_", "").isalnum():
            bundled = BUNDLED_CONFIGS / f"{config.removesuffix('.toml')}.toml"
            if bundled.is_file():
                return str(bundled)
        folders = [*self.settings.allow_ingest, self.settings.out_root]
        path = self.tools.allowed_path(config, "config", folders, "read configs from")
        if not os.path.isfile(path):
            names = ", ".join(sorted(p.stem for p in BUNDLED_CONFIGS.glob("*.toml")))
            raise ScprofError(f"config: {config} is neither a bundled config ({names}) nor a file")
        return path

    def readable_folders(self) -> list[str]:
        """Where a path a simulated config names may lie: the bundled configs (their limits files), the
        folders the server may read (--allow-ingest) and its out folder."""
        return [str(BUNDLED_CONFIGS.resolve()), *self.settings.allow_ingest, self.settings.out_root]

    def check_paths(self, sets: dict[str, Any] | None, config_path: str | None = None) -> None:
        """Every path an agent's `sets` name, and every path the config file names (with them), lies in
        readable_folders: checked like a user's path before anything is read or written, so a change
        cannot make the emulator read a secret, a FIFO or a device (docs/agents.md, security)."""
        from sim_backend.config_load import apply_override, config_paths, load_raw

        folders = self.readable_folders()
        for key, value in _named_paths(sets or {}):
            self.tools.allowed_path(value, f"sets: {key}", folders, "read from")
        if config_path is not None:

            def check_base(path: str) -> None:
                self.tools.allowed_path(path, "config extends", folders, "read from")

            raw = load_raw(config_path, check_base=check_base)
            for item in _set_items(sets):
                apply_override(raw, item)
            for key, node, name in config_paths(raw):
                if key != "extends":
                    self.tools.allowed_path(node[name], f"config {key}", folders, "read from")

    def record(
        self, config: str, sets: dict[str, Any], name: str | None, steps: int | None, replace: bool
    ) -> dict[str, Any]:
        from analyzers import materialize
        from profiler.trace_to_store import ingest_trace
        from sim_backend.errors import RunFailure
        from sim_backend.recording.record import record_run

        self.allowed("record")
        path = self.config_path(config)
        self.check_paths(sets, path)
        if steps is not None and not 1 <= steps <= RECORD_STEPS_MAX:
            raise ScprofError(f"steps: must be 1..{RECORD_STEPS_MAX:,} here, got {steps}")
        overrides = _set_items(sets)
        out_root = self.settings.out_root
        os.makedirs(out_root, exist_ok=True)
        failure, result = None, None
        with self.tools.writing() as store:
            check = _record_check(store, self.settings.db, replace)
            try:
                result = record_run(path, overrides, name, steps, None, check=check, root=out_root)
                trace = result.trace_path
            except RunFailure as e:  # a failed run is still a run: stored, and said in the result
                if not e.trace_path:
                    raise
                trace, failure = e.trace_path, str(e).splitlines()[0]
            stored = ingest_trace(store, trace, name=name if failure else result.run_name, replace=replace)
            warning = materialize.build(store, stored.run_id)
            recorded = answers.recorded_doc(store, stored.run_id, stored.events)
        doc: dict[str, Any] = {
            "run_id": stored.run_id,
            "name": stored.name,
            "status": stored.status,
            "failure": failure,
            "trace": trace,
            **recorded,
        }
        doc["warnings"] = [w for w in [warning, *(result.warnings if result else [])] if w]
        return answers.jsonable(doc)

    def tune(
        self,
        run: str | None,
        config: str | None,
        sets: dict[str, Any],
        budget: int,
        progress: Callable[[int, int], None] | None,
        stop: threading.Event,
    ) -> dict[str, Any]:
        """`scprof tune RUN|CONFIG --json`: from a stored emulated run (with `sets` applied first), or
        from a config (recorded with `sets` into the out folder's whatif/<name>/ first, an identical
        stored run reused), as the CLI's tune does."""
        from scprof.whatif_cmds import _record_origin
        from sim_backend.config import effective_config
        from sim_backend.config_load import load_config
        from sim_backend.recording.record import dir_name
        from whatif.engine import Change, Session
        from whatif.executor import Executor
        from whatif.tune import tune

        self.allowed("tune")
        if (run is None) == (config is None):
            raise ScprofError("run, config: give a stored run or a config to start from, not both")
        if not 1 <= budget <= TUNE_BUDGET_MAX:
            raise ScprofError(f"budget: must be 1..{TUNE_BUDGET_MAX} simulations, got {budget}")
        path = self.config_path(config) if config is not None else None
        self.check_paths(sets, path)
        if path is not None:  # the config with its changes: refused in one line before anything is written
            effective_config(load_config(path, _set_items(sets)))
        change = Change({} if path is not None else dict(sets or {}))
        with self.tools.writing() as store:
            if stop.is_set():
                raise Cancelled
            if path is not None:
                origin = _record_origin(store, path, _set_items(sets), self.settings.out_root)
            else:
                origin = store.resolve_run(run)
            name = sqltree.query(store.con, "cli.runs.run_name", run=origin).to_pylist()[0]["name"]
            out_dir = os.path.join(self.settings.out_root, "tuned", dir_name(name))
            trials = os.path.join(out_dir, "trials")
            done = [0]

            def step(_done: int, _total: int) -> None:  # one call per trial simulated; total: the budget
                done[0] += 1
                if progress:
                    progress(min(done[0], budget), budget)
                if stop.is_set():
                    raise Cancelled

            with Executor(self.settings.workers) as ex:
                session = Session(store, origin, "tune", ex, root=trials, progress=step)
                if change.overrides:
                    session.check(change)
                before = set(os.listdir(trials)) if os.path.isdir(trials) else set()
                try:
                    result = tune(session, change, budget, out_dir)
                except Cancelled:
                    _remove_unstored(store, trials, before)
                    raise
        return answers.jsonable(result.to_dict())


def _set_items(sets: dict[str, Any] | None) -> list[str]:
    """{KEY: value} as `--set KEY=VALUE` items (values as JSON, which the config loader reads as TOML)."""
    if sets is None:
        return []
    if not isinstance(sets, dict):
        raise ScprofError('sets: give an object of dotted config keys and values, e.g. {"host.num_threads": 4}')
    out = []
    for key, value in sets.items():
        try:
            out.append(f"{key}={json.dumps(value, allow_nan=False)}")
        except ValueError:
            raise ScprofError(f"sets: {key}: not a finite value") from None
    return out


def _named_paths(sets: dict[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, value) of every text value in `sets` that sits at a config key naming a path
    (sim_backend/config.py path_keys, e.g. `features[].ids_file`; and `extends`), whether given
    by its dotted key or inside a table or list given whole."""
    import re

    from sim_backend.config import path_keys

    patterns = [re.compile(re.escape(k).replace(r"\[\]", r"\.[^.]+")) for k in [*path_keys(), "extends"]]
    out: list[tuple[str, str]] = []

    def walk(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{key}.{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):  # by index: a pattern's [] matches an entry's index or name
                walk(f"{key}.{i}", v)
        elif isinstance(value, str) and any(p.fullmatch(key) for p in patterns):
            out.append((key, value))

    for key, value in sets.items():
        walk(str(key), value)
    return out


def _record_check(store: Any, db: str, replace: bool) -> Callable[[str, str, str], None]:
    """What `scprof record` checks before it simulates: the trace would not overwrite the store, and
    the run's name and id are new to the store (or replace)."""

    def check(name: str, uuid: str, trace_path: str) -> None:
        if os.path.realpath(trace_path) in (os.path.realpath(db), os.path.realpath(db + ".wal")):
            raise ScprofError(f"name: the trace {trace_path} would overwrite the store")
        clash = sqltree.query(store.con, "cli.runs.clash", name=name, uuid=uuid).to_pylist()
        if clash and not replace:
            c = clash[0]
            what = "this run" if c["uuid"] == uuid else f"a run named {c['name']!r}"
            raise ScprofError(f"the store already holds {what} (run_id {c['run_id']}); pass replace=true or a name")

    return check


def _remove_unstored(store: Any, trials: str, before: set[str]) -> None:
    """The trial folders this tune made whose trace no stored run came from (a cancelled batch)."""
    if not os.path.isdir(trials):
        return
    sources = {
        os.path.realpath(r["source_path"])
        for r in sqltree.query(store.con, "cli.runs.source_paths").to_pylist()
        if r["source_path"]
    }
    for entry in set(os.listdir(trials)) - before:
        folder = os.path.join(trials, entry)
        if not any(s.startswith(os.path.realpath(folder) + os.sep) for s in sources):
            shutil.rmtree(folder, ignore_errors=True)


RunArg = Annotated[str, Field(description="run name, run_id, or a uuid prefix (6+ characters), as list_runs shows")]
SetsArg = Annotated[
    dict[str, Any] | None,
    Field(description='config changes: dotted key -> value, as a finding\'s fix.set, e.g. {"host.num_threads": 4}'),
]


def add_simulate_tools(server: MCPServer, sim: Simulating) -> None:
    """`record` and `tune`, on a server allowed to simulate."""

    @server.tool(annotations=SIMULATES, title="Record a run in the emulator")
    def record(
        config: Annotated[
            str,
            Field(
                description="a bundled config's name (baseline, host_bound, ...) or a TOML "
                "file in a folder the server may read"
            ),
        ],
        sets: SetsArg = None,
        name: Annotated[str | None, Field(description="run name (default: the config's)")] = None,
        steps: Annotated[int | None, Field(description=f"steps to simulate, 1..{RECORD_STEPS_MAX:,}")] = None,
        replace: Annotated[bool, Field(description="replace a stored run of the same name")] = False,
    ) -> Annotated[CallToolResult, schemas.Recorded]:
        """Simulate a workload config (with changes) in the emulator and store it as a run, analysed:
        `scprof record CONFIG --set ... --name --steps`. Its folder is under the server's runs folder.
        A run that fails (compile error, out of memory) is stored too: status failed and why."""
        return answer(lambda: sim.record(config, sets or {}, name, steps, replace))

    @server.tool(annotations=SIMULATES, title="Search for a faster config")
    async def tune(
        run: Annotated[
            str | None, Field(description="a stored emulated run to start from (name, run_id or uuid prefix)")
        ] = None,
        config: Annotated[
            str | None,
            Field(description="or a config to start from: a bundled config's name or a TOML file the server may read"),
        ] = None,
        sets: SetsArg = None,
        budget: Annotated[int, Field(description=f"most simulations, 1..{TUNE_BUDGET_MAX}")] = 20,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, schemas.Tuned]:
        """Greedy search from a stored emulated run or a config (with `sets` applied first; a config is
        recorded first, as `scprof tune CONFIG` does): each round simulates its
        findings' fixes and neighbouring values, and takes the fastest trial that is significantly faster
        (95% interval), until nothing improves or the budget is spent. `scprof tune RUN --json`: every
        trial with its verdict, the best run with its change and interval, the tuned config's path
        (`scprof tune CONFIG --json` from a config).
        Sends progress (trials of the budget); a cancelled tune stores no half-finished trial."""
        progress = progress_of(ctx) if ctx is not None else None
        return await run_cancellable(
            lambda stop: answer(lambda: sim.tune(run, config, sets or {}, budget, progress, stop))
        )

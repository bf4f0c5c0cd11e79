"""`scprof mcp`: the store as a Model Context Protocol server, on the official SDK (PyPI `mcp`).

Each tool is a thin shell over a document of scprof/answers.py, the CLI's `--json` for the same
question, sent as the tool's structured result (and as JSON text, for clients that read only
text); the output schemas are scprof/mcp_schemas.py's. Safe by construction:
- read-only: the store is read through one read-only connection (ui/store_access.py, closed when
  idle so `scprof record` can write meanwhile); tools that write exist or act only when the
  server was started with the flag that allows them (--allow-simulate, --allow-ingest DIR);
- every failure is a tool error (isError) of one line an agent can act on: the CLI's message
  for the same mistake, or what flag or narrower question would help;
- results are capped: rows (each tool's `limit`/`max_rows`) and bytes (MAX_RESULT_BYTES of
  JSON), with `truncated` and a note saying how to narrow the question;
- SQL goes through profiler/sql_guard.py, as `scprof sql` and the UI's console do.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from profiler import sql_guard
from profiler.errors import ScprofError, one_line
from profiler.store import Store
from scprof import answers
from scprof import mcp_schemas as M
from ui.store_access import StoreAccess

log = logging.getLogger("scprof.mcp")

MAX_RESULT_BYTES = 256 * 2**10  # JSON of one structured result, at most
SQL_DEFAULT_ROWS = 200
SQL_MAX_ROWS = sql_guard.DEFAULT_MAX_ROWS  # 10,000: more is for `scprof sql`, not an agent's context
TOP_OPS_MAX = 1_000
FIND_MAX = 1_000
DEFAULT_UI_URL = "http://127.0.0.1:8050"  # where `scprof ui` serves by default
GUIDE = "agent_guide.md"
NARROW = "truncated, narrow the query"

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
SIMULATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


@dataclass
class Settings:
    """What `scprof mcp` was started with."""

    db: str
    allow_simulate: bool = False
    allow_ingest: list[str] = field(default_factory=list)  # folders, resolved (realpath)
    ui_url: str = DEFAULT_UI_URL


def guide_text() -> str:
    """The shipped agent guide (scprof/agent_guide.md), as `scprof mcp --guide` prints it."""
    return resources.files("scprof").joinpath(GUIDE).read_text()


@cache
def _analyzers_doc() -> str | None:
    """docs/analyzers.md when the package runs from its source tree (an editable install)."""
    path = Path(__file__).resolve().parents[1] / "docs" / "analyzers.md"
    return path.read_text() if path.is_file() else None


class Tools:
    """The tools' work, over one store; each method returns a JSON document or raises ScprofError."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.access = StoreAccess(settings.db)
        self._writing = threading.Lock()

    @contextlib.contextmanager
    def reading(self) -> Iterator[Store]:
        with self.access.open() as store:
            yield store

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        """The store opened for writing, the read-only connection closed first (one writer at a time)."""
        with self._writing:
            self.access.close()
            with Store.open(self.settings.db) as store:
                yield store

    def list_runs(self) -> dict[str, Any]:
        with self.reading() as store:
            return {"runs": answers.runs_doc(store)}

    def analyze(self, run: str, verify: bool, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        if not verify:
            with self.reading() as store:
                return answers.analysis_doc(store, run)
        if not self.settings.allow_simulate:
            raise ScprofError(
                "verify: this server may not simulate; restart it with `scprof mcp --allow-simulate` "
                "(each fix is simulated alone and its trial runs are stored), or call analyze without verify"
            )
        with self.writing() as store:
            return answers.verified_analysis_doc(store, run, progress)

    def run_summary(self, run: str) -> dict[str, Any]:
        with self.reading() as store:
            return answers.summary_doc(answers.analysis_doc(store, run))

    def compare(self, base: str, cand: str) -> dict[str, Any]:
        with self.reading() as store:
            return answers.comparison_doc(store, base, cand)

    def top_ops(self, run: str, steps: str | None, chip: int | None, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= TOP_OPS_MAX:
            raise ScprofError(f"limit: must be 1..{TOP_OPS_MAX:,}, got {limit}")
        with self.reading() as store:
            return answers.top_ops_doc(store, run, answers.steps_range(steps), chip, limit)

    def find_events(self, run: str, name: str, t0_ps: int | None, t1_ps: int | None, limit: int) -> dict[str, Any]:
        if not 1 <= limit <= FIND_MAX:
            raise ScprofError(f"limit: must be 1..{FIND_MAX:,}, got {limit}")
        with self.reading() as store:
            doc = answers.find_events_doc(store, run, name, _window(t0_ps, t1_ps), limit)
        if doc["truncated"]:
            doc["note"] = (
                f"{NARROW}: the first {len(doc['rows'])} of {doc['count']:,} events; give a window (t0_ps, t1_ps)"
            )
        return doc

    def sql(self, query: str, max_rows: int, timeout_s: float) -> dict[str, Any]:
        if isinstance(max_rows, int) and not 1 <= max_rows <= SQL_MAX_ROWS:
            raise ScprofError(f"max_rows: must be 1..{SQL_MAX_ROWS:,} here (`scprof sql` takes more), got {max_rows}")
        with self.reading() as store:
            doc = answers.sql_doc(store, query, max_rows, timeout_s, MAX_RESULT_BYTES)
        if doc["truncated"]:
            doc["note"] = f"{NARROW}: the first {len(doc['rows'])} rows (capped by {doc['capped_by']}); add LIMIT, "
            doc["note"] += "aggregate, or select fewer columns"
        return doc

    def timeline_link(self, run: str, steps: str | None, t0_ps: int | None, t1_ps: int | None) -> dict[str, Any]:
        from ui.state import encode

        span, _ = answers.steps_range(steps), _window(t0_ps, t1_ps)
        with self.reading() as store:
            run_id = store.resolve_run(run)
        query = encode({"run": run_id, "steps": f"{span[0]}:{span[1]}" if span else None, "t0": t0_ps, "t1": t1_ps})
        return self._link("/timeline" + query)

    def compare_link(self, base: str, cand: str) -> dict[str, Any]:
        from ui.state import encode

        with self.reading() as store:
            ids = {"base": store.resolve_run(base), "cand": store.resolve_run(cand)}
        return self._link("/compare" + encode(ids))

    def _link(self, path: str) -> dict[str, Any]:
        db = self.settings.db
        return {"url": self.settings.ui_url.rstrip("/") + path, "serve": f"scprof ui --db {_quote(db)}"}

    def ingest(self, paths: list[str], name: str | None, replace: bool) -> dict[str, Any]:
        from analyzers.kept_reports import analyse_and_keep
        from profiler.trace_to_store import ingest_traces

        if not self.settings.allow_ingest:
            raise ScprofError("ingest: this server may not ingest; restart it with `scprof mcp --allow-ingest DIR`")
        if not paths:
            raise ScprofError("paths: give at least one trace file or capture folder")
        checked = [self._allowed_path(p) for p in paths]
        with self.writing() as store:
            results = ingest_traces(store, checked, name, replace)
            warnings = [w for r in results if (w := analyse_and_keep(store, r.run_id))]
        runs = [{"run_id": r.run_id, "name": r.name, "events": r.events, "status": r.status,
                 "cut_message": r.cut_message} for r in results]  # fmt: skip
        return {"runs": runs, "warnings": warnings}

    def _allowed_path(self, path: str) -> str:
        """`path` resolved, if it lies in a folder --allow-ingest names (links followed first)."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise ScprofError(f"paths: {path!r} is not a path")
        real = os.path.realpath(path)
        for folder in self.settings.allow_ingest:
            if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
                return real
        allowed = ", ".join(self.settings.allow_ingest)
        raise ScprofError(f"paths: {path} is outside the folders this server may ingest from ({allowed})")


def _window(t0_ps: int | None, t1_ps: int | None) -> tuple[int, int] | None:
    if (t0_ps is None) != (t1_ps is None) or (t0_ps is not None and t1_ps <= t0_ps):  # type: ignore[operator]
        raise ScprofError("t0_ps, t1_ps: give both, with t0_ps < t1_ps (a time window in ps), or neither")
    return None if t0_ps is None else (t0_ps, t1_ps)  # type: ignore[return-value]


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _result(doc: dict[str, Any], rows_key: str | None = None) -> CallToolResult:
    """A structured result (and its JSON text), within MAX_RESULT_BYTES: rows of `rows_key` left out
    from the end, marked truncated, when it is over; a document without rows to cut is an error."""
    text = json.dumps(doc)
    if len(text.encode()) > MAX_RESULT_BYTES and rows_key:
        rows = doc[rows_key]
        lo, hi = 0, len(rows)  # the most rows that fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(json.dumps({**doc, rows_key: rows[:mid]}).encode()) + 200 <= MAX_RESULT_BYTES:
                lo = mid
            else:
                hi = mid - 1
        doc = {**doc, rows_key: rows[:lo], "truncated": True,
               "note": f"{NARROW}: {lo} of {len(rows)} rows fit in {MAX_RESULT_BYTES // 1024} KiB"}  # fmt: skip
        text = json.dumps(doc)
    if len(text.encode()) > MAX_RESULT_BYTES:
        raise ScprofError(
            f"the answer is {len(text.encode()) // 1024} KiB, over the {MAX_RESULT_BYTES // 1024} KiB a tool returns; "
            "ask for less (run_summary, top_ops, or sql with a narrower query)"
        )
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


def _answer(work: Callable[[], dict[str, Any]], rows_key: str | None = None) -> CallToolResult:
    """Run a tool's work: its document as the result, a ScprofError as a one-line tool error."""
    try:
        return _result(work(), rows_key)
    except ScprofError as e:
        raise ToolError(one_line(e)) from None
    except Exception as e:  # noqa: BLE001 - one line for the agent, the traceback in the server's log
        log.error("tool failed:\n%s", traceback.format_exc())
        raise ToolError(
            f"internal error: {type(e).__name__}: {one_line(e)} (the server's log has the details)"
        ) from None


def _progress(ctx: Context) -> Callable[[int, int], None]:
    """A progress(done, total) callback for work on a worker thread: MCP progress notifications."""
    import anyio.from_thread

    def report(done: int, total: int) -> None:
        with contextlib.suppress(Exception):  # a client gone or without a progress token: the work goes on
            anyio.from_thread.run(ctx.report_progress, done, total)

    return report


RunArg = Annotated[str, Field(description="run name, run_id, or a uuid prefix (6+ characters), as list_runs shows")]
StepsArg = Annotated[
    str | None, Field(description="steps A:B, half-open (steps A..B-1), as `--steps` takes them; null: all")
]


def build_server(settings: Settings) -> MCPServer:
    """The MCP server over `settings.db`, its tools, resources and prompts."""
    tools = Tools(settings)
    server = MCPServer(
        "scprof",
        title="scprof: SparseCore/TensorCore profiles",
        instructions=(
            "Profiles of training runs in one SQL store. Start with list_runs, then run_summary or analyze; "
            "compare two runs for a verdict with a 95% interval. Read the resource scprof://guide first: "
            "what to claim from which figure, and when to verify a fix by simulation."
        ),
        version=_version(),
        log_level="WARNING",
    )

    @server.tool(annotations=READ, title="List the stored runs")
    def list_runs() -> Annotated[CallToolResult, M.RunList]:
        """The runs in the store, oldest first: id, name, source, status (failed runs say why), steps the
        store times and how many summaries count, mean step time (ps), events. `scprof runs --json`."""
        return _answer(tools.list_runs, "runs")

    @server.tool(annotations=READ, title="Summarise a run")
    def run_summary(run: RunArg) -> Annotated[CallToolResult, M.Summary]:
        """A run in brief: mean/p50/p90 step time over its counted steps, the time split by category, the
        top findings and what could not be analysed. Cut from analyze's document (the same figures)."""
        return _answer(lambda: tools.run_summary(run))

    @server.tool(annotations=READ, title="Diagnose a run")
    def analyze(
        run: RunArg,
        verify: Annotated[
            bool,
            Field(
                description="simulate each finding's fix alone and say whether it helps (emulated runs; "
                "needs a server started with --allow-simulate; takes seconds to minutes)"
            ),
        ] = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, M.Analysis]:
        """What slows the run down: findings (most severe first) with evidence figures, affected entities,
        a query reproducing the evidence and the config fix; every analyzer's figures; notes on data the
        run lacks. `scprof analyze RUN --json` (with verify: `--verify --json`)."""
        progress = _progress(ctx) if verify and ctx is not None else None
        return _answer(lambda: tools.analyze(run, verify, progress))

    @server.tool(annotations=READ, title="Compare two runs")
    def compare(
        base: Annotated[str, Field(description="the baseline run (name, run_id or uuid prefix)")],
        cand: Annotated[str, Field(description="the candidate run")],
    ) -> Annotated[CallToolResult, M.Comparison]:
        """Did the candidate's step time change? The verdict (improved / regressed / no significant
        change) with the relative change and its 95% bootstrap interval over the counted steps; per
        category, per op (with intervals) and per table deltas; findings resolved / new / persisting;
        config differences. `scprof compare BASE CAND --json`."""
        return _answer(lambda: tools.compare(base, cand))

    @server.tool(annotations=READ, title="Top ops of a run")
    def top_ops(
        run: RunArg,
        steps: StepsArg = None,
        chip: Annotated[int | None, Field(description="only the events of this chip (-1: the host)")] = None,
        limit: Annotated[int, Field(description=f"rows to return, 1..{TOP_OPS_MAX:,}")] = 20,
    ) -> Annotated[CallToolResult, M.TopOps]:
        """Which ops take the time: per kind of core and op, events, total and self time (ps), share of
        the kind's self time, FLOPs and bytes; device work first, by self time. Over the whole run these
        are analyze's `ops` figures; narrow with steps and chip."""
        return _answer(lambda: tools.top_ops(run, steps, chip, limit), "rows")

    @server.tool(annotations=READ, title="Find events by name")
    def find_events(
        run: RunArg,
        name: Annotated[str, Field(description="text the events' names contain (case-insensitive, not a pattern)")],
        t0_ps: Annotated[int | None, Field(description="window start, ps (with t1_ps); null: the whole run")] = None,
        t1_ps: Annotated[int | None, Field(description="window end, ps")] = None,
        limit: Annotated[int, Field(description=f"events to return, 1..{FIND_MAX:,}")] = 50,
    ) -> Annotated[CallToolResult, M.FoundEvents]:
        """Events whose name contains the text, in time order, as the Timeline's find: each with its
        event_id, track (plane, line, kind, chip), step, start_ps and dur_ps, and how many match in all."""
        return _answer(lambda: tools.find_events(run, name, t0_ps, t1_ps, limit), "rows")

    @server.tool(annotations=READ, title="Read-only SQL over the store")
    def sql(
        query: Annotated[str, Field(description="one read-only SELECT (tables and views: resource scprof://schema)")],
        max_rows: Annotated[int, Field(description=f"row cap, 1..{SQL_MAX_ROWS:,}")] = SQL_DEFAULT_ROWS,
        timeout_s: Annotated[float, Field(description="time limit in seconds")] = sql_guard.DEFAULT_TIMEOUT_S,
    ) -> Annotated[CallToolResult, M.SqlResult]:
        """Run one read-only query, as `scprof sql QUERY --format json` does: the same guard (one SELECT;
        no writes, DDL, ATTACH, COPY, PRAGMA, SET), worker process, time limit and memory cap. Bind run
        ids as literals from list_runs; times are integer picoseconds. Results over the row or byte cap
        come back truncated."""
        return _answer(lambda: tools.sql(query, max_rows, timeout_s), "rows")

    @server.tool(annotations=READ, title="Link to a run's timeline")
    def timeline_link(
        run: RunArg,
        steps: StepsArg = None,
        t0_ps: Annotated[int | None, Field(description="window start, ps (with t1_ps)")] = None,
        t1_ps: Annotated[int | None, Field(description="window end, ps")] = None,
    ) -> Annotated[CallToolResult, M.Link]:
        """A deep link into `scprof ui`'s Timeline page for a person to open: the run, its steps A..B-1
        or a time window. The UI must be serving this store (the `serve` command)."""
        return _answer(lambda: tools.timeline_link(run, steps, t0_ps, t1_ps))

    @server.tool(annotations=READ, title="Link to a comparison")
    def compare_link(
        base: Annotated[str, Field(description="the baseline run")],
        cand: Annotated[str, Field(description="the candidate run")],
    ) -> Annotated[CallToolResult, M.Link]:
        """A deep link into `scprof ui`'s Compare page for the two runs, for a person to open."""
        return _answer(lambda: tools.compare_link(base, cand))

    if settings.allow_ingest:

        @server.tool(
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
            title="Ingest captures into the store",
        )
        def ingest(
            paths: Annotated[list[str], Field(description="trace files or capture folders, under an allowed folder")],
            name: Annotated[str | None, Field(description="run name (one path only)")] = None,
            replace: Annotated[bool, Field(description="replace runs with the same id or name")] = False,
        ) -> Annotated[CallToolResult, M.Ingested]:
            """Store trace files (.sctrace), XProf captures (.xplane.pb, a run folder, a logdir) or Chrome
            trace JSON as runs, all or nothing, and analyse them. Only paths under the folders the server
            was started with (--allow-ingest DIR) are read. `scprof ingest PATH... --name --replace`."""
            return _answer(lambda: tools.ingest(paths, name, replace))

    _add_resources(server)
    _add_prompts(server)
    return server


def _add_resources(server: MCPServer) -> None:
    @server.resource(
        "scprof://guide", name="agent-guide", title="How to diagnose with scprof", mime_type="text/markdown"
    )
    def guide() -> str:
        """How to diagnose a run, when to verify a fix, how to read an interval, what not to claim."""
        return guide_text()

    @server.resource("scprof://schema", name="schema", title="The store's tables and views", mime_type="text/markdown")
    def schema() -> str:
        """Every table, view and macro of the store with its columns and units (docs/schema.md)."""
        from profiler.schema import markdown

        return markdown()

    if _analyzers_doc() is not None:

        @server.resource(
            "scprof://analyzers", name="analyzers", title="The analyzers and their rules", mime_type="text/markdown"
        )
        def analyzers() -> str:
            """What each analyzer looks at and every finding rule it can emit (docs/analyzers.md)."""
            return _analyzers_doc() or ""


def _add_prompts(server: MCPServer) -> None:
    @server.prompt(name="diagnose", title="Diagnose a run")
    def diagnose(run: str) -> str:
        """Find what slows RUN down and what to change, with evidence."""
        return (
            f"Diagnose the run {run!r} in the scprof store, following the resource scprof://guide: call "
            f"run_summary, then analyze; for each finding with a fix, call analyze with verify=true if the "
            "server allows it. Report the step time, the findings most severe first with their evidence "
            "figures, and the fixes that simulation verified; say which were not verified and why."
        )

    @server.prompt(name="did_it_improve", title="Did the candidate improve on the baseline?")
    def did_it_improve(base: str, cand: str) -> str:
        """Whether CAND's step time improved on BASE's, with the interval, and why."""
        return (
            f"Did the run {cand!r} improve on {base!r}? Call compare with base={base!r} and cand={cand!r}; "
            "answer with its verdict, the change and its 95% interval, the counted steps on each side, and "
            "the categories and ops that moved most. Do not call a change that the verdict does not."
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scprof")
    except PackageNotFoundError:
        return "0"


def serve(settings: Settings, transport: str, host: str, port: int, token: str | None) -> None:
    """Serve until the client closes stdin (stdio) or the process is stopped (http)."""
    server = build_server(settings)
    if transport == "stdio":
        server.run("stdio")
        return
    import anyio
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(require_token(app, token) if token else app, host=host, port=port, log_level="warning")
    print(f"scprof: MCP server on http://{_url_host(host)}:{port}/mcp (store {settings.db})", file=sys.stderr)
    anyio.run(uvicorn.Server(config).serve)


def _url_host(host: str) -> str:
    from ui.auth import url_host

    return url_host(host)


def require_token(app: Any, token: str) -> Any:
    """An ASGI app that answers 401 unless a request carries `Authorization: Bearer <token>`."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = b'{"error": "access token needed: send Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json")]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def cmd_mcp(args: Any) -> int:
    """`scprof mcp`: check the flags (one line, exit 2, before serving), then serve."""
    from profiler.store import default_path
    from ui.auth import check_can_listen, check_token, is_loopback

    if args.guide:
        print(guide_text(), end="")
        return 0
    folders = []
    for folder in args.allow_ingest:
        if not os.path.isdir(folder):
            raise ScprofError(f"--allow-ingest: {folder} is not a folder")
        folders.append(os.path.realpath(folder))
    db = os.path.abspath(args.db or default_path())  # the links' `serve` command works from anywhere
    if os.path.exists(db):
        with Store.open(db, read_only=True):  # fail now, on the command line, if it is not a store
            pass
    else:
        print(f"scprof: {db} holds no store yet; list_runs will say how to record a run", file=sys.stderr)
    token = None
    if args.transport == "http":
        if not 0 < args.port < 65536:
            raise ScprofError(f"--port: must be 1..65535, got {args.port}")
        token = check_token(args.token) if args.token is not None else None
        if not is_loopback(args.host) and token is None:
            raise ScprofError(
                f"--host {args.host} is not a loopback address: the tools would be reachable from the network; "
                "give --token (16+ characters that every client sends as `Authorization: Bearer <token>`)"
            )
        check_can_listen(args.host, args.port)
    elif args.token is not None or args.host != "127.0.0.1":
        raise ScprofError("--host and --token are for --transport http")
    settings = Settings(db, args.allow_simulate, folders, args.ui_url)
    serve(settings, args.transport, args.host, args.port, token)
    return 0

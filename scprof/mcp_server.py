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

import hmac
import os
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from profiler import sql_guard
from profiler.errors import ScprofError
from profiler.store import Store
from scprof import mcp_schemas as schemas
from scprof.mcp_simulate import Simulating, add_simulate_tools
from scprof.mcp_tools import (
    BREAKDOWN_STEPS_MAX,
    EVENTS_DEFAULT,
    EVENTS_MAX,
    FIND_MAX,
    MAX_RESULT_BYTES,
    SQL_DEFAULT_ROWS,
    SQL_MAX_ROWS,
    TOP_OPS_MAX,
    WORKERS_MAX,
    Settings,
    Tools,
    answer,
    progress_of,
)

__all__ = ["MAX_RESULT_BYTES", "Settings", "build_server", "cmd_mcp", "guide_text"]

GUIDE = "agent_guide.md"
READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def guide_text() -> str:
    """The shipped agent guide (scprof/agent_guide.md), as `scprof mcp --guide` prints it."""
    return resources.files("scprof").joinpath(GUIDE).read_text()


@cache
def _analyzers_doc() -> str | None:
    """docs/analyzers.md when the package runs from its source tree (an editable install)."""
    path = Path(__file__).resolve().parents[1] / "docs" / "analyzers.md"
    return path.read_text() if path.is_file() else None


RunArg = Annotated[str, Field(description="run name, run_id, or a uuid prefix (6+ characters), as list_runs shows")]
StepsArg = Annotated[
    str | None, Field(description="steps A:B, half-open (steps A..B-1), as `--steps` takes them; null: all")
]


def build_server(settings: Settings) -> MCPServer:
    """The MCP server over `settings.db`, its tools, resources and prompts."""
    tools = Tools(settings)
    sim = Simulating(tools)
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
    def list_runs(
        trials: Annotated[
            bool, Field(description="also list what-if trials (runs verify, attribute and tune simulated)")
        ] = False,
    ) -> Annotated[CallToolResult, schemas.RunList]:
        """The runs in the store, oldest first: id, name, source, status (failed runs say why), steps the
        store times and how many summaries count, mean step time (ps), events. `scprof runs --json`
        (what-if trials only with trials=true, as `--trials`)."""
        return answer(lambda: tools.list_runs(trials), "runs")

    @server.tool(annotations=READ, title="Summarise a run")
    def run_summary(run: RunArg) -> Annotated[CallToolResult, schemas.Summary]:
        """A run in brief: mean/p50/p90 step time over its counted steps, the time split by category, the
        top findings and what could not be analysed. Cut from analyze's document (the same figures)."""
        return answer(lambda: tools.run_summary(run))

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
    ) -> Annotated[CallToolResult, schemas.Analysis]:
        """What slows the run down: findings (most severe first) with evidence figures, affected entities,
        a query reproducing the evidence and the config fix; every analyzer's figures; notes on data the
        run lacks. `scprof analyze RUN --json` (with verify: `--verify --json`)."""
        if not verify:
            return answer(lambda: tools.analysis(run))
        progress = progress_of(ctx) if ctx is not None else None
        return answer(lambda: sim.verified_analysis(run, progress))

    @server.tool(annotations=READ, title="Compare two runs")
    def compare(
        base: Annotated[str, Field(description="the baseline run (name, run_id or uuid prefix)")],
        cand: Annotated[str, Field(description="the candidate run")],
        attribute: Annotated[
            bool,
            Field(
                description="simulate each changed config key alone on the base and left out of the candidate: "
                "its share of the gain (emulated runs; needs a server started with --allow-simulate)"
            ),
        ] = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, schemas.Comparison]:
        """Did the candidate's step time change? The verdict (improved / regressed / no change /
        inconclusive / not enough steps) with the relative change and its 95% interval over the counted steps; per
        category, per op (with intervals) and per table deltas; findings resolved / new / persisting;
        config differences. `scprof compare BASE CAND --json` (with attribute: `--attribute --json`)."""
        if not attribute:
            return answer(lambda: tools.comparison(base, cand))
        progress = progress_of(ctx) if ctx is not None else None
        return answer(lambda: sim.attribution(base, cand, progress))

    @server.tool(annotations=READ, title="Top ops of a run")
    def top_ops(
        run: RunArg,
        steps: StepsArg = None,
        chip: Annotated[int | None, Field(description="only the events of this chip (-1: the host)")] = None,
        limit: Annotated[int, Field(description=f"rows to return, 1..{TOP_OPS_MAX:,}")] = 20,
    ) -> Annotated[CallToolResult, schemas.TopOps]:
        """Which ops take the time: per kind of core and op, events, total and self time (ps), share of
        the kind's self time, FLOPs and bytes; device work first, by self time. Over the whole run these
        are analyze's `ops` figures; narrow with steps and chip."""
        return answer(lambda: tools.top_ops(run, steps, chip, limit), "rows")

    @server.tool(annotations=READ, title="Events in a window")
    def events(
        run: RunArg,
        steps: Annotated[str | None, Field(description="steps A:B: the window is their span on the Timeline")] = None,
        t0_ps: Annotated[int | None, Field(description="window start, ps (with t1_ps); null: steps or the run")] = None,
        t1_ps: Annotated[int | None, Field(description="window end, ps")] = None,
        plane: Annotated[str | None, Field(description="only tracks whose plane contains this text")] = None,
        line: Annotated[str | None, Field(description="only tracks whose line contains this text (e.g. Ops)")] = None,
        kind: Annotated[str | None, Field(description="only tracks of this kind: tensorcore, sparsecore, host")] = None,
        chip: Annotated[int | None, Field(description="only tracks of this chip (-1: the host)")] = None,
        limit: Annotated[int, Field(description=f"slices to return, 1..{EVENTS_MAX:,}")] = EVENTS_DEFAULT,
    ) -> Annotated[CallToolResult, schemas.Events]:
        """What the Timeline shows in a window, as rows: the events and step markers (event_id -1) of
        the chosen tracks that overlap [t0_ps, t1_ps) (or steps A..B-1, or the whole run), in time
        order, each with its track (plane, line, kind, chip), name, step, start and duration (ps);
        and per track how many there are. Capped: narrow the window or the tracks when truncated."""
        f = {"plane": plane, "line": line, "kind": kind, "chip": chip}
        return answer(lambda: tools.events(run, steps, t0_ps, t1_ps, f, limit), "rows")

    @server.tool(annotations=READ, title="Time split per step and chip")
    def step_breakdown(
        run: RunArg,
        steps: StepsArg = None,
        chip: Annotated[int | None, Field(description="per step, this chip's time (null: mean over chips)")] = None,
        limit: Annotated[int, Field(description=f"steps to return, 1..{BREAKDOWN_STEPS_MAX:,}")] = 500,
    ) -> Annotated[CallToolResult, schemas.StepBreakdown]:
        """The Overview page's time split: per step, each category's time in ps (SparseCore, TensorCore,
        collectives, host wait, idle, ...; the mean over chips or one chip's), and per chip each
        category's mean time per counted step. Shows which steps or chips are out of line."""
        return answer(lambda: tools.step_breakdown(run, steps, chip, limit), "rows")

    @server.tool(annotations=READ, title="Find events by name")
    def find_events(
        run: RunArg,
        name: Annotated[str, Field(description="text the events' names contain (case-insensitive, not a pattern)")],
        t0_ps: Annotated[int | None, Field(description="window start, ps (with t1_ps); null: the whole run")] = None,
        t1_ps: Annotated[int | None, Field(description="window end, ps")] = None,
        limit: Annotated[int, Field(description=f"events to return, 1..{FIND_MAX:,}")] = 50,
    ) -> Annotated[CallToolResult, schemas.FoundEvents]:
        """Events whose name contains the text, in time order, as the Timeline's find: each with its
        event_id, track (plane, line, kind, chip), step, start_ps and dur_ps, and how many match in all."""
        return answer(lambda: tools.find_events(run, name, t0_ps, t1_ps, limit), "rows")

    @server.tool(annotations=READ, title="Read-only SQL over the store")
    def sql(
        query: Annotated[str, Field(description="one read-only SELECT (tables and views: resource scprof://schema)")],
        max_rows: Annotated[int, Field(description=f"row cap, 1..{SQL_MAX_ROWS:,}")] = SQL_DEFAULT_ROWS,
        timeout_s: Annotated[float, Field(description="time limit in seconds")] = sql_guard.DEFAULT_TIMEOUT_S,
    ) -> Annotated[CallToolResult, schemas.SqlResult]:
        """Run one read-only query, as `scprof sql QUERY --format json` does: the same guard (one SELECT;
        no writes, DDL, ATTACH, COPY, PRAGMA, SET), worker process, time limit and memory cap. Bind run
        ids as literals from list_runs; times are integer picoseconds. Results over the row or byte cap
        come back truncated."""
        return answer(lambda: tools.sql(query, max_rows, timeout_s), "rows")

    @server.tool(annotations=READ, title="Link to a run's timeline")
    def timeline_link(
        run: RunArg,
        steps: StepsArg = None,
        t0_ps: Annotated[int | None, Field(description="window start, ps (with t1_ps)")] = None,
        t1_ps: Annotated[int | None, Field(description="window end, ps")] = None,
    ) -> Annotated[CallToolResult, schemas.Link]:
        """A deep link into `scprof ui`'s Timeline page for a person to open: the run, its steps A..B-1
        or a time window. The UI must be serving this store (the `serve` command)."""
        return answer(lambda: tools.timeline_link(run, steps, t0_ps, t1_ps))

    @server.tool(annotations=READ, title="Link to a comparison")
    def compare_link(
        base: Annotated[str, Field(description="the baseline run")],
        cand: Annotated[str, Field(description="the candidate run")],
    ) -> Annotated[CallToolResult, schemas.Link]:
        """A deep link into `scprof ui`'s Compare page for the two runs, for a person to open."""
        return answer(lambda: tools.compare_link(base, cand))

    if settings.allow_ingest:

        @server.tool(
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
            title="Ingest captures into the store",
        )
        def ingest(
            paths: Annotated[list[str], Field(description="trace files or capture folders, under an allowed folder")],
            name: Annotated[str | None, Field(description="run name (one path only)")] = None,
            replace: Annotated[bool, Field(description="replace runs with the same id or name")] = False,
        ) -> Annotated[CallToolResult, schemas.Ingested]:
            """Store trace files (.sctrace), XProf captures (.xplane.pb, a run folder, a logdir) or Chrome
            trace JSON as runs, all or nothing, and analyse them. Only paths under the folders the server
            was started with (--allow-ingest DIR) are read. `scprof ingest PATH... --name --replace`."""
            return answer(lambda: tools.ingest(paths, name, replace))

    if settings.allow_simulate:
        add_simulate_tools(server, sim)
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
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]}
                )
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
    out = None
    if args.out is not None:
        from sim_backend.recording.record import check_out_root

        out = os.path.realpath(check_out_root(args.out))
    if not 1 <= args.workers <= WORKERS_MAX:
        raise ScprofError(f"--workers: must be 1..{WORKERS_MAX}, got {args.workers}")
    settings = Settings(db, args.allow_simulate, folders, args.ui_url, out, args.workers)
    serve(settings, args.transport, args.host, args.port, token)
    return 0

"""The MCP tools' work over one store (scprof/mcp_server.py registers them): each method returns a
JSON document of scprof/answers.py or raises ScprofError, whose one line becomes the tool error.

Reads go through one read-only connection (ui/store_access.py); a tool that writes (ingest, and
the simulating tools of scprof/mcp_simulate.py) waits for the reads under way, keeps new ones
waiting meanwhile (Gate), and opens the store for writing. Results are capped in rows here and in
bytes by `result` (MAX_RESULT_BYTES of JSON), marked `truncated` with a note on how to ask less.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from profiler import sql_guard
from profiler.errors import ScprofError, one_line
from profiler.store import Store
from scprof import answers
from ui.store_access import StoreAccess

log = logging.getLogger("scprof.mcp")

MAX_RESULT_BYTES = 256 * 2**10  # JSON of one structured result, at most
SERIES_MAX = 200  # rows of a per-step series in `analyze`'s figures (series_cut)
SQL_DEFAULT_ROWS = 200
SQL_MAX_ROWS = sql_guard.DEFAULT_MAX_ROWS  # 10,000: more is for `scprof sql`, not an agent's context
TOP_OPS_MAX = 1_000
FIND_MAX = 1_000
EVENTS_DEFAULT = 200
EVENTS_MAX = 5_000
BREAKDOWN_STEPS_MAX = 5_000
WORKERS_MAX = 32  # `scprof mcp --workers`: trial simulations at once
WRITER_WAIT_S = 60.0  # how long a read waits for a tool that writes before it says the store is busy
DEFAULT_UI_URL = "http://127.0.0.1:8050"  # where `scprof ui` serves by default
NARROW = "truncated, narrow the query"


@dataclass
class Settings:
    """What `scprof mcp` was started with."""

    db: str
    allow_simulate: bool = False
    allow_ingest: list[str] = field(default_factory=list)  # folders, resolved (realpath)
    ui_url: str = DEFAULT_UI_URL
    out: str | None = None  # where simulated runs' folders go (default: runs/ beside the store)
    workers: int = 1  # Dask workers that simulate trials (verify, attribute, tune); 1: in this process

    @property
    def out_root(self) -> str:
        """The folder every file a simulating tool writes lies under (never one an agent names)."""
        return os.path.realpath(self.out or os.path.join(os.path.dirname(os.path.abspath(self.db)), "runs"))


class Cancelled(Exception):
    """The client cancelled the request: the work stops at its next safe point."""


class Gate:
    """Many readers or one writer: a tool that writes waits for the reads under way and holds new
    ones back (DuckDB refuses a read-only and a writing connection to one file in one process). A
    read waits at most `wait_s` for a writer, then says the store is busy."""

    def __init__(self, wait_s: float = WRITER_WAIT_S) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self.wait_s = wait_s

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            if not self._cond.wait_for(lambda: not self._writer, self.wait_s):
                raise ScprofError(
                    f"the store is being written (a simulation or ingest under way for over {self.wait_s:.0f} s); "
                    "call again when it finishes"
                )
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._writer = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class Tools:
    """The read tools' work (and ingest), over one store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.access = StoreAccess(settings.db)
        self.gate = Gate()

    @contextlib.contextmanager
    def reading(self) -> Iterator[Store]:
        with self.gate.read(), self.access.open() as store:
            yield store

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        """The store opened for writing, the read-only connection closed first (one writer at a time)."""
        with self.gate.write():
            self.access.close()
            with Store.open(self.settings.db) as store:
                yield store

    def list_runs(self, trials: bool = False) -> dict[str, Any]:
        with self.reading() as store:
            return {"runs": answers.runs_doc(store, trials)}

    def analysis(self, run: str) -> dict[str, Any]:
        with self.reading() as store:
            return self._analysis(store, run)

    def _analysis(self, store: Store, run: str) -> dict[str, Any]:
        """`scprof analyze RUN --json`: the run's stored analysis (analyzers/runstats.py), its per-step
        series cut to SERIES_MAX rows (series_cut)."""
        return series_cut(answers.analysis_doc(store, store.resolve_run(run)))

    def run_summary(self, run: str) -> dict[str, Any]:
        with self.reading() as store:
            return answers.summary_doc(self._analysis(store, run))

    def comparison(self, base: str, cand: str) -> dict[str, Any]:
        """`scprof compare BASE CAND --json`, computed once per pair of run contents as the UI's Compare
        computes it (ui.data.compare: a comparison of two long runs takes seconds; a run is never changed
        once stored, and a replaced one is a new key)."""
        from ui.data import compare

        with self.reading() as store:
            doc, why = compare(store, store.resolve_run(base), store.resolve_run(cand))
        if doc is None:
            raise ScprofError(why or "the runs cannot be compared")
        return answers.jsonable(doc)

    def top_ops(self, run: str, steps: str | None, chip: int | None, limit: int) -> dict[str, Any]:
        _limit(limit, TOP_OPS_MAX)
        span = answers.steps_range(steps)
        with self.reading() as store:
            whole_run = self._analysis(store, run) if span is None and chip is None else None
            doc = answers.top_ops_doc(store, run, span, chip, limit, whole_run)
        if doc["truncated"]:
            doc["note"] = f"{NARROW}: the top {len(doc['rows'])} of {doc['ops']:,} ops by self time; raise limit"
        return doc

    def events(
        self, run: str, steps: str | None, t0_ps: int | None, t1_ps: int | None, tracks: dict[str, Any], limit: int
    ) -> dict[str, Any]:
        _limit(limit, EVENTS_MAX)
        span, window = answers.steps_range(steps), _window(t0_ps, t1_ps)
        with self.reading() as store:
            doc = answers.events_doc(store, run, window, span, tracks, limit)
        if doc["truncated"]:
            doc["note"] = (
                f"{NARROW}: the first {len(doc['rows'])} of {doc['count']:,} slices in time order; give a shorter "
                "window (t0_ps, t1_ps, or steps) or filter the tracks (plane, line, kind, chip; `tracks` has counts)"
            )
        return doc

    def step_breakdown(self, run: str, steps: str | None, chip: int | None, limit: int) -> dict[str, Any]:
        _limit(limit, BREAKDOWN_STEPS_MAX)
        with self.reading() as store:
            doc = answers.step_breakdown_doc(store, run, answers.steps_range(steps), chip, limit)
        if doc["truncated"]:
            doc["note"] = f"{NARROW}: the first {len(doc['rows'])} steps; give steps A:B"
        return doc

    def find_events(self, run: str, name: str, t0_ps: int | None, t1_ps: int | None, limit: int) -> dict[str, Any]:
        _limit(limit, FIND_MAX)
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
        import shlex

        db = self.settings.db
        return {"url": self.settings.ui_url.rstrip("/") + path, "serve": f"scprof ui --db {shlex.quote(db)}"}

    def ingest(self, paths: list[str], name: str | None, replace: bool) -> dict[str, Any]:
        from analyzers import materialize
        from profiler.trace_to_store import ingest_traces

        if not self.settings.allow_ingest:
            raise ScprofError("ingest: this server may not ingest; restart it with `scprof mcp --allow-ingest DIR`")
        if not paths:
            raise ScprofError("paths: give at least one trace file or capture folder")
        checked = [self.allowed_path(p, "paths") for p in paths]
        with self.writing() as store:
            results = ingest_traces(store, checked, name, replace)
            warnings = [w for r in results if (w := materialize.build(store, r.run_id))]
        runs = [
            {"run_id": r.run_id, "name": r.name, "events": r.events, "status": r.status, "cut_message": r.cut_message}
            for r in results
        ]
        return {"runs": runs, "warnings": warnings}

    def allowed_path(self, path: str, arg: str, folders: list[str] | None = None, verb: str = "ingest from") -> str:
        """`path` resolved, if it lies in one of `folders` (default: those --allow-ingest names; links
        followed first)."""
        folders = self.settings.allow_ingest if folders is None else folders
        if not isinstance(path, str) or not path or "\0" in path:
            raise ScprofError(f"{arg}: {path!r} is not a path")
        real = os.path.realpath(path)
        for folder in folders:
            if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
                return real
        allowed = ", ".join(folders) or "none"
        raise ScprofError(f"{arg}: {path} is outside the folders this server may {verb} ({allowed})")


def _limit(limit: int, most: int) -> None:
    if not 1 <= limit <= most:
        raise ScprofError(f"limit: must be 1..{most:,}, got {limit}")


def series_cut(doc: dict[str, Any], most: int = SERIES_MAX) -> dict[str, Any]:
    """An analysis document whose figure lists (per-step series: idle_gaps.device_by_step, ...) hold at
    most `most` rows, each cut one named in its analyzer's notes with how many rows it has and where
    all of them are: a long run's series would pass the result's byte cap (11,700 steps: 724 KiB)."""
    figures, notes = dict(doc.get("figures") or {}), {k: list(v) for k, v in (doc.get("notes") or {}).items()}
    for name, f in figures.items():
        long = {k: v for k, v in (f or {}).items() if isinstance(v, list) and len(v) > most}
        if long:
            figures[name] = {**f, **{k: v[:most] for k, v in long.items()}}
            notes.setdefault(name, []).extend(
                f"{k}: the first {most:,} of {len(v):,} rows here (all of them: `scprof analyze RUN --json`, "
                "or the sql tool)"
                for k, v in long.items()
            )
    return {**doc, "figures": figures, "notes": notes}


def _window(t0_ps: int | None, t1_ps: int | None) -> tuple[int, int] | None:
    if (t0_ps is None) != (t1_ps is None) or (t0_ps is not None and t1_ps <= t0_ps):  # type: ignore[operator]
        raise ScprofError("t0_ps, t1_ps: give both, with t0_ps < t1_ps (a time window in ps), or neither")
    return None if t0_ps is None else (t0_ps, t1_ps)  # type: ignore[return-value]


def result(doc: dict[str, Any], rows_key: str | None = None) -> CallToolResult:
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
        doc = {
            **doc,
            rows_key: rows[:lo],
            "truncated": True,
            "note": f"{NARROW}: {lo} of {len(rows)} rows fit in {MAX_RESULT_BYTES // 1024} KiB",
        }
        text = json.dumps(doc)
    if len(text.encode()) > MAX_RESULT_BYTES:
        raise ScprofError(
            f"the answer is {len(text.encode()) // 1024} KiB, over the {MAX_RESULT_BYTES // 1024} KiB a tool returns; "
            "ask for less (run_summary, top_ops, or sql with a narrower query)"
        )
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


def answer(work: Callable[[], dict[str, Any]], rows_key: str | None = None) -> CallToolResult:
    """Run a tool's work: its document as the result, a ScprofError as a one-line tool error."""
    try:
        return result(work(), rows_key)
    except ScprofError as e:
        raise ToolError(one_line(e)) from None
    except Cancelled:
        raise ToolError("cancelled by the client") from None
    except Exception as e:  # noqa: BLE001 - one line for the agent, the traceback in the server's log
        log.error("tool failed:\n%s", traceback.format_exc())
        raise ToolError(
            f"internal error: {type(e).__name__}: {one_line(e)} (the server's log has the details)"
        ) from None


def progress_of(ctx: Context) -> Callable[[int, int], None]:
    """A progress(done, total) callback for work on a worker thread: MCP progress notifications."""
    import anyio.from_thread

    def report(done: int, total: int) -> None:
        with contextlib.suppress(Exception):  # a client gone or without a progress token: the work goes on
            anyio.from_thread.run(ctx.report_progress, done, total)

    return report


async def run_cancellable(work: Callable[[threading.Event], CallToolResult]) -> CallToolResult:
    """Run `work(stop)` on a worker thread; when the client cancels the request, set `stop` (the work
    ends at its next safe point, in its thread) and let the cancellation go on. The thread keeps the
    store's write gate until it has stopped, so the next call sees the store as it left it."""
    import anyio
    import anyio.to_thread

    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(lambda: work(stop), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        raise

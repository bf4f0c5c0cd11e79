"""`scprof` command line: record, ingest, runs, sql (and more as they land).

Exit codes: 0 success; 2 usage or input error with one
line on stderr naming the argument or file; 1 internal error (traceback only
with --debug). This package sits at the end of the data flow, so it is the one
place allowed to import from every other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence

from profiler import sqltree, store_faults, units
from profiler.errors import ScprofError, StoreError
from profiler.progress import TerminalProgress
from profiler.store import Store, default_path
from scprof import answers, formatting, query_cmds
from sim_backend.config_checks import MAX_STEPS


class UsageError(ScprofError):
    """A bad command line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 through our handler."""

    def error(self, message: str) -> None:  # type: ignore[override]
        where = self.prog.removeprefix("scprof").strip()
        raise UsageError(f"{where + ': ' if where else ''}{message} (see --help)")


def _steps_count(text: str) -> int:
    """record --steps: a whole number within the bound every config's `steps` has."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}") from None
    if not 1 <= n <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"{n} is outside 1..{MAX_STEPS:,}")
    return n


def _budget(text: str) -> int:
    return _bounded_int(text, "--budget", 1, 10_000)


def _workers(text: str) -> int:
    return _bounded_int(text, "--workers", 1, 1024)


def _bounded_int(text: str, flag: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag}: expected a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise UsageError(f"{flag}: {value} is outside {low}..{high:,}")
    return value


def cmd_tune(args: argparse.Namespace) -> int:
    from scprof.whatif_cmds import cmd_tune as run

    return run(args)


def cmd_mcp(args: argparse.Namespace) -> int:
    from scprof.mcp_server import cmd_mcp as run

    return run(args)


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="store path (default: $SCPROF_DB or ./scprof.duckdb)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scprof", description="Record, query and compare SparseCore/TensorCore profiles.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("record", help="run a workload config in the emulator, write its trace and ingest it")
    p.add_argument("config", help="workload config (TOML), e.g. configs/baseline.toml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--name", help="run name (default: the config's name)")
    p.add_argument("--steps", type=_steps_count, help=f"number of training steps to simulate (1..{MAX_STEPS:,})")
    p.add_argument("--out", metavar="DIR", help="folder for the run's folder: DIR/<name>/ (default: runs/<name>/)")
    p.add_argument(
        "--perf-tables",
        metavar="DIR",
        help="performance tables (collectives.json, gemm.json) for the cost model "
        "(default: bundled tables of the hardware generation)",
    )
    p.add_argument("--replace", action="store_true", help="replace a run with the same name")
    _db_arg(p)
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("ingest", help="ingest trace files into the store (all or nothing)")
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="scprof trace (.sctrace) or XProf capture (.xplane.pb, run dir, logdir)",
    )
    p.add_argument("--name", help="run name (default: from the trace header)")
    p.add_argument("--replace", action="store_true", help="replace runs with the same id or name")
    p.add_argument("--allow-truncated", action="store_true", help="keep the complete chunks of a cut file")
    _db_arg(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("runs", help="list the runs in the store")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--trials", action="store_true", help="also list what-if trials (runs --verify, --attribute and tune simulated)"
    )
    _db_arg(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("sql", help="run a read-only SQL query against the store")
    p.add_argument("query", help="one SELECT statement (tables: see docs/schema.md)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--max-rows", type=int, default=10_000, help="row cap, 1..1000000 (default 10000)")
    p.add_argument("--timeout", type=float, default=30.0, help="time limit in seconds, up to 3600 (default 30)")
    _db_arg(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("analyze", help="find what slows a run down, with evidence and what to change")
    p.add_argument("run", metavar="RUN", help="run name or id")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--verify", action="store_true", help="simulate each finding's fix alone (emulated runs) and say if it helps"
    )
    p.add_argument(
        "--trust-paths",
        action="store_true",
        help="let the re-simulation read paths the stored config names that the store does not hold "
        "(ID files, perf tables, a limits file of an older run); refused by default",
    )
    _db_arg(p)
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("compare", help="compare a candidate run against a baseline")
    p.add_argument("base", metavar="BASE", help="baseline run name or id")
    p.add_argument("cand", metavar="CAND", help="candidate run name or id")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--attribute", action="store_true", help="simulate each changed key alone and left out: its share of the gain"
    )
    p.add_argument(
        "--trust-paths",
        action="store_true",
        help="let the re-simulation read paths the stored config names that the store does not hold "
        "(ID files, perf tables, a limits file of an older run); refused by default",
    )
    _db_arg(p)
    p.set_defaults(func=cmd_compare)

    query_cmds.add_parsers(sub, _db_arg)

    p = sub.add_parser("tune", help="search for a faster config, each step proven by simulation (emulated runs)")
    p.add_argument("target", metavar="CONFIG|RUN", help="a workload config (TOML) or a stored emulated run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="start from this change")
    p.add_argument(
        "--trust-paths",
        action="store_true",
        help="let the re-simulation read paths the stored config names that the store does not hold "
        "(ID files, perf tables, a limits file of an older run); refused by default",
    )
    p.add_argument("--budget", type=_budget, default=40, help="most simulations to run (default 40)")
    p.add_argument(
        "--workers",
        type=_workers,
        default=min(os.cpu_count() or 1, 8),
        help="Dask workers here (default: CPUs, at most 8)",
    )
    p.add_argument("--scheduler", metavar="ADDR", help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="folder for the tuning's folders, as runs/ is by default: "
        "DIR/tuned/<run>/ (tuned.toml, trials/), DIR/whatif/<name>/ (a CONFIG's run)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    _db_arg(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("ui", help="serve the web UI over the store (read-only)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument(
        "--token",
        help="access token every request must carry (off loopback one is made up and printed when not given)",
    )
    _db_arg(p)
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("mcp", help="serve the store to AI agents over the Model Context Protocol (read-only)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="http: address to bind (default 127.0.0.1; others need --token)")
    p.add_argument("--port", type=int, default=8765, help="http: port (default 8765)")
    p.add_argument("--token", help="http: access token every request must carry (Authorization: Bearer)")
    p.add_argument(
        "--allow-simulate",
        action="store_true",
        help="offer the tools that simulate: analyze verify, compare attribute, record, tune",
    )
    p.add_argument("--out", metavar="DIR", help="folder for simulated runs' folders (default: runs/ beside the store)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="Dask workers that simulate trials for verify, attribute and tune (default 1: in process)",
    )
    p.add_argument("--allow-ingest", action="append", default=[], metavar="DIR", help="let agents ingest from DIR")
    p.add_argument("--ui-url", default="http://127.0.0.1:8050", help="where `scprof ui` serves, for links")
    p.add_argument("--guide", action="store_true", help="print the agent guide and exit")
    _db_arg(p)
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser("export", help="write a run in another tool's format")
    fmt = p.add_subparsers(dest="format", metavar="FORMAT", parser_class=_Parser)
    fmt.required = True
    for name, help_text in EXPORT_FORMATS.items():
        q = fmt.add_parser(name, help=help_text)
        q.add_argument("run", metavar="RUN", help="run name or id")
        q.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write")
        q.add_argument("--steps", metavar="A:B", help="only steps A..B-1")
        q.add_argument("--check", action="store_true", help="re-read and validate the written file")
        _db_arg(q)
        q.set_defaults(func=cmd_export)
    return parser


# Export formats: name -> help. Each lives in exporters/<name>.py as
# export_run(store, run_id, path, steps: tuple[int, int] | None, check: bool) -> str (a summary line).
EXPORT_FORMATS = {
    "perfetto": "Perfetto protobuf trace (open in ui.perfetto.dev)",
    "xspace": "XProf XSpace (.xplane.pb) for XProf/TensorBoard",
}


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """--steps A:B as a half-open range."""
    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise UsageError(f"--steps: expected A:B with whole numbers, got {text!r}") from None
    if a < 0 or b <= a:
        raise UsageError(f"--steps: need 0 <= A < B, got {text!r}")
    return a, b


def cmd_analyze(args: argparse.Namespace) -> int:
    from analyzers import runstats
    from scprof.report import render_report

    if args.verify:
        from scprof.whatif_cmds import verify_and_render

        return verify_and_render(args)

    with Store.open(args.db, read_only=True) as store:
        if args.json:
            print(json.dumps(answers.analysis_doc(store, args.run)))
            return 0
        report = runstats.report(store, store.resolve_run(args.run))
    print(units.escape_lines(render_report(report)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from analyzers.compare import compare_runs
    from scprof.report import render_comparison

    if args.attribute:
        from scprof.whatif_cmds import attribute_and_render

        return attribute_and_render(args)

    with Store.open(args.db, read_only=True) as store:
        if args.json:
            print(json.dumps(answers.comparison_doc(store, args.base, args.cand)))
            return 0
        comparison = compare_runs(store, store.resolve_run(args.base), store.resolve_run(args.cand))
    print(units.escape_lines(render_comparison(comparison)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(f"exporters.{args.format}")
    steps = parse_steps(args.steps)
    with Store.open(args.db, read_only=True) as store:
        run_id = store.resolve_run(args.run)
        print(units.escape_control(module.export_run(store, run_id, args.output, steps, args.check)))
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from analyzers import materialize
    from profiler.trace_to_store import ingest_trace
    from scprof.report import render_recorded
    from sim_backend.errors import RecordInterrupted, RunFailure
    from sim_backend.recording.record import format_summary, record_run

    db = args.db or default_path()
    try:
        result = record_run(
            args.config,
            args.set,
            args.name,
            args.steps,
            None,
            progress=sys.stdout.isatty(),
            perf_tables=args.perf_tables,
            check=_record_check(db, args.replace),
            root=args.out,  # --out DIR: the run's folder is DIR/<name>/, as runs/<name>/ by default
        )
    except RunFailure as failure:
        # A failed run is still a run: store what it recorded, then fail the command.
        if failure.trace_path:
            with Store.open(db) as store:
                stored = ingest_trace(store, failure.trace_path, name=args.name, replace=args.replace)
                _warn(materialize.build(store, stored.run_id))
        raise
    except RecordInterrupted as stop:
        path = shlex.quote(stop.partial_path)
        print(
            f"scprof: interrupted; the partial trace is kept in {path} "
            f"(store its complete steps with: scprof ingest --allow-truncated {path})",
            file=sys.stderr,
        )
        return 130
    with Store.open(db) as store:
        ingested = ingest_trace(store, result.trace_path, name=result.run_name, replace=args.replace)
        _warn(materialize.build(store, ingested.run_id))
        recorded = answers.recorded_doc(store, ingested.run_id, ingested.events)
    for warning in result.warnings:
        _warn(warning)
    print(render_recorded(ingested.name, recorded))
    if files := format_summary(result):
        print(files)
    print(f"trace: {result.trace_path}")
    print(f"run {ingested.name!r} stored as run_id {ingested.run_id} in {db}")
    return 0


def _warn(warning: str | None) -> None:
    """A warning line on stderr (`scprof: warning: ...`), when there is one."""
    if warning:
        print(f"scprof: warning: {units.escape_control(warning)}", file=sys.stderr)


def _record_check(db: str, replace: bool) -> Callable[[str, str, str], None]:
    """What `record` checks before it simulates or writes anything: the run's name and id
    are new to the store (or --replace), and its trace would not overwrite the store or the
    source trace of a stored run it does not replace."""

    def check(name: str, uuid: str, trace_path: str) -> None:
        target = os.path.realpath(trace_path)
        if target in (os.path.realpath(db), os.path.realpath(db + ".wal")):
            raise UsageError(f"--out: the trace {trace_path} would overwrite the store {db}")
        if not os.path.exists(db):
            return
        with Store.open(db, read_only=True) as store:
            runs = sqltree.execute(store.con, "cli.runs.identities").fetchall()
        clash = [r for r in runs if r[1] == name or r[2] == uuid]
        if clash and not replace:
            run_id, old_name, old_uuid, _ = clash[0]
            if old_uuid == uuid:
                raise StoreError(f"{db}: already holds this run (uuid {uuid}, run_id {run_id}); pass --replace")
            raise StoreError(
                f"{db}: already holds a run named {old_name!r} (run_id {run_id}); pass --replace or --name"
            )
        replaced = {r[0] for r in clash}
        for run_id, old_name, _, source in runs:
            if run_id not in replaced and source and os.path.realpath(source) == target:
                raise StoreError(
                    f"{trace_path}: is the trace of stored run {old_name!r} (run_id {run_id}); "
                    "record elsewhere with --out or --name"
                )

    return check


def cmd_ingest(args: argparse.Namespace) -> int:
    from analyzers import materialize
    from profiler.trace_to_store import ingest_traces

    db = args.db or default_path()
    created = not os.path.exists(db)
    try:
        with Store.open(db) as store:
            bar = TerminalProgress("ingesting") if sys.stdout.isatty() else None
            results = ingest_traces(store, args.paths, args.name, args.replace, args.allow_truncated, bar)
            for r in results:
                _warn(materialize.build(store, r.run_id))
    except BaseException:
        if created:  # a failed ingest leaves no new, empty store behind either
            for leftover in (db, db + ".wal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(leftover)
        raise
    for r in results:
        line = f"ingested {r.name!r} as run_id {r.run_id}: {r.events:,} events"
        if r.cut_message:
            line += f" (truncated: {r.cut_message})"
        print(units.escape_control(line))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        if args.json:
            print(json.dumps(answers.runs_doc(store, args.trials)))
            return 0
        table = sqltree.query(store.con, "stdlib.runs.runs_listed", trials=args.trials)
        hidden = 0 if args.trials else sqltree.query(store.con, "stdlib.runs.trials_count").column("trials")[0].as_py()
    if table.num_rows == 0 and not hidden:
        print("no runs yet: record one with `scprof record configs/baseline.toml`")
    elif table.num_rows:
        print(formatting.runs_table(table))
    if hidden:  # on stderr: the listing itself is what it was before the trials
        print(f"({hidden} what-if trial(s) not listed: `scprof runs --trials` lists them)", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from profiler.sql_guard import check_limits, check_read_only, run_query

    check_limits(args.max_rows, args.timeout)  # before opening anything: one line, exit 2
    check_read_only(args.query)
    with Store.open(args.db, read_only=True) as store:
        result = run_query(store, args.query, max_rows=args.max_rows, timeout_s=args.timeout)
    print(formatting.render(result.table, args.format), end="")
    if result.capped_by == "bytes":
        print(
            f"(showing the first {result.table.num_rows} rows: results are capped at {result.max_bytes // 2**20} MiB; "
            "add LIMIT or select fewer or shorter columns)",
            file=sys.stderr,
        )
    elif result.truncated:
        print(f"(showing the first {result.max_rows} rows; raise --max-rows or add LIMIT)", file=sys.stderr)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from ui.app import serve
    from ui.auth import check_can_listen, check_token, is_loopback, new_token

    if not 0 < args.port < 65536:
        raise UsageError(f"--port: must be 1..65535, got {args.port}")
    if not args.host.strip():
        raise UsageError("--host: give an address to listen on, e.g. 127.0.0.1 (this machine) or 0.0.0.0 (all)")
    token = check_token(args.token) if args.token is not None else None
    loopback = is_loopback(args.host)  # one line, exit 2, when it does not resolve
    made_up = not loopback and token is None
    if made_up:
        token = new_token()
    check_can_listen(args.host, args.port)  # a port in use or a foreign address: one line, before serving
    db = args.db or default_path()
    if os.path.exists(db):
        with Store.open(db, read_only=True):  # fail now, on the command line, if it is not a store
            pass
    else:
        print(f"scprof: {db} holds no store yet; the UI shows how to record a run", file=sys.stderr)
    if not loopback:
        print(
            f"scprof: warning: --host {args.host} is not a loopback address: the UI and its SQL console are "
            "reachable from the network; every request needs the access token",
            file=sys.stderr,
        )
    serve(db, args.host, args.port, token, show_token=made_up)
    return 0


# Arguments that become data (names, queries, --set values), not paths: they must be text.
_TEXT_ARGS = {
    "name": "--name",
    "run": "RUN",
    "target": "CONFIG|RUN",
    "base": "BASE",
    "cand": "CAND",
    "query": "QUERY",
    "text": "TEXT",
    "set": "--set",
}


def _check_text_args(args: argparse.Namespace) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates; the store cannot hold them."""
    for attr, flag in _TEXT_ARGS.items():
        value = getattr(args, attr, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise UsageError(f"{flag} {v!r}: not valid UTF-8 text") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    args = None
    try:
        args = parser.parse_args(argv)
        _check_text_args(args)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except ScprofError as e:
        if debug:
            traceback.print_exc()
        print(f"scprof: error: {units.escape_control(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # noqa: BLE001 - last line of defence, reported as internal
        if debug:
            traceback.print_exc()
        fault = store_faults.translate(e, getattr(args, "db", None) or default_path()) if args is not None else None
        if fault is not None:  # a damaged store or a full disk met outside `with Store.open(...)`
            print(f"scprof: error: {units.escape_control(fault)}", file=sys.stderr)
            return 2
        print(
            f"scprof: internal error: {type(e).__name__}: {units.escape_control(e)} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())

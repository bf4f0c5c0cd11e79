"""The CLI's read questions beyond `analyze` and `compare`: `summary`, `ops`, `events`, `find` and
`breakdown`. Each prints, with `--json`, the document of scprof/answers.py that the MCP tool of the
same question returns (run_summary, top_ops, events, find_events, step_breakdown), and otherwise
that document as text: one definition, two surfaces."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from profiler.errors import ScprofError
from profiler.store import Store
from profiler.units import escape_control, escape_lines, format_ps, format_si, text_table
from scprof import answers

ROWS_MAX = 1_000_000  # --limit's bound: rows are read into memory before they are printed


def add_parsers(sub: Any, db_arg: Callable[[argparse.ArgumentParser], None]) -> None:
    """The commands' parsers, on the CLI's subparsers."""
    p = sub.add_parser("summary", help="a run in brief: step time, time split, top findings")
    p.add_argument("run", metavar="RUN", help="run name or id")
    _json(p)
    db_arg(p)
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("ops", help="which ops take the time: self time per op, over the run or some steps/a chip")
    p.add_argument("run", metavar="RUN", help="run name or id")
    p.add_argument("--steps", metavar="A:B", help="only the events of steps A..B-1")
    p.add_argument("--chip", type=int, help="only the events of this chip (-1: the host)")
    _limit(p, 20)
    _json(p)
    db_arg(p)
    p.set_defaults(func=cmd_ops)

    p = sub.add_parser("events", help="the Timeline's events in a window, as rows")
    p.add_argument("run", metavar="RUN", help="run name or id")
    p.add_argument("--steps", metavar="A:B", help="the span of steps A..B-1 on the Timeline")
    p.add_argument("--window", metavar="T0:T1", help="the time window [T0, T1) in ps")
    p.add_argument("--plane", help="only tracks whose plane contains this text")
    p.add_argument("--line", help="only tracks whose line contains this text (e.g. Ops)")
    p.add_argument("--kind", help="only tracks of this kind: tensorcore, sparsecore, host, ...")
    p.add_argument("--chip", type=int, help="only tracks of this chip (-1: the host)")
    _limit(p, 200)
    _json(p)
    db_arg(p)
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("find", help="events whose name contains some text, in time order")
    p.add_argument("run", metavar="RUN", help="run name or id")
    p.add_argument("text", metavar="TEXT", help="text the names contain (case-insensitive, not a pattern)")
    p.add_argument("--window", metavar="T0:T1", help="only in the time window [T0, T1) in ps")
    _limit(p, 50)
    _json(p)
    db_arg(p)
    p.set_defaults(func=cmd_find)

    p = sub.add_parser("breakdown", help="the time split per step (and per chip), as the Overview draws it")
    p.add_argument("run", metavar="RUN", help="run name or id")
    p.add_argument("--steps", metavar="A:B", help="only steps A..B-1")
    p.add_argument("--chip", type=int, help="per step, this chip's time (default: the mean over chips)")
    _limit(p, 500)
    _json(p)
    db_arg(p)
    p.set_defaults(func=cmd_breakdown)


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _limit(p: argparse.ArgumentParser, default: int) -> None:
    p.add_argument("--limit", type=int, default=default, help=f"rows to print, 1..{ROWS_MAX:,} (default {default})")


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= ROWS_MAX:
        raise ScprofError(f"--limit: must be 1..{ROWS_MAX:,}, got {limit}")


def _window(text: str | None) -> tuple[int, int] | None:
    """--window T0:T1 (ps, T0 < T1), or None."""
    if text is None:
        return None
    try:
        t0, t1 = (int(x) for x in text.split(":"))
    except ValueError:
        raise ScprofError(f"--window: expected T0:T1 in whole picoseconds, got {text!r}") from None
    if t1 <= t0:
        raise ScprofError(f"--window: need T0 < T1, got {text!r}")
    return t0, t1


def _print(doc: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], str]) -> int:
    print(json.dumps(doc) if as_json else escape_lines(text(doc)))
    return 0


def _shown(doc: dict[str, Any], what: str) -> str:
    """The line under a capped listing."""
    total = doc.get("count", doc.get("ops", doc.get("steps_in_range")))
    more = f" of {total:,}" if isinstance(total, int) else ""
    cut = "; raise --limit or narrow the question" if doc["truncated"] else ""
    return f"({len(doc['rows']):,}{more} {what}{cut})"


def cmd_summary(args: argparse.Namespace) -> int:
    with Store.open(args.db, read_only=True) as store:
        doc = answers.summary_doc(answers.analysis_doc(store, args.run))
    return _print(doc, args.json, summary_text)


def cmd_ops(args: argparse.Namespace) -> int:
    _check_limit(args.limit)
    steps = answers.steps_range(args.steps, "--steps")
    with Store.open(args.db, read_only=True) as store:
        doc = answers.top_ops_doc(store, args.run, steps, args.chip, args.limit)
    return _print(doc, args.json, ops_text)


def cmd_events(args: argparse.Namespace) -> int:
    _check_limit(args.limit)
    steps, window = answers.steps_range(args.steps, "--steps"), _window(args.window)
    tracks = {"plane": args.plane, "line": args.line, "kind": args.kind, "chip": args.chip}
    with Store.open(args.db, read_only=True) as store:
        doc = answers.events_doc(store, args.run, window, steps, tracks, args.limit)
    return _print(doc, args.json, events_text)


def cmd_find(args: argparse.Namespace) -> int:
    _check_limit(args.limit)
    window = _window(args.window)
    with Store.open(args.db, read_only=True) as store:
        doc = answers.find_events_doc(store, args.run, args.text, window, args.limit)
    return _print(doc, args.json, events_text)


def cmd_breakdown(args: argparse.Namespace) -> int:
    _check_limit(args.limit)
    steps = answers.steps_range(args.steps, "--steps")
    with Store.open(args.db, read_only=True) as store:
        doc = answers.step_breakdown_doc(store, args.run, steps, args.chip, args.limit)
    return _print(doc, args.json, breakdown_text)


def _run_line(doc: dict[str, Any]) -> str:
    return escape_control(f"run {doc['run']['name']!r} (run_id {doc['run']['run_id']})")


def summary_text(doc: dict[str, Any]) -> str:
    out = [_run_line(doc)]
    st = doc["step_time"]
    if st:
        out.append(
            f"step time  mean {format_ps(st['step_ps_mean'])}  p50 {format_ps(st['step_ps_p50'])}  "
            f"p90 {format_ps(st['step_ps_p90'])}  {st.get('covers', '')}".rstrip()
        )
    else:
        out.append("step time  - (no steps)")
    if doc["share"]:
        shares = sorted(doc["share"].items(), key=lambda kv: -kv[1])
        out.append("time split " + "  ".join(f"{k} {v:.1%}" for k, v in shares if v >= 0.001))
    out.append(f"findings   {doc['findings']} ({doc['fixable']} with a config fix)")
    for f in doc["top_findings"]:
        out.append(escape_control(f"  [{f['severity']}] {f['title']}"))
    for analyzer, reasons in doc["notes"].items():  # what an analyzer could not look at, and why
        out.extend(escape_control(f"not analysed ({analyzer}): {why}") for why in reasons)
    return "\n".join(out)


def ops_text(doc: dict[str, Any]) -> str:
    where = []
    if doc["steps"]:
        where.append(f"steps {doc['steps'][0]}..{doc['steps'][1] - 1}")
    if doc["chip"] is not None:
        where.append(f"chip {doc['chip']}")
    head = _run_line(doc) + (f", {', '.join(where)}" if where else "")
    rows = [
        [
            r["track_kind"],
            r["name"],
            f"{r['events']:,}",
            format_ps(r["self_ps"]),
            format_ps(r["total_ps"]),
            f"{r['share']:.1%}",
            format_si(r.get("flops"), "FLOP"),
            format_si(r.get("bytes"), "B"),
        ]
        for r in doc["rows"]
    ]
    table = text_table(["kind", "op", "events", "self", "total", "share", "flops", "bytes"], rows)
    return "\n".join([head, table, _shown(doc, "ops")])


def events_text(doc: dict[str, Any]) -> str:
    rows = [
        [
            str(r["start_ps"]),
            format_ps(r["dur_ps"]),
            "-" if r["step"] is None else str(r["step"]),
            f"{r['plane']} / {r['line']}",
            r["name"],
        ]
        for r in doc["rows"]
    ]
    table = text_table(["start_ps", "dur", "step", "track", "name"], rows)
    return "\n".join([_run_line(doc), table, _shown(doc, "events")])


def breakdown_text(doc: dict[str, Any]) -> str:
    cats = doc["categories"]
    rows = [[str(r["step"]), format_ps(r["total_ps"]), *(format_ps(r[c]) for c in cats)] for r in doc["rows"]]
    per_step = text_table(["step", "total", *cats], rows)
    chips = [[str(r["chip"]), *(format_ps(r[c]) for c in cats)] for r in doc["per_chip"]]
    per_chip = text_table(["chip", *cats], chips)
    who = "mean over chips" if doc["chip"] is None else f"chip {doc['chip']}"
    return "\n".join(
        [
            _run_line(doc),
            f"per step ({who}):",
            per_step,
            _shown(doc, "steps"),
            f"per chip (mean per counted step, {doc['counted_steps']} counted steps):",
            per_chip,
        ]
    )

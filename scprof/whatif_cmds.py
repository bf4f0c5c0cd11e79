"""The CLI's what-if commands: `analyze --verify`, `compare --attribute` and `tune`, and
their text output. The work is the what-if engine's (whatif/); this module parses, opens
the store for writing, and prints."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from analyzers.compare import interval_text
from profiler import sqltree, units
from profiler.errors import ScprofError
from profiler.progress import TerminalProgress
from profiler.store import Store, default_path
from profiler.units import format_ps, signed_pct
from whatif.engine import DEFAULT_ROOT, Change, Session
from whatif.executor import Executor


def _progress(label: str) -> TerminalProgress | None:
    return TerminalProgress(label, "trials") if sys.stdout.isatty() else None


def verify_and_render(args: argparse.Namespace) -> int:
    """`scprof analyze RUN --verify` (its work is scprof/answers.py's verified_report, as the MCP tool's)."""
    from scprof.answers import verified_doc, verified_report
    from scprof.report import render_report

    db = args.db or default_path()
    _check_sessions(db, "verify", args.run, trust=args.trust_paths)
    with Store.open(db) as store, Executor() as ex:
        run_id = store.resolve_run(args.run)
        report, simulations, not_verified = verified_report(
            store, run_id, ex, _progress("verifying"), trust_paths=args.trust_paths
        )
    if args.json:
        print(json.dumps(verified_doc(report, simulations, not_verified)))
    else:
        print(units.escape_lines(render_report(report)))
        print(
            units.escape_control(f"\n{not_verified}")
            if not_verified
            else f"\n{simulations} simulation{'s' if simulations != 1 else ''} run to verify the fixes"
        )
    return 0


def attribute_and_render(args: argparse.Namespace) -> int:
    """`scprof compare BASE CAND --attribute` (its work is scprof/answers.py's attribution, as the MCP tool's)."""
    from scprof.answers import attributed_doc, attribution
    from scprof.report import render_comparison

    db = args.db or default_path()
    _check_sessions(db, "attribute", args.base, args.cand, trust=args.trust_paths)
    with Store.open(db) as store, Executor() as ex:
        ids = store.resolve_run(args.base), store.resolve_run(args.cand)
        comparison, result, not_attributed = attribution(
            store, *ids, ex, _progress("attributing"), trust_paths=args.trust_paths
        )
    if args.json:
        print(json.dumps(attributed_doc(comparison, result, not_attributed)))
    else:
        print(units.escape_lines(render_comparison(comparison)))
        print()
        print(
            units.escape_control(not_attributed) if not_attributed else units.escape_lines(render_attribution(result))
        )
    return 0


def render_attribution(a: dict[str, Any]) -> str:
    gain = a["gain_ps"]
    out = [
        f"Attribution of the change {signed_pct(a['total_change'])} ({'faster' if gain > 0 else 'slower'} by "
        f"{format_ps(abs(gain))} per step) to the changed keys ({a['simulations']} new simulations; "
        "trials the store held are reused):"
    ]
    if not a["changes"]:
        out.append("  no user-set key differs: nothing to attribute")
    for r in a["changes"]:
        share = "-" if r["share"] is None else f"{r['share']:.0%}"
        alone = "-" if r["alone_change"] is None else signed_pct(r["alone_change"])
        out.append(
            f"  {share:>5} of the gain  {r['key']}: {_short(r['base'])} -> {_short(r['cand'])}  "
            f"(alone {alone}, left out costs {_ps(r['left_out_gain_ps'])})"
        )
        if r["derived"]:
            out.append(
                f"         with {len(r['derived'])} derived key{'s' if len(r['derived']) != 1 else ''} "
                f"({', '.join(r['derived'][:3])}{', ...' if len(r['derived']) > 3 else ''})"
            )
    if a["interaction_ps"] is not None and len(a["changes"]) > 1:
        out.append(f"  interaction (the gain not explained by the changes alone): {_ps(a['interaction_ps'])}")
    if a["unreplayable"]:
        out.append(f"  not replayable as --set (added or removed entries): {', '.join(a['unreplayable'][:6])}")
    return "\n".join(out)


def cmd_tune(args: argparse.Namespace) -> int:
    """`scprof tune CONFIG|RUN`. Everything the user gave is checked before anything is written:
    --set (syntax, finite values, then the config with them), --out, the store and the run,
    --scheduler; a refusal is one line and leaves the store, its file and the folders as they were."""
    from sim_backend.config import effective_config
    from sim_backend.config_load import config_paths, load_config
    from sim_backend.recording.record import check_out_root
    from whatif.tune import tune

    sets = _parse_sets(args.set)
    root = check_out_root(args.out) if args.out is not None else "runs"
    db = args.db or default_path()
    from_config = os.path.isfile(args.target)
    own: frozenset[tuple[str, str]] = frozenset()
    if from_config:  # the config with its --set: the user's one-line error; the paths it names are the user's
        own = frozenset(
            (k, node[n]) for k, node, n in config_paths(effective_config(load_config(args.target, args.set)))
        )
    else:
        sets = _check_start(db, args.target, sets, args.trust_paths)
    with Executor(args.workers, args.scheduler) as ex:
        if args.scheduler is not None:
            ex.connect()  # a scheduler that cannot be reached is the user's error, said before any work
        with Store.open(db) as store:
            if from_config:
                origin, sets = _record_origin(store, args.target, args.set, root), {}
            else:
                origin = store.resolve_run(args.target)
            name = sqltree.query(store.con, "cli.runs.run_name", run=origin).to_pylist()[0]["name"]
            out_dir = os.path.join(root, "tuned", _dir(name))
            session = Session(
                store,
                origin,
                "tune",
                ex,
                root=os.path.join(out_dir, "trials"),
                progress=_progress("tuning"),
                trust_paths=args.trust_paths,
                given=sets,
                own_paths=own,
            )
            result = tune(session, Change(session.given), args.budget, out_dir)
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
        return 0
    b, best = result.baseline, result.best
    print(
        units.escape_lines(
            "\n".join(
                [
                    f"tuning {b['run']!r}: {len(result.trials)} trials, {result.simulations} simulations; stopped: {result.stopped}",
                    "",
                ]
                + [_trial_line(t) for t in result.trials]
                + [
                    "",
                    f"best: {best['run']!r} {format_ps(b['step_time_ps'])} -> {format_ps(best['step_time_ps'])} "
                    f"({interval_text(best['change'], best['ci_low'], best['ci_high'])})",
                    f"changes: {Change(best['overrides'], best['derive_limits']).describe()}",
                    f"tuned config: {best['config']} (scprof record {best['config']})",
                ]
            )
        )
    )
    return 0


def _trial_line(t: dict[str, Any]) -> str:
    mark = "accepted" if t["accepted"] else "        "
    ps = format_ps(t["step_time_ps"]) if t["step_time_ps"] is not None else "-"
    return f"  {mark}  {ps:>9}  {Change(t['overrides'], t['derive_limits']).describe()}  [{t['reason']}]"


def _parse_sets(items: list[str]) -> dict[str, Any]:
    """--set KEY=VALUE items as dotted key -> value; a malformed item or a value that is not
    finite (nan, inf, 1e400 inside a list too) is the user's one-line error."""
    from sim_backend.config_load import parse_value

    sets = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ScprofError(f"--set {item!r}: expected KEY=VALUE")
        parsed = parse_value(value.strip())
        if not _finite(parsed):
            raise ScprofError(f"--set {item!r}: not a finite value (NaN and infinities are refused)")
        sets[key.strip()] = parsed
    return sets


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _check_sessions(db: str, purpose: str, ref: str, cand: str | None = None, trust: bool = False) -> None:
    """`analyze --verify`, `compare --attribute`: the store exists and holds the runs, and the
    paths their stored configs name may be used (whatif/paths.py: a refused or unreadable one is
    one line), checked read-only before anything is written: neither a store file nor a change
    to one is left behind. A run that is not emulated is the command's to report."""
    from whatif.attribute import candidate_changes
    from whatif.configs import NotEmulated

    with Store.open(db, read_only=True) as store:
        run_id = store.resolve_run(ref)
        cand_id = store.resolve_run(cand) if cand is not None else None
        try:
            session = Session(store, run_id, purpose, Executor(), trust_paths=trust)
            if cand_id is not None:
                candidate_changes(session, sqltree.query(store.con, "cli.runs.run", run=cand_id).to_pylist()[0])
        except NotEmulated:
            pass


def _check_start(db: str, ref: str, sets: dict[str, Any], trust: bool) -> dict[str, Any]:
    """`tune RUN`: the store, the run (emulated), the paths its config names and the config
    with --set applied, checked on the store opened read-only, before anything is written.
    The --set with its paths made absolute against the working directory."""
    with Store.open(db, read_only=True) as store:
        session = Session(store, store.resolve_run(ref), "tune", Executor(), trust_paths=trust, given=sets)
        if sets:
            session.check(Change(session.given))
    return session.given


def _record_origin(store: Store, config_path: str, overrides: list[str], root: str) -> int:
    """Record the config into `<root>/whatif/<name>/` (reusing an identical stored run) and
    return its run_id."""
    from profiler.trace_to_store import ingest_trace
    from sim_backend.config_load import load_config
    from sim_backend.recording.record import record_run

    cfg = load_config(config_path, overrides)
    found: dict[str, int] = {}

    def check(name: str, uuid: str, trace_path: str) -> None:
        same = sqltree.query(store.con, "cli.runs.runs_of_uuid", uuid=uuid).to_pylist()
        if same:
            found["run_id"] = same[0]["run_id"]
            raise _Reuse

    name = cfg.name
    if sqltree.execute(store.con, "cli.runs.name_taken", name=name).fetchall():
        name = f"{name}~start"
    folder = os.path.join(root, os.path.basename(DEFAULT_ROOT), _dir(name))
    try:
        result = record_run(config_path, overrides, name, None, folder, check=check)
    except _Reuse:
        return found["run_id"]
    return ingest_trace(store, result.trace_path, name=result.run_name, replace=True).run_id


class _Reuse(Exception):
    """The store already holds this exact run."""


def _dir(name: str) -> str:
    from sim_backend.recording.record import dir_name

    return dir_name(name)


def _ps(v: float | None) -> str:
    if v is None:
        return "-"
    return ("\u2212" if v < 0 else "") + format_ps(abs(v))  # a true minus, as signed_pct


def _short(v: Any) -> str:
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."

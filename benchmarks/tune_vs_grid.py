"""The 64-point grid that `scprof tune` is judged against, on the untuned configs.

For each `configs/untuned/*.toml` (or the configs given): every combination of
  flags.tf_xla_disable_full_embedding_pipelining  false, true
  flags.maximum_parallel_iterations               1, 2, 4, 8
  derived limits                                   off, on (a record with
                                                   flags.xla_sparse_core_estimate_max_ids=true
                                                   writes limits.toml; the point then runs
                                                   with flags.xla_sparse_core_max_ids_file)
  host.num_threads                                 the config's, twice the config's
  sparsecore.max_tables_per_stack                  0 (no cap), half the largest stack (>= 1)
is simulated in process (`simulate_point`: record, ingest into a scratch store, the mean
of the counted steps of the store's step_times: the step time every part of scprof uses).
A point that fails (compile error, HBM OOM, a limit error) or drops IDs is not a
candidate for "best". Prints a table per config, then one JSON line:
{"benchmark": "tune_vs_grid", "configs": [{"config", "grid_points", "grid_simulations",
"grid_best_ps", "grid_best_overrides", "grid_worst_ps", "base_ps", ...}, ...]}; per
config, the tuner's figures beside them: `scprof tune` from the config as it is
(whatif.tune on Dask, --workers processes), its step time and simulations, whether it is
within 2% of the grid's best, whether its accepted trials only ever got faster, and the step
time of its tuned.toml recorded again (within 1% of what tune claimed?).

Usage: nice python benchmarks/tune_vs_grid.py [CONFIG ...] [--workers 2] [--out FILE] [--no-grid]
(--out: every point's result as JSON, for a closer look; --no-grid: the tuner only).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analyzers.context import step_times  # noqa: E402
from profiler.errors import ScprofError  # noqa: E402
from profiler.store import Store  # noqa: E402
from profiler.trace_to_store import ingest_trace  # noqa: E402
from sim_backend.config_load import load_config  # noqa: E402
from sim_backend.errors import RunFailure  # noqa: E402
from sim_backend.recording.record import record_run  # noqa: E402

UNTUNED = REPO / "configs" / "untuned"
PIPELINING_OFF = "flags.tf_xla_disable_full_embedding_pipelining"
PREFETCH = "flags.maximum_parallel_iterations"
THREADS = "host.num_threads"
STACK_CAP = "sparsecore.max_tables_per_stack"
ESTIMATE = "flags.xla_sparse_core_estimate_max_ids"
LIMITS_FILE_KEY = "flags.xla_sparse_core_max_ids_file"
PREFETCH_DEPTHS = (1, 2, 4, 8)


def largest_stack(config_path: str) -> int:
    """Tables in the config's largest stack (as jax-tpu-embedding stacks them,
    sim_backend/stacking.py), before any cap."""
    from sim_backend.emulator import setup

    return max(len(g.tables) for g in setup(load_config(config_path))[2])


def grid_points(config_path: str) -> list[dict[str, object]]:
    """The 64 grid points of a config: {"set": {key: value}, "derive_limits": bool}, the
    shape of a finding's fix (analyzers/findings.py), so a point can be handed to the
    what-if engine as it is."""
    cfg = load_config(config_path)
    threads = cfg.host.num_threads
    cap = max(1, largest_stack(config_path) // 2)
    points: list[dict[str, object]] = []
    for off, depth, derive, n_threads, stack_cap in itertools.product(
        (False, True), PREFETCH_DEPTHS, (False, True), (threads, 2 * threads), (0, cap)
    ):
        points.append(
            {
                "set": {PIPELINING_OFF: off, PREFETCH: depth, THREADS: n_threads, STACK_CAP: stack_cap},
                "derive_limits": derive,
            }
        )
    return points


def _set_items(overrides: dict) -> list[str]:
    """--set KEY=VALUE strings of a dict, values written as TOML (json's strings, numbers
    and booleans are TOML's too)."""
    return [f"{k}={json.dumps(v)}" for k, v in overrides.items()]


def _mean_counted_step_ps(trace_path: str, workdir: str) -> float:
    """Ingest a trace into a scratch store and return the mean of its counted step times."""
    store = Store.open(os.path.join(workdir, "store.duckdb"))
    try:
        run_id = ingest_trace(store, trace_path).run_id
        t = step_times(store, run_id).to_pylist()
    finally:
        store.close()
    counted = [r["step_ps"] for r in t if r["counted"]]
    return sum(counted) / len(counted)


def simulate_point(config_path: str, overrides: dict, derive_limits: bool, workdir: str) -> dict:
    """Simulate one point in `workdir`: {"step_time_ps" (None on failure), "failure" (None
    or one line), "dropped_ids", "minibatches_per_step", "simulations", "wall_s"}.

    derive_limits: first record with limit estimation on (and no limits file), then record
    with the limits file it wrote, both under `overrides`: what the what-if engine does."""
    t0 = time.perf_counter()
    sets = _set_items(overrides)
    simulations = 0
    out: dict = {"step_time_ps": None, "failure": None, "dropped_ids": None, "minibatches_per_step": None}
    try:
        if derive_limits:
            simulations += 1
            derived = record_run(
                config_path,
                [*sets, f"{ESTIMATE}=true", f'{LIMITS_FILE_KEY}=""'],
                "derive",
                None,
                os.path.join(workdir, "derive"),
            )
            sets = [*sets, f"{LIMITS_FILE_KEY}={json.dumps(derived.limits_path)}"]
        simulations += 1
        r = record_run(config_path, sets, "point", None, os.path.join(workdir, "point"))
        out.update(
            step_time_ps=_mean_counted_step_ps(r.trace_path, workdir),
            dropped_ids=r.dropped_ids,
            minibatches_per_step=round(r.minibatches_per_step, 2),
        )
    except RunFailure as e:  # compile error, HBM OOM, NaN
        out["failure"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    except ScprofError as e:  # limits exceeded with minibatching exhausted, a refused value
        out["failure"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    out.update(simulations=simulations, wall_s=round(time.perf_counter() - t0, 2))
    return out


def _run_task(task: tuple[str, int, dict | None]) -> tuple[str, int, dict]:
    """Worker: one point (index -1: the config as it is) in a scratch folder of its own."""
    config, index, point = task
    with tempfile.TemporaryDirectory(prefix="tune-grid-") as work:
        if point is None:
            return config, index, simulate_point(config, {}, False, work)
        return config, index, simulate_point(config, point["set"], bool(point["derive_limits"]), work)


def candidate(res: dict) -> bool:
    """A point that may be "best": it ran, and dropped no IDs."""
    return res["step_time_ps"] is not None and not res["dropped_ids"]


def summarize(config: str, points: list[dict], results: list[dict], base: dict) -> dict:
    """The config's JSON entry: base, grid best/worst, failures, pipelining-off-faster pairs."""
    ok = [(res["step_time_ps"], p) for p, res in zip(points, results, strict=True) if candidate(res)]
    best_ps, best = min(ok, key=lambda x: x[0]) if ok else (None, None)
    worst_ps = max(ok, key=lambda x: x[0])[0] if ok else None
    failures = [
        {"point": p, "failure": res["failure"] or f"dropped {res['dropped_ids']} IDs"}
        for p, res in zip(points, results, strict=True)
        if not candidate(res)
    ]
    # same point with pipelining on and off: where off (true) is faster
    by_key = {
        json.dumps({**p["set"], PIPELINING_OFF: None, "d": p["derive_limits"]}, sort_keys=True): {} for p in points
    }
    for p, res in zip(points, results, strict=True):
        key = json.dumps({**p["set"], PIPELINING_OFF: None, "d": p["derive_limits"]}, sort_keys=True)
        by_key[key][p["set"][PIPELINING_OFF]] = (p, res)
    off_faster = []
    for pair in by_key.values():
        (p_on, r_on), (_, r_off) = pair[False], pair[True]
        if candidate(r_on) and candidate(r_off) and r_off["step_time_ps"] < r_on["step_time_ps"]:
            others = {k: v for k, v in p_on["set"].items() if k != PIPELINING_OFF}
            off_faster.append(
                {
                    "set": others,
                    "derive_limits": p_on["derive_limits"],
                    "on_ps": r_on["step_time_ps"],
                    "off_ps": r_off["step_time_ps"],
                }
            )
    return {
        "config": os.path.relpath(config, REPO),
        "grid_points": len(points),
        "grid_simulations": sum(r["simulations"] for r in results),
        "grid_best_ps": best_ps,
        "grid_best_overrides": best,
        "grid_worst_ps": worst_ps,
        "base_ps": base["step_time_ps"],
        "base_failure": base["failure"],
        "base_minibatches_per_step": base["minibatches_per_step"],
        "failures": failures,
        "pipelining_off_faster": off_faster,
    }


def tune_config(config: str, workers: int) -> dict:
    """`scprof tune CONFIG` in a scratch store: the tuner's figures for the config's entry."""
    from whatif.engine import Change, Session
    from whatif.executor import Executor
    from whatif.tune import tune

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tune-") as work, Store.open(os.path.join(work, "s.duckdb")) as store:
        base = record_run(config, [], None, None, os.path.join(work, "base"))
        base_id = ingest_trace(store, base.trace_path).run_id
        with Executor(workers) as ex:
            session = Session(store, base_id, "tune", ex, root=os.path.join(work, "trials"))
            result = tune(session, Change(), out_dir=os.path.join(work, "tuned"))
        wall_s = time.perf_counter() - t0
        again = record_run(result.best["config"], [], "again", None, os.path.join(work, "again"))
        again_ps = _mean_counted_step_ps(again.trace_path, os.path.join(work, "again"))
    accepted = [t["step_time_ps"] for t in result.trials if t["accepted"]]
    path = [result.baseline["step_time_ps"], *accepted]
    return {
        "tune_ps": result.best["step_time_ps"],
        "tune_overrides": result.best["overrides"],
        "tune_derive_limits": result.best["derive_limits"],
        "tune_simulations": result.simulations,
        "tune_trials": len(result.trials),
        "tune_wall_s": round(wall_s, 1),
        "tune_stopped": result.stopped,
        "tune_path_only_faster": all(b < a for a, b in zip(path, path[1:], strict=False)),
        "recorded_again_ps": again_ps,
        "recorded_again_within_1pct": abs(again_ps / result.best["step_time_ps"] - 1) <= 0.01,
    }


def _us(ps: float | None) -> str:
    return "-" if ps is None else f"{ps / 1e6:,.1f} us"


def print_table(entry: dict) -> None:
    print(f"\n## {entry['config']}")
    print(
        f"base {_us(entry['base_ps'])} ({entry['base_minibatches_per_step']} minibatches per step)"
        + (f", FAILED {entry['base_failure']}" if entry["base_failure"] else "")
    )
    best = entry["grid_best_overrides"]
    print(f"grid best {_us(entry['grid_best_ps'])}: {json.dumps(best)}")
    print(
        f"grid worst {_us(entry['grid_worst_ps'])}; {entry['grid_points']} points, "
        f"{entry['grid_simulations']} simulations; {len(entry['failures'])} excluded"
    )
    for f in entry["failures"]:
        print(f"  excluded: {json.dumps(f['point'])}: {f['failure']}")
    if "tune_ps" in entry:
        print(
            f"tune {_us(entry['tune_ps'])} in {entry['tune_simulations']} simulations ({entry['tune_wall_s']} s): "
            f"{json.dumps(entry['tune_overrides'])} derive_limits={entry['tune_derive_limits']}; "
            f"within 2% of the grid's best: {entry.get('within_2pct')}; recorded again "
            f"{_us(entry['recorded_again_ps'])}"
        )
    for pair in entry["pipelining_off_faster"]:
        gain = 1 - pair["off_ps"] / pair["on_ps"]
        print(
            f"  pipelining off faster by {gain:.1%}: {_us(pair['on_ps'])} -> {_us(pair['off_ps'])} at "
            f"{json.dumps(pair['set'])} derive_limits={pair['derive_limits']}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", help="configs (default: configs/untuned/*.toml)")
    ap.add_argument("--workers", type=int, default=2, help="processes (1: in this process)")
    ap.add_argument("--out", help="write every point's result here as JSON")
    ap.add_argument("--no-grid", action="store_true", help="run only the tuner")
    args = ap.parse_args()
    configs = [os.path.abspath(c) for c in args.configs] or [str(p) for p in sorted(UNTUNED.glob("*.toml"))]
    t0 = time.perf_counter()
    grids = {c: grid_points(c) for c in configs}
    tasks = [(c, -1, None) for c in configs]
    if not args.no_grid:
        tasks += [(c, i, p) for c in configs for i, p in enumerate(grids[c])]
    results: dict[str, dict[int, dict]] = {c: {} for c in configs}
    done = 0

    def collect(c: str, i: int, res: dict) -> None:
        nonlocal done
        results[c][i] = res
        done += 1
        if done % 32 == 0 or done == len(tasks):
            print(f"tune_vs_grid: {done}/{len(tasks)} points, {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    if args.workers > 1:
        with multiprocessing.Pool(args.workers) as pool:
            for c, i, res in pool.imap_unordered(_run_task, tasks):
                collect(c, i, res)
    else:
        for task in tasks:
            collect(*_run_task(task))
    entries = []
    for c in configs:
        if args.no_grid:
            entry = {
                "config": os.path.relpath(c, REPO),
                "base_ps": results[c][-1]["step_time_ps"],
                "base_minibatches_per_step": results[c][-1]["minibatches_per_step"],
                "base_failure": results[c][-1]["failure"],
                "grid_best_ps": None,
                "grid_best_overrides": None,
                "grid_worst_ps": None,
                "grid_points": 0,
                "grid_simulations": 0,
                "failures": [],
                "pipelining_off_faster": [],
            }
        else:
            entry = summarize(c, grids[c], [results[c][i] for i in range(len(grids[c]))], results[c][-1])
        entry.update(tune_config(c, args.workers))
        if entry["grid_best_ps"] is not None:
            entry["within_2pct"] = entry["tune_ps"] <= entry["grid_best_ps"] * 1.02
            entry["fewer_simulations_than_grid"] = entry["tune_simulations"] < entry["grid_points"]
        print_table(entry)
        entries.append(entry)
    wall_s = round(time.perf_counter() - t0, 1)
    if args.out:
        detail = {os.path.relpath(c, REPO): [{**p, **results[c][i]} for i, p in enumerate(grids[c])] for c in configs}
        Path(args.out).write_text(json.dumps(detail, indent=1))
    print(json.dumps({"benchmark": "tune_vs_grid", "configs": entries, "wall_s": wall_s, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()

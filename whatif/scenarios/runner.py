"""Running one scenario: the cause run, each cause's removal run, the effect that verifies each
label, then the analyzers (and `--verify`) on the cause run. Plain data in and out, so a Dask
worker runs it; each scenario has its own scratch folder and DuckDB store."""

from __future__ import annotations

import copy
import math
import os
import random
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analyzers.compare import step_time_change
from analyzers.registry import analyze_run
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.errors import RunFailure
from sim_backend.recording.record import record_run
from whatif.configs import write_toml
from whatif.engine import Session, dropped_ids
from whatif.executor import Executor
from whatif.scenarios.causes import BY_NAME, CAUSES, Cause, Raw
from whatif.scenarios.workloads import sample_base
from whatif.verify import verify_report

KINDS = (("healthy", 0.2), ("single", 0.55), ("pair", 0.25))
HBM_PRESSURE_SHARE = 0.85  # the memory analyzer's threshold (docs/analyzers.md)


@dataclass(frozen=True)
class ScenarioSpec:
    """A scenario: a base workload (by seed) and the causes injected into it."""

    index: int
    seed: int
    kind: str  # healthy | single | pair
    causes: tuple[str, ...]


def sample_scenarios(n: int, seed: int) -> list[ScenarioSpec]:
    """`n` scenarios, a pure function of (n, seed): kinds by KINDS' weights, causes that apply."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        base_seed = seed * 1_000_003 + i
        base = sample_base(base_seed)
        kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
        fits = [c for c in CAUSES if c.applies(base)]
        causes: tuple[str, ...] = ()
        if kind == "single":
            causes = (rng.choice(fits).name,)
        elif kind == "pair":
            a = rng.choice(fits)
            b = rng.choice([c for c in fits if c.group != a.group])
            causes = (a.name, b.name)
        out.append(ScenarioSpec(i, base_seed, kind, causes))
    return out


def build(base: Raw, causes: list[Cause], removed: Cause | None = None) -> tuple[Raw, float | None]:
    """The base with `causes` injected (and `removed` injected then removed): the raw config and
    the scale of its derived limits (None: a cause sets the limits itself)."""
    raw = copy.deepcopy(base)
    applied = [*causes, removed] if removed is not None and removed.remove is not None else list(causes)
    for cause in applied:
        cause.inject(raw, random.Random(f"{raw['seed']}:{cause.name}"))
    if removed is not None and removed.remove is not None:
        removed.remove(raw, random.Random(f"{raw['seed']}:{removed.name}:remove"))
    scales = [c.limits_scale for c in applied]
    return raw, (None if None in scales else min(scales, default=1.25))


def with_limits(raw: Raw, scale: float | None, work: str) -> Raw:
    """`raw` with each stack's limits set to the observed maximum x `scale` (one estimating run,
    dropping instead of minibatching, as the what-if engine derives limits)."""
    if scale is None:
        return raw
    est = copy.deepcopy(raw)
    est["flags"] = {**est["flags"], "xla_sparse_core_estimate_max_ids": True, "xla_sc_detect_nan": False}
    est["sparsecore"] = {**est["sparsecore"], "allow_id_dropping": True, "enable_minibatching": False}
    os.makedirs(work, exist_ok=True)
    write_toml(est, os.path.join(work, "estimate.toml"))
    try:
        result = record_run(os.path.join(work, "estimate.toml"), [], "estimate", None, os.path.join(work, "est"))
    except ScprofError:  # out of memory before any limit matters: the run itself will fail the same way
        return raw
    if result.limits_path is None:
        return raw
    with open(result.limits_path, "rb") as fh:
        stacks = tomllib.load(fh).get("stacks", {})
    out = copy.deepcopy(raw)
    sc = out["sparsecore"]
    sc["stack_max_ids_per_partition"] = {
        s: max(8, math.ceil(v["max_ids_per_partition"] * scale)) for s, v in stacks.items()
    }
    sc["stack_max_unique_ids_per_partition"] = {
        s: max(8, math.ceil(v["max_unique_ids_per_partition"] * scale)) for s, v in stacks.items()
    }
    return out


@dataclass
class Recorded:
    run_id: int | None
    failed: bool
    minibatches: int | None
    failure: str = ""


def record_into(store: Store, raw: Raw, scale: float | None, work: str, name: str) -> Recorded:
    """Record a config (limits derived first) and ingest its trace (a failed run's too)."""
    raw = with_limits(raw, scale, os.path.join(work, "limits"))
    path = os.path.join(work, "config.toml")
    os.makedirs(work, exist_ok=True)
    write_toml({**raw, "name": name}, path)
    try:
        result = record_run(path, [], name, None, os.path.join(work, "out"))
        trace, failed, minibatches, failure = result.trace_path, False, result.minibatches, ""
    except RunFailure as e:
        trace, failed, minibatches, failure = e.trace_path, True, None, str(e).splitlines()[0]
    except ScprofError as e:  # the emulator refuses it (limits no minibatch can meet): no run
        return Recorded(None, True, None, str(e).splitlines()[0])
    if trace is None:
        return Recorded(None, True, None, failure)
    return Recorded(ingest_trace(store, trace, name=name).run_id, failed, minibatches, failure)


def hbm_peak_share(store: Store, run_id: int) -> float:
    rows = sqltree.query(store.con, "whatif.scenarios.hbm_peak_share", run=run_id).to_pylist()
    return float(rows[0]["s"] or 0.0)


def effect(store: Store, cause: Cause, with_it: Recorded, without: Recorded) -> tuple[bool, str]:
    """Whether the cause's own effect differs significantly between the two runs, and the figures."""
    if without.run_id is None or without.failed:
        return False, f"the removal run failed: {without.failure}"
    if cause.effect == "failed":
        return with_it.failed, f"cause run failed: {with_it.failed} ({with_it.failure})"
    if with_it.run_id is None or with_it.failed:
        return False, f"the cause run failed: {with_it.failure}"
    if cause.effect == "minibatches":
        return (with_it.minibatches or 0) > (
            without.minibatches or 0
        ), f"minibatches {with_it.minibatches} vs {without.minibatches}"
    if cause.effect == "dropped_ids":
        a, b = dropped_ids(store, with_it.run_id), dropped_ids(store, without.run_id)
        return a > b, f"dropped IDs {a} vs {b}"
    if cause.effect == "hbm_peak":
        a, b = hbm_peak_share(store, with_it.run_id), hbm_peak_share(store, without.run_id)
        return a >= HBM_PRESSURE_SHARE and b < a, f"HBM peak {a:.1%} vs {b:.1%} of capacity"
    if cause.effect == "step_time":
        c = step_time_change(store, with_it.run_id, without.run_id)
        return c.verdict == "improved", f"removal {c.text()}"
    return True, "by construction"


def run_scenario(spec: ScenarioSpec, verify: bool = True) -> dict[str, Any]:
    """Record, verify the labels, analyze (and verify the fixes of) one scenario; an error in any
    part discards it (status `error`, with the error), so one scenario never stops a run."""
    try:
        return _run_scenario(spec, verify)
    except Exception as e:  # noqa: BLE001 - scored as discarded, the error kept in the result
        return {
            "index": spec.index,
            "seed": spec.seed,
            "kind": spec.kind,
            "causes": list(spec.causes),
            "status": "error",
            "reason": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            "expected": sorted({r for c in spec.causes for r in BY_NAME[c].rules}),
            "effects": {},
            "wall_s": 0.0,
        }


def _run_scenario(spec: ScenarioSpec, verify: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    base = sample_base(spec.seed)
    causes = [BY_NAME[c] for c in spec.causes]
    out: dict[str, Any] = {
        "index": spec.index,
        "seed": spec.seed,
        "kind": spec.kind,
        "causes": list(spec.causes),
        "tables": len(base["tables"]),
        "chips": base["hardware"]["num_chips"],
        "generation": base["hardware"]["generation"],
        "effects": {},
    }
    with (
        tempfile.TemporaryDirectory(prefix="scprof-scenario-") as tmp,
        Store.open(os.path.join(tmp, "s.duckdb")) as store,
    ):
        raw, scale = build(base, causes)
        main = record_into(store, raw, scale, os.path.join(tmp, "cause"), "cause")
        verified = True
        for cause in causes:
            others = [c for c in causes if c is not cause]
            r_raw, r_scale = build(base, others, removed=cause)
            removal = record_into(store, r_raw, r_scale, os.path.join(tmp, f"no_{cause.name}"), f"no_{cause.name}")
            ok, figures = effect(store, cause, main, removal)
            out["effects"][cause.name] = {"verified": ok, "figures": figures}
            verified = verified and ok
        if main.run_id is None or (main.failed and not any(c.effect == "failed" for c in causes)):
            verified, out["reason"] = False, f"the cause run failed: {main.failure}"
        out["status"] = "ok" if verified else "discarded"
        if verified and main.run_id is not None:
            report = analyze_run(store, main.run_id)
            if verify and spec.causes and any(f.fix for f in report.findings):
                with Executor() as ex:
                    session = Session(store, main.run_id, "verify", ex, root=os.path.join(tmp, "whatif"))
                    report = verify_report(session, report)
            out["findings"] = [
                {"rule": f.rule, "severity": f.severity, "fix": f.fix, "verified": f.verified} for f in report.findings
            ]
    out["expected"] = sorted({r for c in causes for r in c.rules})
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def run_all(
    specs: list[ScenarioSpec],
    executor: Executor,
    verify: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every scenario, in this process or on the executor's Dask workers; results in spec order."""
    if not executor.distributed:
        results = []
        for i, spec in enumerate(specs):
            results.append(run_scenario(spec, verify))
            if progress:
                progress(i + 1, len(specs))
        return results
    from distributed import as_completed

    client = executor.connect()
    futures = client.map(run_scenario, specs, verify=verify, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    done: list[dict[str, Any] | None] = [None] * len(specs)
    for n, future in enumerate(as_completed(futures), 1):
        done[index[future.key]] = future.result()
        if progress:
            progress(n, len(specs))
    return [r for r in done if r is not None]

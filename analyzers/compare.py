"""Compare two runs: did the candidate's step time change, why, and what else moved.

The step-time verdict compares the mean step times of the two runs' per-step samples, the
steps every summary counts (the store's step_times.counted: the warm-up first step and the
draining last step left out when a run has 5 or more), with a 95% interval of the relative
change from a studentized block bootstrap of the log ratio of the means
(analyzers/change_stats.py): a pipelined step shares the device with its neighbour, so steps
alternate long/short and a change can shift the phase of that rhythm; blocks of BLOCK_STEPS
hold one whole period. The verdict is `change_stats.label` of that interval: improved or
regressed when it excludes zero, "no change" when it lies within +-MIN_EFFECT, "inconclusive"
otherwise, "not enough steps" (and no interval) below MIN_STEPS counted steps on a side.
Per-op changes (like XProf's diff of two sessions) carry the same kind of verdict for the
largest ones: a 95% interval of the change of the op's time per counted step (_op_delta). The
rest are plain deltas: breakdown categories per step, findings resolved / new / persisting,
per-table time, and the configurations' differences.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers import runstats
from analyzers.change_stats import (  # noqa: F401  (re-exported: the verdict's parameters)
    BLOCK_STEPS,
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    MIN_EFFECT,
    MIN_STEPS,
    OP_METHOD,
    SEED,
    STEP_METHOD,
    label,
    read_verdict,
    relative_interval,
    welch_log_ratio,
)
from analyzers.context import step_times
from analyzers.registry import RunReport
from analyzers.rules.breakdown import counted_rows
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from profiler.units import memory_word, signed_pct


@dataclass
class StepTimeChange:
    """Mean step time of both runs, the relative change, its 95% interval and verdict, and how
    they were computed (method, the counted steps, the minimum of counted steps)."""

    base_mean_ps: float
    cand_mean_ps: float
    change: float  # cand / base - 1; negative is faster
    ci_low: float | None  # None: not enough steps
    ci_high: float | None
    base_steps: int
    cand_steps: int
    verdict: str  # improved | regressed | no change | inconclusive | not enough steps
    paired: bool = False  # resampled by step: both runs saw the same input data (same_input_stream)
    method: str = STEP_METHOD
    min_steps: int = MIN_STEPS

    def text(self) -> str:
        """The verdict with its figures, as every surface prints it: "improved: −4.3% (95% CI
        −6.1% .. −2.5%); 18 vs 18 counted steps, paired; <method>"."""
        return verdict_text(
            self.verdict, self.change, self.ci_low, self.ci_high, self.base_steps, self.cand_steps, self.paired
        ) + (f"; {self.method}" if self.ci_low is not None else "")


@dataclass
class Comparison:
    base: dict[str, Any]
    cand: dict[str, Any]
    step_time: StepTimeChange
    breakdown: list[dict[str, Any]]  # category, base_ps, cand_ps, delta_ps (mean per step per chip)
    findings: dict[str, list[dict[str, Any]]]  # resolved / new / persisting
    ops: list[dict[str, Any]]  # per-op deltas
    tables: list[dict[str, Any]]  # per-table SparseCore time deltas
    config_diff: list[dict[str, Any]]  # key, base, cand
    memory: dict[str, Any] = field(default_factory=dict)  # each run's device memory peak (memory_delta)
    notes: list[str] = field(default_factory=list)
    ops_method: str = OP_METHOD  # how the per-op intervals were computed

    @property
    def verdict(self) -> str:
        return self.step_time.verdict

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bootstrap_change(base: np.ndarray, cand: np.ndarray, seed: int = SEED, paired: bool = False) -> StepTimeChange:
    """Relative change of mean step time with its 95% bootstrap-t interval and verdict.

    `paired`: step i of one run is step i of the other (the same input data), so both are
    resampled at the same steps and what the steps have in common cancels out."""
    base, cand = np.asarray(base, np.float64), np.asarray(cand, np.float64)
    change, low, high = relative_interval(base, cand, paired=paired, seed=seed)
    return StepTimeChange(
        float(base.mean()),
        float(cand.mean()),
        change,
        low,
        high,
        len(base),
        len(cand),
        label(low, high, base_steps=len(base), cand_steps=len(cand)),
        paired,
    )


def verdict_text(
    verdict: str,
    change: float,
    low: float | None,
    high: float | None,
    base_steps: int | None = None,
    cand_steps: int | None = None,
    paired: bool = False,
) -> str:
    """A verdict with its change, interval and counted steps, in one line (minus signs U+2212):
    "improved: −4.3% (95% CI −6.1% .. −2.5%); 18 vs 18 counted steps, paired", or
    "not enough steps: +2.0%; 3 vs 4 counted steps (5 needed each)"."""
    out = f"{read_verdict(verdict)}: {interval_text(change, low, high)}"
    if base_steps is not None and cand_steps is not None:
        out += f"; {base_steps} vs {cand_steps} counted steps"
        if min(base_steps, cand_steps) < MIN_STEPS:
            out += f" ({MIN_STEPS} needed each)"
        elif paired:
            out += ", paired"
    return out


def interval_text(change: float, low: float | None, high: float | None) -> str:
    """A change with its 95% interval when there is one: "−4.3% (95% CI −6.1% .. −2.5%)"."""
    if low is None or high is None:
        return _pct(change)
    return f"{_pct(change)} (95% CI {_pct(low)} .. {_pct(high)})"


def _pct(x: float) -> str:
    """A relative change as a signed percentage with one decimal and a true minus sign."""
    return signed_pct(x)


def same_input_stream(base_config: dict[str, Any], cand_config: dict[str, Any]) -> bool:
    """Whether two emulated runs were fed the same batches step by step: the emulator draws step
    s's IDs of feature i from (seed, s, i), the batch size, the feature and its table's vocabulary
    (sim_backend/generate.py), whatever the flags, limits, threads or hardware."""

    def stream(cfg: dict[str, Any]) -> Any:
        vocab = {t.get("name"): t.get("vocab") for t in cfg.get("tables") or []}
        return (cfg.get("seed"), cfg.get("global_batch"), cfg.get("features"), vocab)

    return bool(base_config.get("features")) and stream(base_config) == stream(cand_config)


def step_time_change(store: Store, base_id: int, cand_id: int) -> StepTimeChange:
    """THE step-time verdict of two runs (compare, verify, tune, attribute): their counted steps,
    paired by step when both ran the same input stream over the same counted steps."""
    bt, ct = step_times(store, base_id), step_times(store, cand_id)
    bs, cs = _counted_ps(bt), _counted_ps(ct)
    configs = [
        json.loads(r["config"] or "{}")
        for r in sqltree.query(store.con, "analysis.compare.configs", base=base_id, cand=cand_id).to_pylist()
    ]
    paired = (
        len(configs) == 2
        and same_input_stream(*configs)
        and pc.filter(bt.column("step"), bt.column("counted")).equals(
            pc.filter(ct.column("step"), ct.column("counted"))
        )
    )
    return bootstrap_change(bs, cs, paired=paired)


def compare_runs(
    store: Store, base_id: int, cand_id: int, reports: tuple[RunReport, RunReport] | None = None
) -> Comparison:
    """Everything `scprof compare` and the UI's Compare page show. `reports`: the two runs'
    reports when the caller has them already (the UI caches them), else report_for's."""
    base, cand = reports if reports is not None else (runstats.report(store, base_id), runstats.report(store, cand_id))
    notes: list[str] = []
    _check_comparable(base, cand)
    step_time = step_time_change(store, base_id, cand_id)
    return Comparison(
        base=_run_info(base),
        cand=_run_info(cand),
        step_time=step_time,
        breakdown=_breakdown_delta(store, base, cand),
        findings=findings_delta(base, cand),
        ops=_op_delta(store, base_id, cand_id),
        tables=_table_delta(store, base_id, cand_id),
        config_diff=config_diff(json.loads(base.run["config"] or "{}"), json.loads(cand.run["config"] or "{}")),
        memory=memory_delta(store, base, cand),
        notes=notes,
    )


def memory_delta(store: Store, base: RunReport, cand: RunReport) -> dict[str, Any]:
    """Each run's device memory peak (RunReport.memory_peak: the counters' peak, else the allocators'),
    named as the run's device memory is (HBM on a TPU, device memory on a GPU or CPU), with the change
    when both come from the same source (a counters' peak and an allocators' peak are not one quantity)."""
    sides = {}
    for role, report in (("base", base), ("cand", cand)):
        kinds = sqltree.query(store.con, "analysis.run.device_kinds", run=report.run["run_id"]).column("kind")
        peak = report.memory_peak()
        sides[role] = {
            "word": memory_word(kinds.to_pylist()),
            "figure": peak[0] if peak else None,
            "bytes": peak[1] if peak else None,
        }
    b, c = sides["base"], sides["cand"]
    same = b["figure"] is not None and b["figure"] == c["figure"]
    return {**sides, "delta_bytes": c["bytes"] - b["bytes"] if same else None}


class CompareError(ScprofError):
    """Two runs that cannot be compared (a run without steps): the user's input, not a bug."""


def _check_comparable(base: RunReport, cand: RunReport) -> None:
    """Refuse, naming each run and what it lacks, when a run has no steps to compare."""
    lacking = []
    for role, report in (("baseline", base), ("candidate", cand)):
        t = report.analyses["breakdown"].tables.get("step_times")
        if t is not None and t.num_rows and pc.any(t.column("counted")).as_py():
            continue
        run = report.run
        why = "no steps"
        if run.get("status") != "ok":
            tags = json.loads(run.get("tags") or "{}")
            failure = tags.get("failure") or tags.get("error")
            why += f" (the run is {run.get('status')}" + (f": {failure})" if failure else ")")
        lacking.append(f"{role} {run['name']!r} (run_id {run['run_id']}) has {why}")
    if lacking:
        raise CompareError(f"compare: {'; '.join(lacking)}; step time needs steps in both runs")


def _counted_ps(step_times: pa.Table) -> np.ndarray:
    """The step times summaries count (step_times.counted), as float64."""
    return pc.filter(step_times.column("step_ps"), step_times.column("counted")).to_numpy().astype(np.float64)


def _run_info(report: RunReport) -> dict[str, Any]:
    return {k: report.run[k] for k in ("run_id", "name", "uuid", "source", "steps", "events")}


def _counted_breakdown(report: RunReport) -> pa.Table:
    """The run's step breakdown over its counted steps (what every summary covers)."""
    a = report.analyses["breakdown"]
    return counted_rows(a.tables["step_breakdown"], a.tables["step_times"])


def _breakdown_delta(store: Store, base: RunReport, cand: RunReport) -> list[dict[str, Any]]:
    """Mean time per counted step and chip of each wall-time category, both runs: a category's
    time over every (chip, counted step) window, those where it does not occur included, so the
    means are in proportion to the breakdown's shares and sum to the mean window."""
    return sqltree.query(
        store.con,
        "analysis.compare.breakdown_delta",
        {"base_breakdown": _counted_breakdown(base), "cand_breakdown": _counted_breakdown(cand)},
    ).to_pylist()


def findings_delta(base: RunReport, cand: RunReport) -> dict[str, list[dict[str, Any]]]:
    """Findings matched by rule and affected tables: resolved, new, persisting."""

    def key(f) -> tuple:
        return (f.rule, tuple(f.entities.get("tables", [])))

    b = {key(f): f for f in base.findings}
    c = {key(f): f for f in cand.findings}
    return {
        "resolved": [b[k].to_dict() for k in b if k not in c],
        "new": [c[k].to_dict() for k in c if k not in b],
        "persisting": [{"base": b[k].to_dict(), "cand": c[k].to_dict()} for k in b if k in c],
    }


def _op_delta(store: Store, base_id: int, cand_id: int) -> list[dict[str, Any]]:
    """Per-op time and events per counted step of both runs, the change, and its verdict: a 95%
    interval of the relative change of the op's mean time per counted step (welch_change);
    `change` is change_stats.label's faster / slower / no change / inconclusive / not enough
    steps, or added or removed for an op of one run only."""
    rows = sqltree.query(store.con, "analysis.compare.op_delta", base=base_id, cand=cand_id).to_pylist()
    for r in rows:
        nb, nc = r.pop("base_steps"), r.pop("cand_steps")
        qb, qc = r.pop("base_ps_sq"), r.pop("cand_ps_sq")
        r["ci_low"] = r["ci_high"] = None
        if r["base_ps_per_step"] is None or r["cand_ps_per_step"] is None:
            r["change"] = "added" if r["base_ps_per_step"] is None else "removed"
            continue
        low, high, change = welch_change(
            (r["base_ps_per_step"], _variance(qb, nb, r["base_ps_per_step"]), nb),
            (r["cand_ps_per_step"], _variance(qc, nc, r["cand_ps_per_step"]), nc),
        )
        r["ci_low"], r["ci_high"] = low, high
        r["change"] = label(low, high, base_steps=nb, cand_steps=nc, better="faster", worse="slower")
    return rows


def _variance(sum_sq: float, n: int, mean: float) -> float:
    """Sample variance of n values (zeros included) from their sum of squares and mean."""
    return max(sum_sq - n * mean * mean, 0.0) / (n - 1) if n > 1 else 0.0


def welch_change(
    base: tuple[float, float, int], cand: tuple[float, float, int]
) -> tuple[float | None, float | None, float]:
    """95% interval of the relative change of a mean from `base` to `cand`, each (mean, sample
    variance, samples), and the change: the delta method on the log ratio with a Welch t
    quantile (change_stats.welch_log_ratio), inside (-100%, +inf); no interval with fewer than
    2 samples on a side or a mean that is not positive."""
    return welch_log_ratio(base, cand)


def _table_delta(store: Store, base_id: int, cand_id: int) -> list[dict[str, Any]]:
    return sqltree.query(store.con, "analysis.compare.table_delta", base=base_id, cand=cand_id).to_pylist()


def config_diff(base: Any, cand: Any, prefix: str = "") -> list[dict[str, Any]]:
    """Keys whose values differ between two JSON configs (dotted paths; lists compared whole)."""
    if isinstance(base, dict) and isinstance(cand, dict):
        out = []
        for k in sorted(set(base) | set(cand)):
            out += config_diff(base.get(k), cand.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if base == cand else [{"key": prefix, "base": base, "cand": cand}]

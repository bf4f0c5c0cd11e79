"""A what-if session over one store: build trials from a run, simulate them, ingest them,
measure them against a reference run, and record each in `whatif_trials`.

Step times come from the store's step_times view (the one definition every view reads) and
changes from `analyzers.compare.bootstrap_change`, the interval `scprof compare` prints."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.compute as pc

from analyzers import materialize
from analyzers.compare import step_time_change
from analyzers.context import step_times
from profiler import sqltree
from profiler.errors import ScprofError
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend import __version__ as SIM_VERSION
from sim_backend.config import config_from_dict
from sim_backend.errors import ConfigError
from sim_backend.recording.record import LIMITS_FILE, dir_name
from whatif.configs import apply_overrides, origin_config
from whatif.executor import Executor, Progress
from whatif.paths import localize, user_paths
from whatif.trial import TrialOutcome, TrialSpec, derive_config, derived_files, input_sha1, with_flag

log = logging.getLogger(__name__)

DEFAULT_ROOT = os.path.join("runs", "whatif")
UNDECIDED = ("inconclusive", "not enough steps")  # verdicts more steps may decide
DOUBLINGS = 3  # an undecided trial is simulated again at 2x, 4x, 8x the origin's steps at most
MAX_TRIAL_STEPS = 320  # ... and never longer than this
INPUT_TAG = "whatif_input_sha1"  # a trial's identity: the digest of what was simulated
DERIVE_TAG = "whatif_derive_sha1"  # for derived limits: the digest of what they were derived from


@dataclass(frozen=True)
class Change:
    """A set of config changes to try: dotted key -> value, and whether to derive limits first."""

    overrides: dict[str, Any] = field(default_factory=dict)
    derive_limits: bool = False

    def key(self) -> str:
        return json.dumps({"set": self.overrides, "derive_limits": self.derive_limits}, sort_keys=True, default=str)

    def merged(self, other: Change) -> Change:
        return Change({**self.overrides, **other.overrides}, self.derive_limits or other.derive_limits)

    def describe(self) -> str:
        parts = [f"{k}={json.dumps(v)}" for k, v in sorted(self.overrides.items())]
        if self.derive_limits:
            parts.append("derived limits file")
        return ", ".join(parts) or "no change"


@dataclass
class Measured:
    """A trial's outcome in the store and against its reference."""

    change: Change
    run_id: int | None
    run_name: str
    step_time_ps: float | None
    ref_step_time_ps: float | None
    rel_change: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # improved | regressed | no change | inconclusive | not enough steps | failed (change_stats.label)
    failure: str | None
    dropped_ids: int
    simulated: bool  # False: the store already held this trial (same config, same emulator)
    # when the verdict needed more steps (Session.decide): the steps it was decided on, and the
    # reference and trial runs of that length it compares; the figures above are theirs
    decided_steps: int | None = None
    decided_runs: tuple[str, str] | None = None


@dataclass
class _Plan:
    """One requested change on its way to a stored trial run."""

    change: Change
    spec: TrialSpec
    name: str = ""
    input_sha1: str | None = None
    derive_sha1: str | None = None
    run_id: int | None = None
    failure: str | None = None
    simulated: bool = False


class Session:
    """Trials started from one stored emulated run (`origin`).

    The paths its stored config names are whatif/paths.py's to decide: the limits file and FDO
    stats the header holds travel with each trial as files written from those numbers; any
    other stored path is refused (UntrustedPath, one line, before anything is written) unless
    `trust_paths` (--trust-paths), the user's `given` --set (tune RUN) replaces it, or it is one
    of `own_paths` ((key, path) the user's own config names: tune CONFIG). `given` comes back
    as `self.given`, its paths made absolute against the working directory."""

    def __init__(
        self,
        store: Store,
        origin_run_id: int,
        purpose: str,
        executor: Executor,
        root: str | None = None,
        progress: Progress | None = None,
        trust_paths: bool = False,
        given: dict[str, Any] | None = None,
        own_paths: frozenset[tuple[str, str]] = frozenset(),
    ):
        self.store, self.executor, self.purpose, self.progress = store, executor, purpose, progress
        self.origin = sqltree.query(store.con, "cli.runs.run", run=origin_run_id).to_pylist()[0]
        self.stored_raw = origin_config(self.origin)  # as stored: what the run's config says
        self.trust_paths = trust_paths
        self.given, given_keys = user_paths(self.stored_raw, given or {})
        local = localize(
            self.origin, self.stored_raw, "origin", trust_paths, given=given_keys, own=own_paths, tune=given is not None
        )
        self.origin_raw = local.raw  # what trials start from
        self._files: dict[str, bytes] = local.files
        self.root = root or DEFAULT_ROOT
        self.session = str(uuid.uuid4())
        self.simulations = 0
        self._seq = 0

    @property
    def origin_run_id(self) -> int:
        return int(self.origin["run_id"])

    def add_files(self, files: dict[str, bytes]) -> None:
        """Files every trial's folder gets from now on (a candidate's limits: compare --attribute)."""
        self._files.update(files)

    def check(self, change: Change) -> None:
        """The user's change (`tune RUN --set`) over the starting config must be a config the
        emulator accepts (known keys, types, ranges): ConfigError, one line, before any trial."""
        raw = apply_overrides(self.origin_raw, change.overrides)  # "--set KEY: ..." for a key that names nothing
        try:
            config_from_dict(raw)
        except ConfigError as e:
            raise ConfigError(f"--set: {e} (over run {self.origin['name']!r})") from None

    def measure(self, changes: list[Change], ref_run_id: int) -> list[Measured]:
        """Simulate the changes whose simulation the store does not hold yet (in parallel),
        ingest them, and measure each against `ref_run_id` (in the order given).

        A trial is stored once per distinct simulation: its identity is the digest of what the
        emulator simulates (trial.input_sha1: the effective config, limits by value), not of
        the request, so two requests that give the same simulation (the same limits derived
        here or shipped in a file, a key set to the value it had) share one run, whichever
        origin asked first. A derive_limits request derives its limits first (one simulation,
        remembered by the digest of what it derived from, so a stored trial is not derived
        again), then is the trial of those limits."""
        plans = [_Plan(c, self._spec_raw(c)) for c in changes]
        self._find_stored(plans)
        self._derive(plans)
        self._find_stored(plans)
        todo: dict[str, _Plan] = {}
        for p in plans:
            if p.run_id is None and p.failure is None and p.input_sha1 is not None:
                todo.setdefault(p.input_sha1, p)
        outcomes = self.executor.map([p.spec for p in todo.values()], self.progress)
        for sha1, out in zip(list(todo), outcomes, strict=True):
            self.simulations += out.simulations
            self._store(todo[sha1], out)
        for p in plans:
            if p.run_id is None and p.failure is None and p.input_sha1 in todo:
                done = todo[p.input_sha1]
                p.run_id, p.name, p.failure, p.simulated = done.run_id, done.name, done.failure, True
        return [self._measured(p.change, p.name, p.run_id, p.failure, ref_run_id, p.simulated) for p in plans]

    def decide(
        self, measured: list[Measured], ref_change: Change, ref_run_id: int, budget: int | None = None
    ) -> list[Measured]:
        """The measured trials, those whose verdict their steps could not decide (inconclusive,
        not enough steps) while their step time fell (a slower trial is no fix, whatever more steps
        say: the budget goes to possible gains) simulated again with their reference at twice the steps, paired on the
        same input, until decided, DOUBLINGS or MAX_TRIAL_STEPS, or the session's simulations
        would pass `budget` (a derived-limits trial costs 2, as in tune's budget: its limits are derived
        again from the longer run). `ref_change` is what makes `ref_run_id` from the origin (Change() for
        the origin itself). A decided trial keeps its change and its run (what tune goes on from);
        its verdict and figures are those of the longer pair, named in decided_runs."""
        out = list(measured)
        steps = int(self.origin_raw.get("steps") or 0)
        for _ in range(DOUBLINGS):
            pending = [i for i, m in enumerate(out) if _may_gain(m)]
            longer = min(steps * 2, MAX_TRIAL_STEPS)
            if not pending or longer <= steps:
                break
            cost = 1 + sum(2 if out[i].change.derive_limits else 1 for i in pending)  # the reference, each trial
            if budget is not None and self.simulations + cost > budget:
                break
            steps = longer
            more = Change({"steps": steps})
            (ref,) = self.measure([ref_change.merged(more)], ref_run_id)
            if ref.run_id is None or ref.failure is not None:
                break
            for i, e in zip(
                pending, self.measure([out[i].change.merged(more) for i in pending], ref.run_id), strict=True
            ):
                if e.failure is None:
                    first = out[i]
                    out[i] = dataclasses.replace(
                        e,
                        change=first.change,
                        run_id=first.run_id,
                        run_name=first.run_name,
                        simulated=first.simulated or e.simulated,
                        decided_steps=steps,
                        decided_runs=(ref.run_name, e.run_name),
                    )
        return out

    def _spec_raw(self, change: Change) -> TrialSpec:
        """The trial spec of `change`, unnamed; for derive_limits, the spec that derives its limits."""
        raw = apply_overrides(self.origin_raw, change.overrides)
        tags = {"whatif_origin": str(self.origin["name"]), "whatif_change": change.describe()}
        return TrialSpec("", raw, "", change.derive_limits, dict(self._files), tags, derive_only=change.derive_limits)

    def _named(self, spec: TrialSpec, sha1: str, tag: str) -> TrialSpec:
        """`spec` named `<origin>~<digest>`, in the folder of that digest, its digest in its tags."""
        name = f"{self.origin['name']}~{sha1[:10]}"
        folder = os.path.join(self.root, dir_name(sha1[:10]))
        return dataclasses.replace(spec, name=name, out_dir=folder, tags={**spec.tags, tag: sha1})

    def _find_stored(self, plans: list[_Plan]) -> None:
        """Plans without a run yet: name them by their digest and take the stored run of it."""
        for p in plans:
            if p.run_id is not None or p.failure is not None:
                continue
            if p.spec.derive_only:
                if p.derive_sha1 is None:
                    p.derive_sha1 = _request_sha1(p.spec)
                    p.spec = self._named(p.spec, p.derive_sha1, DERIVE_TAG)
                    p.name = p.spec.name
            elif p.input_sha1 is None:
                p.input_sha1 = _input_sha1(p.spec)
                p.spec = self._named(p.spec, p.input_sha1, INPUT_TAG)
                p.name = p.spec.name
        rows = sqltree.query(
            self.store.con,
            "whatif.trials.trials_of_inputs",
            input_sha1s=[p.input_sha1 for p in plans if p.input_sha1],
            derive_sha1s=[p.derive_sha1 for p in plans if p.derive_sha1],
        ).to_pylist()
        by_input = {r["input_sha1"]: r for r in rows if r["input_sha1"]}
        by_derive = {r["derive_sha1"]: r for r in rows if r["derive_sha1"]}
        for p in plans:
            if p.run_id is None and p.failure is None:
                row = by_derive.get(p.derive_sha1) if p.spec.derive_only else by_input.get(p.input_sha1)
                if row is not None:
                    p.run_id, p.name = int(row["run_id"]), str(row["name"])

    def _derive(self, plans: list[_Plan]) -> None:
        """Derive the limits of the derive_limits plans not stored yet (in parallel, each
        distinct one once); each becomes the plan of the trial with those limits."""
        todo: dict[str, _Plan] = {}
        for p in plans:
            if p.run_id is None and p.failure is None and p.spec.derive_only:
                todo.setdefault(str(p.derive_sha1), p)
        if not todo:
            return
        derived: dict[str, TrialOutcome] = {}
        for sha1, out in zip(
            list(todo), self.executor.map([p.spec for p in todo.values()], self.progress), strict=True
        ):
            self.simulations += out.simulations
            derived[sha1] = out
        for p in plans:
            out = derived.get(str(p.derive_sha1)) if p.run_id is None and p.spec.derive_only else None
            if out is None:
                continue
            if out.failure is not None:  # the derive run itself failed (a compile error): that is the trial
                first = todo[str(p.derive_sha1)]
                if first is p:
                    self._store(p, out)
                else:
                    p.run_id, p.failure, p.simulated = first.run_id, first.failure, True
                continue
            files = {**p.spec.files, **derived_files(out)}
            raw = with_flag(p.spec.raw_config, "xla_sparse_core_max_ids_file", LIMITS_FILE)
            # the trial of those limits; its tags keep DERIVE_TAG, so the request finds it again
            p.spec = dataclasses.replace(p.spec, raw_config=raw, files=files, derive_limits=False, derive_only=False)
        for out in derived.values():  # the derived files travel with the trials: their folders go
            if out.failure is None and out.config_path:
                shutil.rmtree(os.path.dirname(out.config_path), ignore_errors=True)

    def _store(self, plan: _Plan, out: TrialOutcome) -> None:
        """A simulated trial into the store, with its analysis, as `scprof record` stores a run:
        read, not recomputed, by tune's next stage, Compare and the agent."""
        plan.failure, plan.simulated = out.failure, True
        if out.trace_path:
            plan.run_id = ingest_trace(self.store, out.trace_path, name=plan.name, replace=True).run_id
            if warning := materialize.build(self.store, plan.run_id):
                log.warning("%s", warning)

    def _measured(
        self, change: Change, name: str, run_id: int | None, failure: str | None, ref_run_id: int, simulated: bool
    ) -> Measured:
        ref = counted_step_ps(self.store, ref_run_id)
        if run_id is not None and failure is None:
            status = sqltree.query(self.store.con, "cli.runs.run_status", run=run_id).to_pylist()[0]
            if status["status"] == "failed":
                failure = json.loads(status["tags"] or "{}").get("error") or "the run failed"
        got = counted_step_ps(self.store, run_id) if run_id is not None else np.empty(0)
        dropped = dropped_ids(self.store, run_id) if run_id is not None else 0
        if failure is not None or len(got) == 0 or len(ref) == 0:
            return Measured(
                change,
                run_id,
                name,
                float(got.mean()) if len(got) else None,
                float(ref.mean()) if len(ref) else None,
                None,
                None,
                None,
                "failed",
                failure or "no counted steps to measure",
                dropped,
                simulated,
            )
        c = step_time_change(self.store, ref_run_id, run_id)
        return Measured(
            change,
            run_id,
            name,
            c.cand_mean_ps,
            c.base_mean_ps,
            c.change,
            c.ci_low,
            c.ci_high,
            c.verdict,
            None,
            dropped,
            simulated,
        )

    def record(self, m: Measured, label: str, ref_run_id: int, accepted: bool | None, reason: str) -> None:
        """One row of whatif_trials for a measured trial."""
        self._seq += 1
        sqltree.execute(
            self.store.con,
            "whatif.trials.insert_trial",
            run=self.origin_run_id,
            session=self.session,
            purpose=self.purpose,
            seq=self._seq,
            label=label,
            overrides=json.dumps(m.change.overrides, default=str, allow_nan=False),
            derive_limits=m.change.derive_limits,
            trial_run=m.run_id,
            ref_run=ref_run_id,
            step_time_ps=m.step_time_ps,
            ref_step_time_ps=m.ref_step_time_ps,
            change=m.rel_change,
            ci_low=m.ci_low,
            ci_high=m.ci_high,
            verdict=m.verdict,
            accepted=accepted,
            reason=reason,
            created_at=datetime.datetime.now(),
        )


def _may_gain(m: Measured) -> bool:
    """A trial more steps may show to be a gain: undecided (UNDECIDED), ran, and faster by its point estimate."""
    return m.verdict in UNDECIDED and m.failure is None and (m.rel_change is None or m.rel_change < 0)


def _input_sha1(spec: TrialSpec) -> str:
    """The trial's identity (trial.input_sha1); for a config the emulator refuses (it will fail
    without a trace, and nothing is stored), the digest of the request itself."""
    try:
        return input_sha1(spec)
    except ScprofError:
        request = {"raw": spec.raw_config, "files": sorted(spec.files), "emulator": SIM_VERSION}
        return hashlib.sha1(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def _request_sha1(spec: TrialSpec) -> str:
    """The identity of a derive_limits request: the digest of the run its limits are derived from."""
    return _input_sha1(dataclasses.replace(spec, raw_config=derive_config(spec.raw_config)))


def counted_step_ps(store: Store, run_id: int) -> np.ndarray:
    """The step times every summary counts (step_times.counted), as float64."""
    t = step_times(store, run_id)
    return pc.filter(t.column("step_ps"), t.column("counted")).to_numpy().astype(np.float64)


def dropped_ids(store: Store, run_id: int) -> int:
    """IDs the run dropped: past the compiled limits (step_minibatches) or past the chip cap
    (the host's Dropped IDs counter, which counts both)."""
    rows = sqltree.query(store.con, "whatif.trials.dropped_ids", run=run_id).to_pylist()[0]
    return int(max(rows["limits"], rows["counter"]))

"""A what-if session over one store: build trials from a run, simulate them, ingest them,
measure them against a reference run, and record each in `whatif_trials`.

Step times come from the store's step_times view (the one definition every view reads) and
changes from `analyzers.compare.bootstrap_change`, the interval `scprof compare` prints."""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.compute as pc

from analyzers import materialize
from analyzers.compare import step_time_change
from analyzers.context import step_times
from profiler import sqltree
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend import __version__ as SIM_VERSION
from sim_backend.config import config_from_dict
from sim_backend.errors import ConfigError
from sim_backend.recording.record import dir_name
from whatif.configs import apply_overrides, origin_config
from whatif.executor import Executor, Progress
from whatif.paths import localize, user_paths
from whatif.trial import TrialSpec

log = logging.getLogger(__name__)

DEFAULT_ROOT = os.path.join("runs", "whatif")


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

    def trial_name(self, change: Change) -> str:
        """`<origin>~<digest of origin, emulator version and change>`: the same trial, the same name."""
        digest = hashlib.sha256(f"{self.origin['uuid']}|{SIM_VERSION}|{change.key()}".encode()).hexdigest()[:10]
        return f"{self.origin['name']}~{digest}"

    def measure(self, changes: list[Change], ref_run_id: int) -> list[Measured]:
        """Simulate the changes not yet in the store (in parallel), ingest them, and measure
        each against `ref_run_id` (in the order given)."""
        names = [self.trial_name(c) for c in changes]
        known = {
            r["name"]: r["run_id"]
            for r in sqltree.query(self.store.con, "cli.runs.runs_named", names=names).to_pylist()
        }
        todo = {n: c for n, c in zip(names, changes, strict=True) if n not in known}
        specs = [self._spec(n, c) for n, c in todo.items()]
        outcomes = {o.name: o for o in self.executor.map(specs, self.progress)}
        failures: dict[str, str | None] = {}
        for name in todo:
            out = outcomes[name]
            self.simulations += out.simulations
            failures[name] = out.failure
            if out.trace_path:
                known[name] = ingest_trace(self.store, out.trace_path, name=name, replace=True).run_id
                # stored with its analysis, as `scprof record` stores a run: read, not recomputed, by
                # tune's next stage, Compare and the agent
                if warning := materialize.build(self.store, known[name]):
                    log.warning("%s", warning)
        return [
            self._measured(c, n, known.get(n), failures.get(n), ref_run_id, n in todo)
            for n, c in zip(names, changes, strict=True)
        ]

    def _spec(self, name: str, change: Change) -> TrialSpec:
        raw = apply_overrides(self.origin_raw, change.overrides)
        folder = dir_name(name.rpartition("~")[2])  # the digest: one folder per trial
        tags = {"whatif_origin": str(self.origin["name"]), "whatif_change": change.describe()}
        return TrialSpec(name, raw, os.path.join(self.root, folder), change.derive_limits, dict(self._files), tags)

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


def counted_step_ps(store: Store, run_id: int) -> np.ndarray:
    """The step times every summary counts (step_times.counted), as float64."""
    t = step_times(store, run_id)
    return pc.filter(t.column("step_ps"), t.column("counted")).to_numpy().astype(np.float64)


def dropped_ids(store: Store, run_id: int) -> int:
    """IDs the run dropped: past the compiled limits (step_minibatches) or past the chip cap
    (the host's Dropped IDs counter, which counts both)."""
    rows = sqltree.query(store.con, "whatif.trials.dropped_ids", run=run_id).to_pylist()[0]
    return int(max(rows["limits"], rows["counter"]))

"""`sparsecore.preprocessing = "reference"`: host preprocessing by jax-tpu-embedding itself.

A `ReferenceSession` keeps one child process (reference_worker.py) for a run: the library's
C++ preprocessing runs there on each step's IDs, with the stacks scprof planned, and can
abort without taking scprof down. `reference_step` then takes from the library what it
decides and reports: the minibatch count, every kept entry (so IDs and unique IDs per
minibatch and partition, and the all-to-all volume), its stats and its dropped-ID count.
What the library does not report per partition (observed IDs per source buffer, where
drops fell) comes from scprof's own preprocessing of the same step, which must reproduce
the library's stats and drop count exactly, else the step stops with a PreprocessError
naming what differs. Needs the `reference` extra (`pip install 'scprof[reference]'`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from dataclasses import replace

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.errors import ConfigError, PreprocessError
from sim_backend.generate import FeatureBatch
from sim_backend.preprocess import GroupResult, StepResult, preprocess_step
from sim_backend.reference_worker import read_message, write_message
from sim_backend.stacking import Layout, StackGroup, padded_width, table_ids


def library_available() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("jax_tpu_embedding") is not None
    except (ImportError, ValueError):
        return False


def session_setup(cfg: RunConfig, groups: list[StackGroup], lay: Layout) -> dict:
    """What the worker needs to build the library's specs: tables, features, stacks."""
    tables = {t.name: t for t in cfg.tables}
    return {
        "chips": lay.num_chips,
        "spc": lay.sparsecores_per_chip,
        "batch": cfg.global_batch,
        "allow_id_dropping": cfg.sparsecore.allow_id_dropping,
        "enable_minibatching": cfg.sparsecore.enable_minibatching,
        "tables": [
            {"name": t.name, "vocab": t.vocab, "width": t.width, "optimizer": t.optimizer, "combiner": t.combiner}
            for t in cfg.tables
        ],
        "features": [{"name": f.name, "table": f.table, "hot": f.multi_hot} for f in cfg.features],
        "stacks": [
            {
                "name": g.name,
                "padded_width": max(padded_width(tables[n].width) for n in g.tables),
                "max_ids_per_partition": g.max_ids_per_partition,
                "max_unique_ids_per_partition": g.max_unique_ids_per_partition,
                "tables": [
                    {
                        "name": n,
                        "padded_vocab": int(g.padded_vocab[i]),
                        "offset": int(g.offsets[i]),
                        "shift": int(g.rotation[i]),
                    }
                    for i, n in enumerate(g.tables)
                ],
            }
            for g in groups
        ],
    }


class ReferenceSession:
    """One child process running the library: set up for a run's stacks, then its steps. A
    session may be set up again for another run; after an abort it starts a new process."""

    def __init__(self, setup: dict | None = None):
        if not library_available():
            raise ConfigError(
                "sparsecore.preprocessing = 'reference' needs jax-tpu-embedding "
                "(pip install 'scprof[reference]'); use 'native'"
            )
        self._proc: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the session; closed in close())
        if setup is not None:
            self.setup(setup)

    def _start(self) -> None:
        self._stderr.seek(0)
        self._stderr.truncate()
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "sim_backend.reference_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )

    def setup(self, setup: dict) -> None:
        n = setup["chips"] * setup["spc"]
        if n & (n - 1):
            raise ConfigError(
                f"sparsecore.preprocessing = 'reference': jax-tpu-embedding needs a power-of-two "
                f"SparseCore count, this slice has {n}"
            )
        self._call({"kind": "setup", "setup": setup}, "setting up")

    def fdo_load(self, directory: str) -> dict:
        """The library's CSVFileFDOClient(directory).load(): {field: {stack: array}}."""
        return self._call({"kind": "fdo_load", "dir": directory}, "loading FDO stats")

    def fdo_publish(self, directory: str, steps: list[list[FeatureBatch]]) -> dict:
        """Steps through the library, their stats published by its CSVFileFDOClient into
        `directory`; returns {stack: (max IDs, max unique IDs)} as the library then sets them."""
        msg = {"kind": "fdo_publish", "dir": directory, "steps": [_arrays(b) for b in steps]}
        return self._call(msg, "publishing FDO stats")

    def auto_stack(self, request: dict) -> dict:
        """The library's auto_stack_tables on a config's tables (reference_worker.auto_stack)."""
        return self._call({"kind": "auto_stack", **request}, "stacking tables")

    def _call(self, msg: dict, what: str) -> dict:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        try:
            write_message(self._proc.stdin, msg)
            reply = read_message(self._proc.stdout)
        except (BrokenPipeError, OSError):
            reply = None
        if reply is None:
            raise PreprocessError(f"jax-tpu-embedding stopped while {what}: {self._last_error()}")
        return reply

    def _last_error(self) -> str:
        self._proc.wait()
        self._stderr.seek(0)
        lines = [ln.strip() for ln in self._stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        fatal = [ln for ln in lines if ln.startswith("F") or "Check failed" in ln or "Error" in ln]
        last = (fatal or lines or [f"exit status {self._proc.returncode}"])[-1]
        return last[-400:]

    def step(self, step: int, batches: list[FeatureBatch]) -> dict:
        lengths, ids = _arrays(batches)
        msg = {"kind": "step", "step": step, "lengths": lengths, "ids": ids}
        return self._call(msg, f"preprocessing step {step}")

    def close(self) -> None:
        if self._proc is None or self._stderr.closed:
            self._stderr.close()
            return
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> ReferenceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _arrays(batches: list[FeatureBatch]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return [fb.lengths for fb in batches], [fb.ids for fb in batches]


def library_entries(stack: dict, group: StackGroup, lay: Layout) -> dict[str, np.ndarray]:
    """The library's kept entries of one stack in scprof's terms: source SC, partition,
    stacked ID, table, raw ID, sample, feature slot, minibatch, gain."""
    e = stack["entries"]
    n_sc, bs = lay.num_sc, lay.samples_per_sc
    col = e["row"] * n_sc + e["partition"]
    table, raw = table_ids(col, group, n_sc)
    slot, local = np.divmod(e["sample"], bs)
    return {
        "source_sc": e["source_sc"],
        "partition": e["partition"],
        "col": col,
        "table": table,
        "id": raw,
        "sample": e["source_sc"] * bs + local,
        "feature_slot": slot,
        "minibatch": e["minibatch"],
        "gain": e["gain"],
    }


def _from_library(native: GroupResult, stack: dict, m_count: int, lay: Layout) -> GroupResult:
    """The stack's result with the library's minibatches and kept entries."""
    n_sc, spc, chips = lay.num_sc, lay.sparsecores_per_chip, lay.num_chips
    e = stack["entries"]
    src, part, mb, row = e["source_sc"], e["partition"], e["minibatch"], e["row"]
    ids_mp = np.bincount(mb * n_sc + part, minlength=m_count * n_sc).reshape(m_count, n_sc)
    distinct = np.unique(np.stack([mb, src, part, row]), axis=1) if len(row) else np.zeros((4, 0), np.int64)
    umb, usrc, upart = distinct[0], distinct[1], distinct[2]
    unique_mp = np.bincount(umb * n_sc + upart, minlength=m_count * n_sc).reshape(m_count, n_sc)
    cross = usrc // spc != upart // spc
    cross_mc = np.bincount(umb[cross] * chips + upart[cross] // spc, minlength=m_count * chips).reshape(m_count, chips)
    return replace(
        native,
        minibatches=m_count,
        ids_mp=ids_mp,
        unique_mp=unique_mp,
        cross_chip_mc=cross_mc,
        kept_per_source=np.bincount(src, minlength=n_sc),
        entries=None,
    )


def reference_step(
    session: ReferenceSession,
    step: int,
    batches: list[FeatureBatch],
    groups: list[StackGroup],
    lay: Layout,
    cfg: RunConfig,
) -> StepResult:
    """One step preprocessed by the library (see the module docstring)."""
    lib = session.step(step, batches)  # first: where the library aborts, its message is the one shown
    native = preprocess_step(step, batches, groups, lay, cfg.sparsecore)
    if native.chip_cap_dropped:
        raise PreprocessError(
            f"step {step}: sparsecore.preprocessing = 'reference': a sample exceeds "
            f"sparsecore.max_ids_per_chip_per_sample, a cap jax-tpu-embedding does not have; raise it"
        )
    m_count = lib["minibatches"]
    out = []
    for gr in native.groups:
        stack = lib["stacks"][gr.group.name]
        max_ids, max_uniq, required, dropped = gr.fdo_stats(lay.num_chips)
        for what, mine, theirs in (
            ("max IDs per partition", max_ids, stack["max_ids"]),
            ("max unique IDs per partition", max_uniq, stack["max_unique_ids"]),
            ("required buffer sizes", required, stack["required_buffer_size"]),
            ("dropped IDs", np.array([dropped]), np.array([stack["dropped"]])),
        ):
            if not np.array_equal(mine, theirs):
                raise PreprocessError(
                    f"step {step}: stack {gr.group.name!r}: jax-tpu-embedding and scprof disagree on {what} "
                    f"(library {_short(theirs)}, scprof {_short(mine)}); report it, and use "
                    f"sparsecore.preprocessing = 'native'"
                )
        out.append(_from_library(gr, stack, m_count, lay))
    kept = sum(r.kept_per_source for r in out)
    return replace(native, groups=out, kept_ids_per_sc=kept, minibatches=m_count)


def _short(a: np.ndarray) -> str:
    a = np.ravel(a)
    return " ".join(str(int(v)) for v in a[:8]) + (" ..." if len(a) > 8 else "")

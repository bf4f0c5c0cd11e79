"""Seeded generation of each step's sparse input batch (ragged multi-hot ID lists), or the
samples of a feature's `ids_file` (ids_file.py).

Every (seed, step, feature) has its own random stream, so a step's batch does not
depend on which other steps or features were generated before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_backend.config import FeatureConfig, RunConfig
from sim_backend.ids_file import load_ids_file


@dataclass(frozen=True)
class FeatureBatch:
    """One feature's IDs for one step: sample i owns ids[offsets[i]:offsets[i+1]]."""

    lengths: np.ndarray  # int64 [batch]: IDs per sample
    ids: np.ndarray  # int64 [sum(lengths)]: raw table row IDs, sample by sample
    # bool [batch] or None: samples whose COO values (weights) are NaN (nan_fraction)
    nan_samples: np.ndarray | None = None

    @property
    def row_ids(self) -> np.ndarray:
        """COO row ids: the sample index of every ID."""
        return np.repeat(np.arange(len(self.lengths), dtype=np.int64), self.lengths)


def sample_ids(rng: np.random.Generator, f: FeatureConfig, vocab: int, n: int) -> np.ndarray:
    """n IDs in [0, vocab) from the feature's distribution."""
    if f.distribution == "uniform":
        return rng.integers(0, vocab, n, dtype=np.int64)
    if f.distribution == "zipf":
        return zipf_ids(rng, f.zipf_exponent, vocab, n)
    hot = rng.random(n) < f.hot_fraction
    out = rng.integers(0, vocab, n, dtype=np.int64)
    out[hot] = rng.integers(0, min(f.hot_set_size, vocab), int(hot.sum()), dtype=np.int64)
    return out


def zipf_ids(rng: np.random.Generator, s: float, vocab: int, n: int) -> np.ndarray:
    """Bounded Zipf by inverse CDF of the continuous power law on [1, vocab + 1).

    ID k (0-based) has probability ~ (k + 1)^-s; ID 0 is the hottest. Vectorised and
    O(n) without a vocab-sized table (vocabularies reach 40M rows).
    """
    u = rng.random(n)
    top = float(vocab + 1)
    if abs(s - 1.0) < 1e-9:
        x = np.power(top, u)
    else:
        a = 1.0 - s
        x = np.power(1.0 + u * (top**a - 1.0), 1.0 / a)
    return np.minimum(x.astype(np.int64) - 1, vocab - 1).clip(0)


def generate_step(cfg: RunConfig, step: int) -> list[FeatureBatch]:
    """The sparse batch of one step, one FeatureBatch per configured feature."""
    vocab = {t.name: t.vocab for t in cfg.tables}
    out = []
    for i, f in enumerate(cfg.features):
        rng = np.random.default_rng([cfg.seed, step, i])
        b = cfg.global_batch
        if f.ids_file:  # the user's own IDs (ids_file.py): samples [step * b, (step + 1) * b)
            lengths, ids = load_ids_file(f.ids_file, f"features[{i}].ids_file").step(step, b)
        elif f.multi_hot_min is None:
            lengths = np.full(b, f.multi_hot, dtype=np.int64)
        else:
            lengths = rng.integers(f.multi_hot_min, f.multi_hot + 1, b, dtype=np.int64)
        if not f.ids_file:
            ids = sample_ids(rng, f, vocab[f.table], int(lengths.sum()))
        nan = None
        if f.oov_fraction > 0 or f.nan_fraction > 0:  # own stream: faults leave IDs unchanged
            faults = np.random.default_rng([cfg.seed, step, i, FAULT_STREAM])
            ids = inject_oov(faults, ids, vocab[f.table], f.oov_fraction)
            nan = faults.random(b) < f.nan_fraction if f.nan_fraction > 0 else None
        out.append(FeatureBatch(lengths, ids, nan))
    return out


FAULT_STREAM = 1  # the fourth seed word of a feature's fault-injection stream


def inject_oov(rng: np.random.Generator, ids: np.ndarray, vocab: int, fraction: float) -> np.ndarray:
    """Replace each ID with probability `fraction` by an out-of-vocabulary ID in [vocab, 2 vocab)."""
    if fraction <= 0:
        return ids
    hit = np.flatnonzero(rng.random(len(ids)) < fraction)
    ids[hit] = vocab + rng.integers(0, vocab, len(hit), dtype=np.int64)
    return ids

"""Embedding values and their quantization: clipping to [low, high], bucketing, counting.

SparseDenseMatmulOp takes f32 or integer tables and can
run *simulated quantization* with `quantization_config_num_buckets` levels over
`[quantization_config_low, quantization_config_high]`; values outside the range are
clipped to it. The emulator holds no real embedding values, so each value is a
deterministic function of (seed, table, row, column), vectorised:

- `h = splitmix64(splitmix64(row ^ table_key) + column)`, 64 random bits per value;
- its four 16-bit words `w_k` give `u_k = (w_k + 0.5) / 2^16`, uniform on (0, 1);
- `z = (u_1 + u_2 + u_3 + u_4 - 2) * sqrt(3)` (Irwin-Hall(4), standardised): mean 0,
  variance 1, bell-shaped and bounded at +-2 sqrt(3) = +-3.46, like a truncated normal;
- `value = z * init_stddev(width)`, with `init_stddev = 1 / sqrt(width)`: the default
  initializer of TPU embedding tables (tf.tpu.experimental.embedding.TableConfig:
  truncated normal, mean 0, stddev 1/sqrt(dim)). Values are the tables' initial
  values; training is not modelled.

So a range wider than +-3.46 / sqrt(width) never clips, and a narrower one clips the
share of the Irwin-Hall tails outside it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

# splitmix64 (Steele, Lea, Flood 2014; the seeding generator of xorshift/xoshiro)
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
IRWIN_HALL_TERMS = 4
VALUE_BOUND = 2 * math.sqrt(3)  # |z| < 2 sqrt(3): the standardised Irwin-Hall(4) support
CHUNK_VALUES = 1 << 20  # values evaluated at once (bounds the work memory)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 output function of x + gamma (uint64 in, uint64 out, wrapping)."""
    z = x + _GAMMA
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))


def table_key(seed: int, table: str) -> np.uint64:
    """64-bit key of one table's values: stable across runs and Python versions."""
    digest = hashlib.sha256(f"scprof-values:{seed}:{table}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


def init_stddev(width: int) -> float:
    """Scale of the initial values: 1/sqrt(width), the TPU embedding default."""
    return 1.0 / math.sqrt(width)


def embedding_values(key: np.uint64, rows: np.ndarray, width: int) -> np.ndarray:
    """float64 [len(rows), width]: the values of the given rows of one table."""
    base = splitmix64(np.asarray(rows, dtype=np.int64).astype(np.uint64) ^ key)
    h = splitmix64(base[:, None] + np.arange(width, dtype=np.uint64)[None, :])
    words = h.view(np.uint16).reshape(*h.shape, IRWIN_HALL_TERMS)  # the four 16-bit words
    s = words[..., 0].astype(np.int32)
    for k in range(1, IRWIN_HALL_TERMS):
        s += words[..., k]
    # sum of (w_k + 0.5) / 2^16 over the four words, centred and scaled to variance 1:
    # z = (s + 2 - 2^17) * sqrt(3) / 2^16, times the init scale in one multiply
    scale = math.sqrt(3) / 65536.0 * init_stddev(width)
    return (s.astype(np.float64) + (0.5 * IRWIN_HALL_TERMS - 65536.0 * IRWIN_HALL_TERMS / 2)) * scale


def quantize(values: np.ndarray, low: float, high: float, num_buckets: int) -> np.ndarray:
    """Simulated quantization: clip to [low, high], round to the nearest of num_buckets levels."""
    step = (high - low) / (num_buckets - 1)
    codes = np.rint((np.clip(values, low, high) - low) / step)
    return low + codes * step


@dataclass(frozen=True)
class Clipping:
    """What quantizing a set of rows did: values looked at, clipped, and the error it made."""

    values: int
    clipped: int  # values outside [low, high]
    squared_error: float  # sum of (dequantized - value)^2


def clip_stats(key: np.uint64, rows: np.ndarray, width: int, low: float, high: float, num_buckets: int) -> Clipping:
    """Quantize the given rows (in chunks) and count the values clipped to the range."""
    rows = np.asarray(rows, dtype=np.int64)
    per_chunk = max(1, CHUNK_VALUES // width)
    clipped, sq = 0, 0.0
    for at in range(0, len(rows), per_chunk):
        v = embedding_values(key, rows[at : at + per_chunk], width)
        clipped += int(np.count_nonzero((v < low) | (v > high)))
        sq += float(np.square(quantize(v, low, high, num_buckets) - v).sum())
    return Clipping(len(rows) * width, clipped, sq)

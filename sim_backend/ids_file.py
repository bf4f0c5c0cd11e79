"""Users' own IDs for a feature (`features[].ids_file`): an .npz or a Parquet file, read once per run.

Formats:
- `.npz` (numpy, no pickles): integer arrays `lengths` (IDs per sample, one entry per
  sample) and `ids` (the IDs, flat, sample after sample; `sum(lengths) == len(ids)`);
- `.parquet`: a column `ids` of type list<int64> (or list<int32>), one row per sample.
Step s of a run reads samples `[s * B, (s + 1) * B)` of the file, wrapping around its end
(B = `global_batch`). IDs must be non-negative and below 2^31 (jax-tpu-embedding's IDs
are int32); IDs at or above the table's vocabulary are out-of-vocabulary IDs, handled as
the generator's injected ones (clamped, and counted by the bound check when it is on).
A bad file is one ConfigError line naming the key and the file.
"""

from __future__ import annotations

import functools
import io
import os
from dataclasses import dataclass

import numpy as np

from sim_backend.config_checks import read_file_bytes
from sim_backend.errors import ConfigError

MAX_IDS_FILE_BYTES = 4 << 30  # an ID file is read into memory whole
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class SampleIds:
    """A file's samples as CSR: sample i owns ids[offsets[i]:offsets[i + 1]]."""

    offsets: np.ndarray  # int64 [samples + 1]
    ids: np.ndarray  # int64 [offsets[-1]]

    @property
    def samples(self) -> int:
        return len(self.offsets) - 1

    def step(self, step: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, ids) of the `batch` samples of `step`, wrapping around the file."""
        idx = (step * batch + np.arange(batch, dtype=np.int64)) % self.samples
        starts, lengths = self.offsets[idx], np.diff(self.offsets)[idx]
        total = int(lengths.sum())
        first = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return lengths, self.ids[first + np.arange(total, dtype=np.int64)]


def load_ids_file(path: str, key: str) -> SampleIds:
    """The samples of an ID file (cached per path, size and modification time)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    try:
        return _load(path, st.st_size if st else -1, st.st_mtime_ns if st else -1)
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None


@functools.lru_cache(maxsize=16)
def _load(path: str, size: int, mtime_ns: int) -> SampleIds:
    data = read_file_bytes(path, "ID file", MAX_IDS_FILE_BYTES)
    if path.endswith(".npz"):
        lengths, ids = _npz(path, data)
    elif path.endswith(".parquet"):
        lengths, ids = _parquet(path, data)
    else:
        raise ConfigError(f"{path}: an ID file is an .npz (arrays lengths, ids) or a .parquet (column ids)")
    if lengths.ndim != 1 or ids.ndim != 1:
        raise ConfigError(f"{path}: lengths and ids must be one-dimensional")
    if len(lengths) == 0:
        raise ConfigError(f"{path}: holds no samples")
    if (lengths < 0).any():
        raise ConfigError(f"{path}: a sample has a negative length")
    if int(lengths.sum()) != len(ids):
        raise ConfigError(f"{path}: the lengths add up to {int(lengths.sum()):,} IDs, the file holds {len(ids):,}")
    if len(ids) and (ids.min() < 0 or ids.max() > MAX_ID):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ConfigError(f"{path}: ID {bad} is outside [0, 2^31 - 1]")
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    offsets.flags.writeable = False
    ids = ids.astype(np.int64)
    ids.flags.writeable = False
    return SampleIds(offsets, ids)


def _npz(path: str, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            missing = [k for k in ("lengths", "ids") if k not in z.files]
            if missing:
                raise ConfigError(f"{path}: no array {missing[0]!r} (an .npz ID file holds lengths and ids)")
            lengths, ids = z["lengths"], z["ids"]
    except ConfigError:
        raise
    except (ValueError, OSError, EOFError, KeyError) as e:
        raise ConfigError(f"{path}: not a readable .npz file ({str(e).splitlines()[0][:120]})") from None
    for name, a in (("lengths", lengths), ("ids", ids)):
        if a.dtype.kind not in "iu":
            raise ConfigError(f"{path}: array {name!r} is {a.dtype}, not integers")
    return lengths.astype(np.int64), ids.astype(np.int64)


def _parquet(path: str, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data), columns=["ids"])
    except (pa.ArrowException, OSError, KeyError, ValueError) as e:
        raise ConfigError(f"{path}: not a Parquet file with a column 'ids' ({str(e).splitlines()[0][:120]})") from None
    col = table.column("ids").combine_chunks()
    if not pa.types.is_list(col.type) and not pa.types.is_large_list(col.type):
        raise ConfigError(f"{path}: column 'ids' is {col.type}, not a list of integers")
    if not pa.types.is_integer(col.type.value_type):
        raise ConfigError(f"{path}: column 'ids' holds {col.type.value_type}, not integers")
    if col.null_count:
        raise ConfigError(f"{path}: column 'ids' has {col.null_count} null rows")
    values = col.flatten()
    if values.null_count:
        raise ConfigError(f"{path}: column 'ids' has null IDs")
    lengths = np.asarray(col.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    return lengths, np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)

"""FDO stats in jax-tpu-embedding's CSV format: what scprof derives, a JAX job can load; what a job
published, scprof can replay.

The library's `CSVFileFDOClient` publishes `fdo_stats_<process>_<ns>.csv` files in a
directory: a header `key,values`, then one row per recorded step and key, keys
`<stack>_max_ids`, `<stack>_max_unique_ids` (values per (device, partition)),
`<stack>_required_buffer_size` (per SparseCore) and `<stack>_id_drop_counters` (one value),
values separated by spaces. `load()` reads the newest file of each process and takes
the element-wise maximum; `embedding.update_preprocessing_parameters` then gives each stack
the maximum over its partitions as its limits. `write_fdo_stats` writes such a file;
`read_fdo_limits` reads a directory the way `load()` does and returns those limits.
Tested both ways against the library's own client (tests/sim_backend/test_library_oracle.py).
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
import time
from dataclasses import dataclass

import numpy as np

from sim_backend.config_checks import read_file_bytes
from sim_backend.errors import ConfigError

FILE_RE = re.compile(r"fdo_stats_(\d+)_(\d+)\.csv")
SUFFIXES = {
    "max_ids": "_max_ids",
    "max_unique_ids": "_max_unique_ids",
    "required_buffer_size": "_required_buffer_size",
    "id_drop_counters": "_id_drop_counters",
}
MAX_FDO_FILE_BYTES = 256 << 20  # one row per step and key: about 100 MB for 10,000 steps of 50 stacks
MAX_FDO_FILES = 4096  # processes (hosts) of a job whose newest files are read
MAX_LIMIT = 2**31 - 1  # limits are int32 in the library


@dataclass
class StackFdoStats:
    """One stack's stats, a row per recorded step (the library's recording with history)."""

    max_ids: list[np.ndarray]  # per step: int64 [devices x num SCs], max over a device's SCs
    max_unique_ids: list[np.ndarray]
    required_buffer_size: list[np.ndarray]  # per step: int64 [num SCs]
    id_drop_counters: list[int]  # per step: IDs dropped (in-sample repeats counted)

    def add(self, max_ids: np.ndarray, max_unique_ids: np.ndarray, required: np.ndarray, dropped: int) -> None:
        self.max_ids.append(np.asarray(max_ids, np.int64))
        self.max_unique_ids.append(np.asarray(max_unique_ids, np.int64))
        self.required_buffer_size.append(np.asarray(required, np.int64))
        self.id_drop_counters.append(int(dropped))


def new_stats() -> StackFdoStats:
    return StackFdoStats([], [], [], [])


def write_fdo_stats(out_dir: str, stats: dict[str, StackFdoStats], process_index: int = 0) -> str:
    """Write `fdo_stats_<process>_<ns>.csv` into `out_dir` as the library's client publishes it;
    returns its path."""
    path = os.path.join(out_dir, f"fdo_stats_{process_index}_{time.time_ns()}.csv")
    with open(path, "w", newline="") as fh:
        fh.write(fdo_stats_text(stats))
    return path


def limits_stats(limits: dict[str, tuple[int | None, int | None]]) -> dict[str, StackFdoStats]:
    """Per-stack limits (as read_fdo_limits gives them) as stats of one step that give them back."""
    return {
        stack: StackFdoStats(
            [np.array([ids])] if ids is not None else [], [np.array([uniq])] if uniq is not None else [], [], []
        )
        for stack, (ids, uniq) in limits.items()
    }


def fdo_stats_text(stats: dict[str, StackFdoStats]) -> str:
    """The CSV text of one stats file (write_fdo_stats)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")  # the csv module's default, as the library writes
    w.writerow(["key", "values"])
    for name in stats:
        s = stats[name]
        for field, rows in (
            ("max_ids", s.max_ids),
            ("max_unique_ids", s.max_unique_ids),
            ("required_buffer_size", s.required_buffer_size),
            ("id_drop_counters", [np.array([d]) for d in s.id_drop_counters]),
        ):
            for row in rows:
                w.writerow([name + SUFFIXES[field], " ".join(str(int(v)) for v in np.ravel(row))])
    return buf.getvalue()


def _latest_per_process(directory: str) -> list[str]:
    """The newest stats file of each process in `directory` (as the library's load() picks)."""
    newest: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        raise ConfigError(f"flags.fdo_stats_dir {directory}: no such directory") from None
    except NotADirectoryError:
        raise ConfigError(f"flags.fdo_stats_dir {directory}: not a directory") from None
    except OSError as e:
        raise ConfigError(f"flags.fdo_stats_dir {directory}: cannot list it ({e.strerror})") from None
    for name in names:
        m = FILE_RE.fullmatch(name)
        if m:
            proc, ns = int(m.group(1)), int(m.group(2))
            if proc not in newest or ns > newest[proc][0]:
                newest[proc] = (ns, name)
    if not newest:
        raise ConfigError(f"flags.fdo_stats_dir {directory}: no fdo_stats_<process>_<ns>.csv file in it")
    if len(newest) > MAX_FDO_FILES:
        raise ConfigError(f"flags.fdo_stats_dir {directory}: {len(newest)} processes; at most {MAX_FDO_FILES}")
    return [os.path.join(directory, newest[p][1]) for p in sorted(newest)]


def read_fdo_stats(directory: str) -> dict[str, dict[str, np.ndarray]]:
    """Per stack and field (SUFFIXES' keys), the element-wise maximum over the rows of each
    process's newest file and over processes (the library's `load()`), as int64 arrays."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for path in _latest_per_process(directory):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ConfigError(f"{path}: is not a regular file; an FDO stats file must be one")
        data = read_file_bytes(path, "FDO stats file", MAX_FDO_FILE_BYTES)
        try:
            rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        except (UnicodeDecodeError, csv.Error) as e:
            raise ConfigError(f"{path}: not an FDO stats CSV file ({e})") from None
        if not rows or rows[0] != ["key", "values"]:
            raise ConfigError(f"{path}: not an FDO stats CSV file (the first line is not 'key,values')")
        for line, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) != 2:
                raise ConfigError(f"{path}: line {line}: expected key,values")
            key, text = row
            field = next((f for f, suf in SUFFIXES.items() if key.endswith(suf) and len(key) > len(suf)), None)
            if field is None:
                raise ConfigError(
                    f"{path}: line {line}: key {key[:80]!r} ends in none of {', '.join(SUFFIXES.values())}"
                )
            try:
                vals = np.array([int(v) for v in text.split()], dtype=np.int64)
            except (ValueError, OverflowError):
                raise ConfigError(f"{path}: line {line}: values are not integers separated by spaces") from None
            stack = key[: -len(SUFFIXES[field])]
            have = out.setdefault(stack, {}).get(field)
            if have is not None and have.shape != vals.shape:
                raise ConfigError(f"{path}: line {line}: {len(vals)} values for {key}, {len(have)} before")
            out[stack][field] = vals if have is None else np.maximum(have, vals)
    return out


def read_fdo_limits(directory: str) -> dict[str, tuple[int | None, int | None]]:
    """Per stack, (max IDs, max unique IDs) per partition from a directory of FDO stats: the
    maximum over partitions, as `embedding.update_preprocessing_parameters` sets them."""
    limits = {}
    for stack, fields in read_fdo_stats(directory).items():
        ids, uniq = fields.get("max_ids"), fields.get("max_unique_ids")
        pair = tuple(max(1, int(a.max())) if a is not None and a.size else None for a in (ids, uniq))
        if any(v is not None and v > MAX_LIMIT for v in pair):
            raise ConfigError(f"flags.fdo_stats_dir {directory}: stack {stack!r}: a limit above {MAX_LIMIT:,}")
        limits[stack] = pair
    return limits

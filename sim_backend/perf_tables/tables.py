"""Performance tables: measured throughput of collectives and GEMMs.

One directory holds one set of tables, two JSON files (format documented in
docs/emulator.md "Cost model: performance tables"):

* `collectives.json`: per (collective, transfer scheme), throughput in bytes/s over
  (transfer size in bytes, device count). The size is the bytes one device sends for
  the collective (the `bytes` argument of the trace's ICI events), so the throughput is
  a bus bandwidth: a ring all-reduce of a B-byte buffer over n devices sends 2(n-1)/n B.
* `gemm.json`: per element type, achieved FLOP/s = 2 b m n k / runtime over
  (batch, m, n, k).

Each (collective, scheme) and each dtype must form a full grid. Lookups go through
`interpolate.GridInterpolator` (exact at the points, monotone between them); the time
rules at the edges are the seed's: beyond the largest size (or GEMM dimension) the
throughput is the saturated one at the largest, so time = size / saturated throughput;
below the smallest, a transfer takes the time of the smallest measured one (that one is
latency-bound; a smaller transfer cannot be faster), while a GEMM runs at the FLOP/s of
the smallest measured shape (XLA's clamp: a 256-wide GEMM already keeps the matrix unit
busy, and charging a 13-wide layer the time of a 256-wide one would overstate it 20x;
the dense pass's HBM floor and the task overhead bound it from below). Device counts
outside the table are clamped (the nearest measured count's throughput). A dtype
without a table is looked up by bytes, as the seed's heuristic says: m, n and k are
normalised to bytes and the GEMM costs what a GEMM of a tabled dtype with the same
operand bytes costs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from sim_backend.config_checks import read_text_file
from sim_backend.errors import ConfigError
from sim_backend.interpolate import GridInterpolator

FORMAT = "scprof-perf-tables/1"
COLLECTIVES_FILE = "collectives.json"
GEMM_FILE = "gemm.json"
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
SCHEMES = ("rail-aligned", "non-rail-aligned")
# bytes per element of the GEMM element types a table (or a query) may name
DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "int8": 1, "f8e4m3": 1, "f8e5m2": 1}
TOP_KEYS = {"format", "description", "generated_from", "entries"}


@dataclass(frozen=True)
class CollectiveEntry:
    """One measured point: a collective of `bytes` per device over `devices` devices."""

    collective: str
    scheme: str
    devices: int
    bytes: int
    throughput_bytes_per_s: float


@dataclass(frozen=True)
class GemmEntry:
    """One measured point: [batch x] (m x k) @ (k x n) in `dtype` ran at flops_per_s."""

    dtype: str
    batch: int
    m: int
    n: int
    k: int
    flops_per_s: float


@dataclass
class PerfTables:
    """One set of tables, validated, with an interpolator per (collective, scheme) and dtype."""

    source: str  # "bundled:v5p", "roofline:...", or the directory path
    collectives: list[CollectiveEntry]
    gemms: list[GemmEntry]
    generated_from: dict | None = None  # the roofline inputs, for generated tables
    _coll: dict[tuple[str, str], GridInterpolator] = field(default_factory=dict, repr=False)
    _gemm: dict[str, GridInterpolator] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        where = f"{self.source}/{COLLECTIVES_FILE}" if self.source else COLLECTIVES_FILE
        keyed = _group(self.collectives, lambda e: (e.collective, e.scheme))
        self._coll = {
            key: _grid(f"{where}: {key[0]} {key[1]}", rows, ("devices", "bytes"), "throughput_bytes_per_s")
            for key, rows in keyed.items()
        }
        where = f"{self.source}/{GEMM_FILE}" if self.source else GEMM_FILE
        if not self.gemms:
            raise ConfigError(f"{where}: no entries")
        self._gemm = {
            dtype: _grid(f"{where}: dtype {dtype}", rows, ("batch", "m", "n", "k"), "flops_per_s")
            for dtype, rows in _group(self.gemms, lambda e: e.dtype).items()
        }

    # -- lookups -------------------------------------------------------------------------

    def schemes(self, collective: str) -> list[str]:
        return sorted(s for c, s in self._coll if c == collective)

    def require(self, collective: str) -> None:
        """ConfigError unless the tables have entries for `collective`."""
        if not self.schemes(collective):
            raise ConfigError(
                f"{self.source}/{COLLECTIVES_FILE}: no {collective} entries (the emulator needs {collective})"
            )

    def _collective_grid(self, collective: str, scheme: str) -> GridInterpolator:
        """The (collective, scheme) grid; a scheme not tabled falls back to the first one that is."""
        schemes = self.schemes(collective)
        if not schemes:
            self.require(collective)
        return self._coll[(collective, scheme if scheme in schemes else schemes[0])]

    def collective_throughput(
        self, collective: str, scheme: str, nbytes: np.ndarray, devices: int | np.ndarray
    ) -> np.ndarray:
        """Interpolated bytes/s at (devices, nbytes), clamped to the table's range."""
        return self._collective_grid(collective, scheme)(devices, nbytes)

    def collective_time_s(
        self, collective: str, scheme: str, nbytes: np.ndarray, devices: int | np.ndarray
    ) -> np.ndarray:
        """Seconds for `nbytes` per device: size / throughput, with the edge rules above."""
        grid = self._collective_grid(collective, scheme)
        size = np.maximum(np.asarray(nbytes, np.float64), grid.axes[1][0])  # latency floor
        return size / grid(devices, size)

    def gemm_time_s(self, batch: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str) -> np.ndarray:
        """Seconds for GEMMs (vectorised over the dimensions) of one element type."""
        if dtype not in DTYPE_BYTES:
            raise ConfigError(f"GEMM dtype {dtype!r} is not one of {sorted(DTYPE_BYTES)}")
        dims = [np.asarray(d, np.float64) for d in (batch, m, n, k)]
        if dtype not in self._gemm:  # normalise each dimension to bytes
            ref = self.reference_dtype(dtype)
            scale = DTYPE_BYTES[dtype] / DTYPE_BYTES[ref]
            dims = [dims[0]] + [d * scale for d in dims[1:]]
            dtype = ref
        flops = 2.0 * dims[0] * dims[1] * dims[2] * dims[3]
        return flops / self._gemm[dtype](*dims)

    def reference_dtype(self, dtype: str) -> str:
        """The tabled dtype a missing one is looked up in: closest element size, then name."""
        size = DTYPE_BYTES[dtype]
        return min(self._gemm, key=lambda d: (abs(DTYPE_BYTES[d] - size), d))

    # -- files ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, str]:
        """File name -> text: one entry per line, so a diff shows the points that changed."""
        meta = {"generated_from": self.generated_from} if self.generated_from else {}
        return {
            COLLECTIVES_FILE: _dump(
                "Throughput of collectives: bytes one device sends / time, over (bytes, devices).",
                meta,
                self.collectives,
            ),
            GEMM_FILE: _dump("Achieved FLOP/s of GEMMs (2 b m n k / runtime) over (batch, m, n, k).", meta, self.gemms),
        }

    def write(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        for name, text in self.to_json().items():
            with open(os.path.join(directory, name), "w") as fh:
                fh.write(text)


def load_tables(directory: str, source: str | None = None) -> PerfTables:
    """Read and validate `directory`/collectives.json and gemm.json (ConfigError: one line)."""
    if not os.path.isdir(directory):
        what = "not a directory" if os.path.exists(directory) else "no such directory"
        raise ConfigError(f"{directory}: {what} (perf_tables / --perf-tables)")
    coll_meta, coll = _read(os.path.join(directory, COLLECTIVES_FILE), CollectiveEntry)
    _, gemm = _read(os.path.join(directory, GEMM_FILE), GemmEntry)
    return PerfTables(source or directory, coll, gemm, coll_meta.get("generated_from"))


# -- validation --------------------------------------------------------------------------


def _read(path: str, cls: type) -> tuple[dict, list]:
    text = read_text_file(path, "file", f" (a table directory holds {COLLECTIVES_FILE} and {GEMM_FILE})")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise ConfigError(f'{path}: expected a JSON object with "format" and "entries"')
    if doc.get("format") != FORMAT:
        raise ConfigError(f"{path}: format: expected {FORMAT!r}, got {doc.get('format')!r}")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    entries = doc.get("entries")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: entries: expected a non-empty list")
    return doc, [_entry(cls, e, f"{path}: entries[{i}]") for i, e in enumerate(entries)]


def _entry(cls: type, raw: object, where: str) -> CollectiveEntry | GemmEntry:
    names = [f.name for f in fields(cls)]
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object with {', '.join(names)}")
    for key in raw:
        if key not in names:
            raise ConfigError(f"{where}: {key}: unknown field (fields: {', '.join(names)})")
    values = {}
    for f in fields(cls):
        if f.name not in raw:
            raise ConfigError(f"{where}: {f.name}: missing")
        v = raw[f.name]
        if f.type == "str":
            choices = {"collective": COLLECTIVES, "scheme": SCHEMES, "dtype": tuple(DTYPE_BYTES)}
            if v not in choices[f.name]:
                raise ConfigError(f"{where}: {f.name}: {v!r} is not one of {list(choices[f.name])}")
        elif f.type == "int":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{where}: {f.name}: expected a positive integer, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
            raise ConfigError(f"{where}: {f.name}: expected a positive number, got {v!r}")
        else:
            v = float(v)
        values[f.name] = v
    return cls(**values)


def _group(entries: list, key) -> dict:
    out: dict = {}
    for e in entries:
        out.setdefault(key(e), []).append(e)
    return out


def _grid(where: str, rows: list, axes: tuple[str, ...], value: str) -> GridInterpolator:
    """The full grid over `axes` that `rows` must form (error names a duplicate or a hole)."""
    points: dict[tuple, float] = {}
    for e in rows:
        p = tuple(getattr(e, a) for a in axes)
        if p in points:
            raise ConfigError(f"{where}: two entries for {_point(axes, p)}")
        points[p] = getattr(e, value)
    values = [sorted({p[i] for p in points}) for i in range(len(axes))]
    rates = np.empty([len(v) for v in values])
    for idx in np.ndindex(rates.shape):
        p = tuple(v[i] for v, i in zip(values, idx, strict=True))
        if p not in points:
            raise ConfigError(
                f"{where}: no entry for {_point(axes, p)} (the entries must form a full grid over {' x '.join(axes)})"
            )
        rates[idx] = points[p]
    return GridInterpolator.from_points(values, rates)


def _point(axes: tuple[str, ...], p: tuple) -> str:
    return ", ".join(f"{a}={v}" for a, v in zip(axes, p, strict=True))


def _dump(description: str, meta: dict, entries: list) -> str:
    head = {"format": FORMAT, "description": description, **meta}
    lines = [json.dumps(asdict(e)) for e in entries]
    body = json.dumps(head, indent=2, sort_keys=False)[:-2]  # drop the closing "\n}"
    return body + ',\n  "entries": [\n    ' + ",\n    ".join(lines) + "\n  ]\n}\n"

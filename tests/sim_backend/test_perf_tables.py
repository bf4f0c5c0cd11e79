"""Performance tables, their interpolator, the table cost model and the DCN S-curve.

References are hand-computed from the table entries (geometric interpolation in log2
coordinates, size / throughput), or a plain-Python reference over small tables.
"""

from __future__ import annotations

import copy
import json
import math
import os

import numpy as np
import pytest

from profiler.reader import read_trace
from scprof.cli import main as scprof_main
from sim_backend.config import config_from_dict
from sim_backend.config_load import load_config
from sim_backend.costmodel import (
    CostConstants,
    TableCostModel,
    dcn_all_reduce_s,
    dcn_bus_bandwidth,
    default_tables,
    make_cost_model,
)
from sim_backend.dense import Gemm, dense_gemms, dense_work
from sim_backend.emulator import simulate
from sim_backend.errors import ConfigError
from sim_backend.hardware import resolve_hardware
from sim_backend.interpolate import GridInterpolator
from sim_backend.perf_tables import bundled_dir
from sim_backend.perf_tables.generate import stale_files
from sim_backend.perf_tables.tables import (
    COLLECTIVES_FILE,
    FORMAT,
    GEMM_FILE,
    CollectiveEntry,
    GemmEntry,
    PerfTables,
    load_tables,
)
from sim_backend.stepgraph import ALLREDUCE
from tests.sim_backend.conftest import REPO

KiB, GiB = 1 << 10, 1 << 30
V5P = resolve_hardware("v5p", 4, {})


def coll_table(
    values: dict[tuple[int, int], float], collective: str = "all-reduce", scheme: str = "rail-aligned"
) -> list[CollectiveEntry]:
    return [CollectiveEntry(collective, scheme, d, b, v) for (d, b), v in values.items()]


def gemm_table(rate, dtype: str = "bf16", batches=(1, 2), dims=(256, 512)) -> list[GemmEntry]:
    return [GemmEntry(dtype, b, m, n, k, rate(b, m, n, k)) for b in batches for m in dims for n in dims for k in dims]


def tables(coll: list[CollectiveEntry], gemm: list[GemmEntry] | None = None) -> PerfTables:
    return PerfTables("test", coll, gemm or gemm_table(lambda *d: 1e12))


# -- interpolator -----------------------------------------------------------------------


def test_exact_at_every_bundled_table_point():
    t = load_tables(bundled_dir("v5p"))
    for e in t.collectives:
        got = t.collective_throughput(e.collective, e.scheme, e.bytes, e.devices)
        assert float(got) == e.throughput_bytes_per_s, e
        assert (
            float(t.collective_time_s(e.collective, e.scheme, e.bytes, e.devices)) == e.bytes / e.throughput_bytes_per_s
        )
    for e in t.gemms:
        got = t.gemm_time_s(e.batch, e.m, e.n, e.k, e.dtype)
        assert float(got) == 2.0 * e.batch * e.m * e.n * e.k / e.flops_per_s, e


def test_between_points_is_the_geometric_mean_by_log2_distance():
    # 2 devices: 1 KiB -> 1e9, 4 KiB -> 3e9; 4 devices: 1 KiB -> 0.5e9, 4 KiB -> 2e9
    t = tables(coll_table({(2, KiB): 1e9, (2, 4 * KiB): 3e9, (4, KiB): 0.5e9, (4, 4 * KiB): 2e9}))
    # 2 KiB is half way in log2 size: sqrt(1e9 * 3e9)
    assert float(t.collective_throughput("all-reduce", "rail-aligned", 2 * KiB, 2)) == pytest.approx(
        math.sqrt(3) * 1e9, rel=1e-12
    )
    # 3 devices: log2(3) - 1 of the way from 2 to 4; 4 KiB
    w = math.log2(3) - 1
    assert float(t.collective_throughput("all-reduce", "rail-aligned", 4 * KiB, 3)) == pytest.approx(
        3e9 ** (1 - w) * 2e9**w, rel=1e-12
    )
    # both axes: weights multiply
    want = (1e9**0.5 * 3e9**0.5) ** (1 - w) * (0.5e9**0.5 * 2e9**0.5) ** w
    assert float(t.collective_throughput("all-reduce", "rail-aligned", 2 * KiB, 3)) == pytest.approx(want, rel=1e-12)


def monotone_table(rng: np.random.Generator) -> dict[tuple[int, int], float]:
    """Throughput grows by x1..x2 per size doubling (time and throughput both monotone),
    and falls with the device count."""
    sizes = [KiB << i for i in range(12)]
    out = {}
    for j, d in enumerate((2, 4, 8)):
        rate = 1e8 / (1 + j)
        for s in sizes:
            out[(d, s)] = rate
            rate *= rng.uniform(1.0, 2.0)
    # keep it decreasing in devices at every size
    for s in sizes:
        out[(4, s)] = min(out[(4, s)], out[(2, s)])
        out[(8, s)] = min(out[(8, s)], out[(4, s)])
    return out


def rising(v: np.ndarray) -> bool:
    """Non-decreasing up to float rounding (a product of powers: 1e-15 relative)."""
    return bool(np.all(np.diff(v) >= -1e-12 * np.abs(v[:-1])))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_monotone_between_points_on_a_monotone_table(seed):
    t = tables(coll_table(monotone_table(np.random.default_rng(seed))))
    sizes = np.geomspace(KiB, KiB << 11, 4001)
    for devices in (2, 2.5, 3, 4, 5, 7, 8):
        rate = t.collective_throughput("all-reduce", "rail-aligned", sizes, devices)
        time = t.collective_time_s("all-reduce", "rail-aligned", sizes, devices)
        assert rising(rate) and rising(time)
    for size in sizes[::97]:
        rate = t.collective_throughput("all-reduce", "rail-aligned", size, np.linspace(2, 8, 601))
        assert rising(-rate)


def test_arithmetic_mean_would_not_be_monotone_in_time():
    """Why log rates: linear interpolation of a latency-bound pair breaks the time order."""
    lo, hi = 1e9, 1.99e9  # 1 KiB and 2 KiB, almost latency-bound
    s = np.geomspace(KiB, 2 * KiB, 101)
    frac = np.log2(s / KiB)
    arithmetic_time = s / (lo + frac * (hi - lo))
    assert np.any(np.diff(arithmetic_time) < 0)
    t = tables(coll_table({(2, KiB): lo, (2, 2 * KiB): hi}))
    assert rising(t.collective_time_s("all-reduce", "rail-aligned", s, 2))


def test_gemm_monotone_along_every_axis_on_a_monotone_table():
    rng = np.random.default_rng(5)
    dims = (256, 512, 1024, 2048)
    steps = {a: rng.uniform(1.0, 1.9, 4) for a in range(4)}

    def rate(b, m, n, k):
        r = 1e12
        for a, v in enumerate((b, m, n, k)):
            r *= np.prod(steps[a][: int(math.log2(v / (1 if a == 0 else 256)))])
        return float(r)

    t = tables(coll_table({(2, KiB): 1e9}), gemm_table(rate, batches=(1, 2, 4), dims=dims))
    line = np.geomspace(256, 2048, 1001)
    for axis in range(1, 4):
        q = [np.full_like(line, 2.0), np.full_like(line, 700.0), np.full_like(line, 300.0), np.full_like(line, 1500.0)]
        q[axis] = line
        time = t.gemm_time_s(*q, "bf16")
        flops = 2.0 * q[0] * q[1] * q[2] * q[3]
        assert rising(flops / time) and rising(time)


def test_grid_interpolator_matches_a_plain_python_reference():
    rng = np.random.default_rng(9)
    axes = [[1.0, 2.0, 4.0], [256.0, 512.0, 1024.0]]
    rates = rng.uniform(1.0, 10.0, (3, 3))
    grid = GridInterpolator.from_points(axes, rates)

    def reference(x, y):
        def bracket(axis, v):
            v = min(max(v, axis[0]), axis[-1])
            i = max(j for j in range(len(axis) - 1) if axis[j] <= v) if v < axis[-1] else len(axis) - 2
            d0, d1 = math.log2(v) - math.log2(axis[i]), math.log2(axis[i + 1]) - math.log2(v)
            return i, d1 / (d0 + d1), d0 / (d0 + d1)  # inverse-distance weights of i, i+1

        i, wi0, wi1 = bracket(axes[0], x)
        j, wj0, wj1 = bracket(axes[1], y)
        log = (
            wi0 * wj0 * math.log(rates[i, j])
            + wi0 * wj1 * math.log(rates[i, j + 1])
            + wi1 * wj0 * math.log(rates[i + 1, j])
            + wi1 * wj1 * math.log(rates[i + 1, j + 1])
        )
        return math.exp(log)

    for x, y in [(1.5, 300), (3.0, 1000), (1.0, 700), (4, 256), (0.5, 100), (9, 5000), (2.2, 512)]:
        assert float(grid(x, y)) == pytest.approx(reference(x, y), rel=1e-12)


# -- edges: saturation, below the smallest, dtype normalisation ---------------------------


def test_beyond_the_largest_size_time_is_size_over_saturated_throughput():
    t = tables(coll_table({(2, KiB): 1e9, (2, 2 * GiB): 400e9, (4, KiB): 1e9, (4, 2 * GiB): 300e9}))
    # 8 GiB over 4 devices: 8 GiB / 300 GB/s
    assert float(t.collective_time_s("all-reduce", "rail-aligned", 8 * GiB, 4)) == pytest.approx(
        8 * GiB / 300e9, rel=1e-12
    )
    # and beyond the device range too: 16 devices use the 4-device (largest) saturation
    assert float(t.collective_time_s("all-reduce", "rail-aligned", 8 * GiB, 16)) == pytest.approx(
        8 * GiB / 300e9, rel=1e-12
    )
    # bundled v5p, 4 devices, 6 GiB: the 2 GiB entry's throughput
    b = load_tables(bundled_dir("v5p"))
    (sat,) = [
        e.throughput_bytes_per_s
        for e in b.collectives
        if (e.collective, e.scheme, e.devices, e.bytes) == ("all-reduce", "rail-aligned", 4, 2 * GiB)
    ]
    assert float(b.collective_time_s("all-reduce", "rail-aligned", 6 * GiB, 4)) == pytest.approx(
        6 * GiB / sat, rel=1e-12
    )


def test_below_the_smallest_size_takes_the_smallest_transfers_time():
    t = tables(coll_table({(2, KiB): 1e9, (2, 2 * KiB): 1.8e9}))
    small = t.collective_time_s("all-reduce", "rail-aligned", np.array([0, 1, 100, KiB]), 2)
    assert np.all(small == pytest.approx(KiB / 1e9, rel=1e-12))


def test_gemm_exact_saturating_and_clamped_below():
    t = tables(
        coll_table({(2, KiB): 1e9}), gemm_table(lambda b, m, n, k: 1e11 * b * m / 256 + n + k, dims=(256, 512, 1024))
    )
    f = {(e.batch, e.m, e.n, e.k): e.flops_per_s for e in t.gemms}
    assert float(t.gemm_time_s(2, 512, 256, 1024, "bf16")) == 2.0 * 2 * 512 * 256 * 1024 / f[2, 512, 256, 1024]
    # beyond the largest m: the FLOP/s of m = 1024
    assert float(t.gemm_time_s(1, 8192, 512, 256, "bf16")) == pytest.approx(
        2 * 8192 * 512 * 256 / f[1, 1024, 512, 256], rel=1e-12
    )
    # below the smallest k: the FLOP/s of k = 256 (XLA's clamp)
    assert float(t.gemm_time_s(1, 512, 512, 13, "bf16")) == pytest.approx(
        2 * 512 * 512 * 13 / f[1, 512, 512, 256], rel=1e-12
    )
    # half way (log2) in m between 256 and 512: geometric mean of the two rates
    m = 256 * math.sqrt(2)
    assert float(t.gemm_time_s(1, m, 256, 256, "bf16")) == pytest.approx(
        2 * m * 256 * 256 / math.sqrt(f[1, 256, 256, 256] * f[1, 512, 256, 256]), rel=1e-12
    )


def test_missing_dtype_is_normalised_to_bytes():
    t = tables(
        coll_table({(2, KiB): 1e9}), gemm_table(lambda b, m, n, k: 1e9 * m + 7e8 * n + 3e8 * k, dims=(256, 512, 1024))
    )
    f = {(e.batch, e.m, e.n, e.k): e.flops_per_s for e in t.gemms}
    # f32 is not tabled: (256, 512, 256) f32 has the bytes of bf16 (512, 1024, 512) and costs its time
    assert float(t.gemm_time_s(1, 256, 512, 256, "f32")) == pytest.approx(
        2 * 512 * 1024 * 512 / f[1, 512, 1024, 512], rel=1e-12
    )
    # int8 (1 byte) in a bf16 table: dimensions halve
    assert float(t.gemm_time_s(2, 1024, 512, 1024, "int8")) == pytest.approx(
        2 * 2 * 512 * 256 * 512 / f[2, 512, 256, 512], rel=1e-12
    )
    # a tabled dtype is used as is
    both = tables(
        coll_table({(2, KiB): 1e9}), t.gemms + gemm_table(lambda *d: 5e12, dtype="f32", dims=(256, 512, 1024))
    )
    assert float(both.gemm_time_s(1, 256, 512, 256, "f32")) == pytest.approx(2 * 256 * 512 * 256 / 5e12)


# -- loading ------------------------------------------------------------------------------


def write_tables(directory, coll: list[dict] | None = None, gemm: list[dict] | None = None, **top):
    os.makedirs(directory, exist_ok=True)
    coll = (
        coll
        if coll is not None
        else [
            {"collective": c, "scheme": "rail-aligned", "devices": d, "bytes": b, "throughput_bytes_per_s": 1e9 * d + b}
            for c in ("all-reduce", "all-to-all")
            for d in (2, 4)
            for b in (KiB, 2 * KiB)
        ]
    )
    gemm = (
        gemm
        if gemm is not None
        else [
            {"dtype": "bf16", "batch": 1, "m": m, "n": n, "k": k, "flops_per_s": 1e12}
            for m in (256, 512)
            for n in (256, 512)
            for k in (256, 512)
        ]
    )
    for name, entries in ((COLLECTIVES_FILE, coll), (GEMM_FILE, gemm)):
        with open(os.path.join(directory, name), "w") as fh:
            json.dump({"format": FORMAT, **top, "entries": entries}, fh)
    return str(directory)


def test_a_written_table_loads_and_round_trips(tmp_path):
    t = load_tables(write_tables(tmp_path / "ok"))
    assert len(t.collectives) == 8 and len(t.gemms) == 8
    t.write(str(tmp_path / "copy"))
    again = load_tables(str(tmp_path / "copy"))
    assert again.collectives == t.collectives and again.gemms == t.gemms


BAD = {
    "entry field missing": (
        dict(coll=[{"collective": "all-reduce", "scheme": "rail-aligned", "devices": 2, "bytes": 1024}]),
        COLLECTIVES_FILE,
        "entries[0]: throughput_bytes_per_s: missing",
    ),
    "negative throughput": (
        dict(
            coll=[
                {
                    "collective": "all-reduce",
                    "scheme": "rail-aligned",
                    "devices": 2,
                    "bytes": 1024,
                    "throughput_bytes_per_s": -1,
                }
            ]
        ),
        COLLECTIVES_FILE,
        "entries[0]: throughput_bytes_per_s: expected a positive number",
    ),
    "unknown collective": (
        dict(
            coll=[
                {
                    "collective": "broadcast",
                    "scheme": "rail-aligned",
                    "devices": 2,
                    "bytes": 1024,
                    "throughput_bytes_per_s": 1e9,
                }
            ]
        ),
        COLLECTIVES_FILE,
        "entries[0]: collective: 'broadcast' is not one of",
    ),
    "unknown field": (
        dict(gemm=[{"dtype": "bf16", "batch": 1, "m": 256, "n": 256, "k": 256, "flops_per_s": 1e12, "runtime_ns": 3}]),
        GEMM_FILE,
        "entries[0]: runtime_ns: unknown field",
    ),
    "fractional device count": (
        dict(
            coll=[
                {
                    "collective": "all-reduce",
                    "scheme": "rail-aligned",
                    "devices": 2.5,
                    "bytes": 1024,
                    "throughput_bytes_per_s": 1e9,
                }
            ]
        ),
        COLLECTIVES_FILE,
        "entries[0]: devices: expected a positive integer",
    ),
    "unknown dtype": (
        dict(gemm=[{"dtype": "f64", "batch": 1, "m": 256, "n": 256, "k": 256, "flops_per_s": 1e12}]),
        GEMM_FILE,
        "entries[0]: dtype: 'f64' is not one of",
    ),
    "duplicate point": (
        dict(
            coll=[
                {
                    "collective": "all-reduce",
                    "scheme": "rail-aligned",
                    "devices": 2,
                    "bytes": 1024,
                    "throughput_bytes_per_s": v,
                }
                for v in (1e9, 2e9)
            ]
        ),
        COLLECTIVES_FILE,
        "all-reduce rail-aligned: two entries for devices=2, bytes=1024",
    ),
    "hole in the grid": (
        dict(
            gemm=[{"dtype": "bf16", "batch": 1, "m": m, "n": 256, "k": 256, "flops_per_s": 1e12} for m in (256, 512)]
            + [{"dtype": "bf16", "batch": 1, "m": 256, "n": 512, "k": 256, "flops_per_s": 1e12}]
        ),
        GEMM_FILE,
        "dtype bf16: no entry for batch=1, m=512, n=512, k=256",
    ),
    "wrong format": (dict(format="xla-pbtxt"), COLLECTIVES_FILE, "format: expected 'scprof-perf-tables/1'"),
    "no entries": (dict(coll=[]), COLLECTIVES_FILE, "entries: expected a non-empty list"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tables_fail_with_one_line_naming_file_and_entry(tmp_path, case):
    kwargs, file, message = BAD[case]
    directory = write_tables(tmp_path / "t", **kwargs)
    with pytest.raises(ConfigError) as exc:
        load_tables(directory)
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith(os.path.join(directory, file)), text
    assert message in text, text


def test_missing_directory_file_and_bad_json(tmp_path):
    with pytest.raises(ConfigError, match="no such directory"):
        load_tables(str(tmp_path / "nowhere"))
    d = write_tables(tmp_path / "t")
    os.remove(os.path.join(d, GEMM_FILE))
    with pytest.raises(ConfigError, match=r"gemm\.json: no such file"):
        load_tables(d)
    with open(os.path.join(d, GEMM_FILE), "w") as fh:
        fh.write("{not json")
    with pytest.raises(ConfigError, match=r"gemm\.json: not valid JSON"):
        load_tables(d)


def test_tables_without_a_needed_collective_are_refused(tmp_path):
    coll = [
        {
            "collective": "all-reduce",
            "scheme": "rail-aligned",
            "devices": 2,
            "bytes": 1024,
            "throughput_bytes_per_s": 1e9,
        }
    ]
    d = write_tables(tmp_path / "t", coll=coll)
    with pytest.raises(ConfigError, match="no all-to-all entries"):
        make_cost_model("tables", V5P, {}, d)


def test_a_scheme_not_tabled_falls_back_to_the_tabled_one():
    t = tables(coll_table({(2, KiB): 1e9, (2, 2 * KiB): 2e9}, scheme="non-rail-aligned"))
    assert float(t.collective_time_s("all-reduce", "rail-aligned", 2 * KiB, 2)) == 2 * KiB / 2e9


# -- bundled tables -----------------------------------------------------------------------


def test_committed_default_tables_are_what_the_generator_writes():
    assert stale_files() == [], "run: python -m sim_backend.perf_tables.generate"


@pytest.mark.parametrize("generation", ["v4", "v5p", "v6e"])
def test_bundled_tables_cover_the_seeds_grid_and_are_monotone(generation):
    t = load_tables(bundled_dir(generation))
    sizes = sorted({e.bytes for e in t.collectives})
    assert sizes[0] == KiB and sizes[-1] == 2 * GiB and len(sizes) == 22
    assert sorted({e.devices for e in t.collectives}) == [2, 4, 8]
    assert {(e.collective, e.scheme) for e in t.collectives} == {
        (c, s)
        for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        for s in ("rail-aligned", "non-rail-aligned")
    }
    assert sorted({e.batch for e in t.gemms}) == [1, 2, 4]
    assert sorted({e.m for e in t.gemms}) == [256, 512, 1024, 2048, 4096]
    for e in t.collectives:  # throughput rises with size, by at most 2x per doubling
        if e.bytes < 2 * GiB:
            (nxt,) = [
                f
                for f in t.collectives
                if (f.collective, f.scheme, f.devices, f.bytes) == (e.collective, e.scheme, e.devices, 2 * e.bytes)
            ]
            assert e.throughput_bytes_per_s <= nxt.throughput_bytes_per_s <= 2 * e.throughput_bytes_per_s


def test_default_tables_are_the_bundled_ones_unless_an_input_changed():
    assert default_tables(V5P, CostConstants()).source == "bundled:v5p"
    changed = default_tables(V5P, CostConstants(tc_efficiency=0.25))
    assert changed.source == "roofline:v5p (tc_efficiency differ from the bundled tables)"
    g = Gemm(1, 1024, 1024, 1024, "bf16")
    full = default_tables(V5P, CostConstants()).gemm_time_s(1, 1024, 1024, 1024, "bf16")
    assert float(changed.gemm_time_s(g.batch, g.m, g.n, g.k, g.dtype)) > float(full)
    faster = resolve_hardware("v5p", 4, {"ici_bandwidth_bytes_per_s": 1200e9})
    assert "ici_bandwidth_bytes_per_s" in default_tables(faster, CostConstants()).source


# -- the table cost model -------------------------------------------------------------------


def test_dense_gemms_add_up_to_the_dense_work(small_raw):
    cfg = config_from_dict(small_raw)
    gemms = dense_gemms(cfg, 128)
    work = dense_work(cfg)
    assert sum(g.flops for g in gemms) == work.forward_flops(128)
    assert sum(h.flops for g in gemms for h in g.gradients()) == work.backward_flops(128)
    # first layer: 128 samples x 13 dense features -> 64
    assert gemms[0] == Gemm(1, 128, 64, 13, "f32")
    assert gemms[0].gradients() == (Gemm(1, 128, 13, 64, "f32"), Gemm(1, 13, 64, 128, "f32"))


def test_tc_time_is_the_sum_of_gemm_times_from_the_table(small_raw, tmp_path):
    raw = copy.deepcopy(small_raw)
    raw["dense"] = {
        "num_dense_features": 256,
        "bottom_mlp": [512, 256],
        "top_mlp": [1024, 256],
        "cross_layers": 1,
        "cross_low_rank": 256,
    }
    cfg = config_from_dict(raw)
    # constant 2e12 FLOP/s everywhere: a pass takes its FLOPs / 2e12
    d = write_tables(
        tmp_path / "t",
        gemm=[
            {"dtype": "f32", "batch": 1, "m": m, "n": n, "k": k, "flops_per_s": 2e12}
            for m in (256, 4096)
            for n in (256, 4096)
            for k in (256, 4096)
        ],
    )
    cost = make_cost_model("tables", V5P, {}, d)
    forward = dense_gemms(cfg, 256)
    backward = [h for g in forward for h in g.gradients()]
    fwd = dense_work(cfg).forward_flops(256)
    c = CostConstants()
    # (a sum of per-GEMM times: equal up to the float rounding of that sum, 1 ps)
    assert cost.tc_pass_ps(forward, 0) == pytest.approx(c.task_overhead_ps + fwd / 2e12 * 1e12, abs=1)
    assert cost.tc_pass_ps(backward, 0) == pytest.approx(c.task_overhead_ps + 2 * fwd / 2e12 * 1e12, abs=1)
    # the HBM floor: more bytes than the GEMMs take time for
    nbytes = V5P.hbm_bandwidth_bytes_per_s  # one second of HBM traffic
    assert cost.tc_pass_ps(forward, nbytes) == c.task_overhead_ps + 10**12
    # and collectives: size / throughput of the table, plus the task overhead
    assert int(cost.collective_ps("all-reduce", np.array([2 * KiB]), 4)[0]) == c.task_overhead_ps + math.ceil(
        2 * KiB / (1e9 * 4 + 2 * KiB) * 1e12
    )


def test_table_model_is_the_default_and_analytic_stays_selectable(small_raw):
    cfg = config_from_dict(small_raw)
    assert cfg.cost_model == "tables"
    sim = simulate(cfg)
    assert isinstance(sim.cost, TableCostModel) and sim.cost.perf_tables_source == "bundled:v5p"
    raw = copy.deepcopy(small_raw)
    raw["cost_model"] = "analytic"
    assert simulate(config_from_dict(raw)).cost.perf_tables_source == ""
    raw["perf_tables"] = "/somewhere"
    with pytest.raises(ConfigError, match="cost_model = 'analytic' reads no tables"):
        simulate(config_from_dict(raw))


# -- DCN S-curve ------------------------------------------------------------------------------


def test_dcn_bandwidth_is_an_s_curve_in_size():
    c = CostConstants()
    n = 4
    sizes = np.geomspace(1, 1e13, 261)
    bw = sizes / dcn_all_reduce_s(sizes, n, c)
    steps = 2 * (n - 1)
    latency = c.dcn_launch_overhead_ps / 1e12 + steps * c.dcn_rtt_ps / 1e12
    top = dcn_bus_bandwidth(n, c)
    assert top == pytest.approx(c.dcn_nic_bytes_per_s * 4 / 6)
    assert np.all(np.diff(bw) > 0)
    # small: latency-bound, bandwidth proportional to size
    assert bw[0] == pytest.approx(1 / latency, rel=1e-4)
    # large: NIC-bound
    assert bw[-1] == pytest.approx(top, rel=1e-3)
    # half of the top at size = latency x top (the logistic's midpoint in log size)
    assert float(1e0 * latency * top / dcn_all_reduce_s(latency * top, n, c)) == pytest.approx(top / 2)
    # slope in log-log: 1 at the small end, 0 at the large end, monotone between (S-shape)
    slope = np.diff(np.log(bw)) / np.diff(np.log(sizes))
    assert slope[0] == pytest.approx(1, abs=1e-3) and slope[-1] == pytest.approx(0, abs=1e-3)
    assert np.all(np.diff(slope) <= 1e-12)


def test_multi_slice_all_reduce_is_hierarchical(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["num_slices"] = 4
    sim = simulate(config_from_dict(raw))
    one = simulate(config_from_dict(small_raw))
    cols, one_cols = sim.graph.columns(), one.graph.columns()
    ar = int(np.asarray(sim.graph.dur_ps)[cols["kind"] == ALLREDUCE][0])
    ar1 = int(np.asarray(one.graph.dur_ps)[one_cols["kind"] == ALLREDUCE][0])
    wire = int(cols["bytes"][cols["kind"] == ALLREDUCE][0])
    n, c, t = 2, sim.cost.c, sim.cost.tables
    # reduce-scatter + all-gather in the slice (each half the ring all-reduce's bytes),
    # plus the DCN all-reduce of each chip's shard B / n (B = wire * n / (2 (n - 1)))
    half = wire / 2
    shard = wire * n / (2 * (n - 1)) / n
    want = (
        c.task_overhead_ps
        + math.ceil(float(t.collective_time_s("reduce-scatter", "rail-aligned", half, n)) * 1e12)
        + math.ceil(float(dcn_all_reduce_s(shard, 4, c)) * 1e12)
        + math.ceil(float(t.collective_time_s("all-gather", "rail-aligned", half, n)) * 1e12)
    )
    assert ar == want and ar > ar1
    assert sim.hw.num_slices == 4
    raw["hardware"]["num_chips"] = 1
    raw["global_batch"] = 128
    with pytest.raises(ConfigError, match="hardware.num_slices"):
        config_from_dict(raw)


# -- end to end: --perf-tables ------------------------------------------------------------------


def all_reduce_durations(trace_path: str) -> np.ndarray:
    tr = read_trace(trace_path)
    ev = tr.data["events"]
    name = np.array(tr.strings, dtype=object)[ev["name"]]
    return ev["dur_ps"][name == "all-reduce.dense_gradients"]


def test_perf_tables_doubling_throughput_shortens_recorded_collectives(tmp_path, capsys):
    fast = load_tables(bundled_dir("v5p"))
    doubled = PerfTables(
        str(tmp_path),
        [
            CollectiveEntry(e.collective, e.scheme, e.devices, e.bytes, 2 * e.throughput_bytes_per_s)
            for e in fast.collectives
        ],
        fast.gemms,
    )
    doubled.write(str(tmp_path / "doubled"))
    config = os.path.join(REPO, "configs", "tuned.toml")
    db = str(tmp_path / "runs.duckdb")
    base = ["record", config, "--steps", "3", "--db", db]
    assert scprof_main([*base, "--name", "bundled", "--out", str(tmp_path / "a")]) == 0
    assert (
        scprof_main(
            [*base, "--name", "doubled", "--out", str(tmp_path / "b"), "--perf-tables", str(tmp_path / "doubled")]
        )
        == 0
    )
    assert "perf tables  " + str(tmp_path / "doubled") in capsys.readouterr().out
    a = all_reduce_durations(str(tmp_path / "a" / "bundled" / "trace.sctrace"))  # --out DIR: DIR/<name>/
    b = all_reduce_durations(str(tmp_path / "b" / "doubled" / "trace.sctrace"))
    assert len(a) == len(b) > 0
    overhead = CostConstants().task_overhead_ps
    # the collective part halves (to the picosecond rounding); the task overhead stays
    assert np.allclose((b - overhead) / (a - overhead), 0.5, rtol=1e-6)
    resolved = {}
    for d, name, src in (("a", "bundled", "bundled:v5p"), ("b", "doubled", str(tmp_path / "doubled"))):
        cfg = json.loads(read_trace(str(tmp_path / d / name / "trace.sctrace")).header.config_json)
        resolved[d] = cfg
        assert cfg["resolved"]["perf_tables"] == src
    assert resolved["a"]["perf_tables"] == "" and resolved["b"]["perf_tables"] == str(tmp_path / "doubled")


def test_bad_perf_tables_exit_2_with_one_line(tmp_path, capsys):
    config = os.path.join(REPO, "configs", "tuned.toml")
    args = ["record", config, "--steps", "1", "--db", str(tmp_path / "x.duckdb"), "--out", str(tmp_path / "o")]
    assert scprof_main([*args, "--perf-tables", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"--perf-tables {tmp_path / 'missing'}: no such directory" in err
    d = write_tables(tmp_path / "t")
    os.remove(os.path.join(d, COLLECTIVES_FILE))
    assert scprof_main([*args, "--perf-tables", d]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and os.path.join(d, COLLECTIVES_FILE) in err


def test_perf_tables_key_is_relative_to_the_config_file(tmp_path):
    d = write_tables(tmp_path / "tables")
    (tmp_path / "run.toml").write_text(
        f'extends = "{os.path.join(REPO, "configs", "tuned.toml")}"\nperf_tables = "tables"\n'
    )
    assert load_config(str(tmp_path / "run.toml")).perf_tables == d

"""Quantization (int8 and range-quantized tables) and the debug checks of the emulator.

References are independent of the code under test: IDs counted in plain Python, byte
sizes worked out by hand, embedding values recomputed with Python integers.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.config import config_from_dict
from sim_backend.debug_checks import run_checks
from sim_backend.emulator import simulate
from sim_backend.errors import ConfigError, NanDetectedError
from sim_backend.generate import generate_step
from sim_backend.memory import EMBEDDING_TABLES
from sim_backend.quantization import quantize, table_key
from sim_backend.recording.record import record_run
from sim_backend.stepgraph import A2A_BWD, A2A_FWD, SC_BWD, SC_FWD

M64 = (1 << 64) - 1


def _cfg(raw: dict, **flags: bool):
    raw["flags"].update(flags)
    return config_from_dict(raw)


def _with_faults(raw: dict, oov: float = 0.0, nan: float = 0.0) -> dict:
    raw["features"][0]["oov_fraction"] = oov  # f_big -> big
    raw["features"][2]["oov_fraction"] = oov  # f_mid2 -> mid (mid is also read by f_mid)
    raw["features"][1]["nan_fraction"] = nan  # f_mid -> mid
    return raw


def _toml(raw: dict, path) -> str:
    """Write a config dict as TOML (only the shapes the small workload uses)."""

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return repr(v)

    lines = [f"{k} = {val(v)}" for k, v in raw.items() if not isinstance(v, (dict, list))]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += [f"[{k}]"] + [f"{kk} = {val(vv)}" for kk, vv in v.items()]
    for k, v in raw.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            for entry in v:
                lines += [f"[[{k}]]"] + [f"{kk} = {val(vv)}" for kk, vv in entry.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _check_rows(trace: str, tmp_path, name: str) -> list[dict]:
    """(step, table, ids, arg key -> value) of every event named `name` in the trace."""
    db = str(tmp_path / f"{name}.duckdb")
    with Store.open(db) as s:
        ingest_trace(s, trace)
        return s.rows(
            "SELECT e.step, tb.value AS tbl, e.ids, a.key, coalesce(a.int_value, a.double_value) AS v "
            "FROM events e JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id "
            "JOIN strings tb ON tb.run_id = e.run_id AND tb.string_id = e.table_id "
            "LEFT JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id "
            "WHERE n.value = ? ORDER BY e.step, tbl, a.key",
            [name],
        )


# -- fault injection and the ID bound check --------------------------------------------------


def test_injected_oov_ids_are_found_exactly_by_the_bound_check(small_raw, tmp_path):
    raw = _with_faults(small_raw, oov=0.05)
    raw["flags"]["xla_sparse_core_enable_id_bound_check"] = True
    cfg = config_from_dict(raw)
    vocab = {t["name"]: t["vocab"] for t in raw["tables"]}
    expected = {}
    for step in range(cfg.steps):
        for f, fb in zip(cfg.features, generate_step(cfg, step), strict=True):
            n = sum(1 for x in fb.ids.tolist() if x >= vocab[f.table] or x < 0)
            expected[step, f.table] = expected.get((step, f.table), 0) + n
    assert expected[0, "big"] > 0 and expected[0, "mid"] > 0 and expected[0, "tiny"] == 0
    total = sum(len(fb.ids) for fb in generate_step(cfg, 0)[:1])
    assert abs(expected[0, "big"] / total - 0.05) < 0.02  # the configured share, roughly
    result = record_run(_toml(raw, tmp_path / "oov.toml"), [], "oov", None, str(tmp_path / "oov"))
    rows = [r for r in _check_rows(result.trace_path, tmp_path, "id_bound_check") if r["key"] == "oov_ids"]
    found = {(r["step"], r["tbl"]): int(r["v"]) for r in rows}
    assert found == expected  # every step and table, zeros included


def test_bound_check_off_reports_nothing_and_oov_ids_are_clamped(small_raw, tmp_path):
    raw = _with_faults(small_raw, oov=0.05)
    cfg = config_from_dict(raw)
    clean, checks = run_checks(cfg, 0, generate_step(cfg, 0))
    vocab = {t.name: t.vocab for t in cfg.tables}
    for f, fb in zip(cfg.features, clean, strict=True):
        assert fb.ids.max() <= vocab[f.table] - 1 and fb.ids.min() >= 0
    raw_ids = generate_step(cfg, 0)[0].ids
    hit = raw_ids >= vocab["big"]
    assert hit.any() and (clean[0].ids[hit] == vocab["big"] - 1).all()  # clamped, as XLA's gather
    result = record_run(_toml(raw, tmp_path / "off.toml"), [], "off", None, str(tmp_path / "off"))
    assert _check_rows(result.trace_path, tmp_path, "id_bound_check") == []


def test_injection_leaves_the_other_ids_unchanged(small_raw):
    plain = generate_step(config_from_dict(small_raw), 1)
    faulty = generate_step(config_from_dict(_with_faults(small_raw, oov=0.2)), 1)
    big = plain[0].ids
    keep = faulty[0].ids < 100_000
    assert (~keep).any() and (faulty[0].ids[keep] == big[keep]).all()
    assert (faulty[0].lengths == plain[0].lengths).all()


# -- NaN checker ---------------------------------------------------------------------------------


def test_nan_checker_counts_nan_samples_and_stops_the_run(small_raw, tmp_path):
    raw = _with_faults(small_raw, nan=0.1)
    raw["flags"]["xla_sc_detect_nan"] = True
    cfg = config_from_dict(raw)
    sim = simulate(cfg)
    for step, sc in enumerate(sim.checks):
        fb = generate_step(cfg, step)[1]  # f_mid
        lengths, mask = fb.lengths.tolist(), fb.nan_samples.tolist()
        n_samples = sum(1 for m in mask if m)
        n_values = sum(n for n, m in zip(lengths, mask, strict=True) if m)
        assert (sc.tables["mid"].nan_samples, sc.tables["mid"].nan_values) == (n_samples, n_values)
        assert sc.tables["big"].nan_values == 0
    assert sim.failure is not None and sim.failure.kind == "nan_detected"
    assert sim.failure.step == 0 and "table 'mid'" in sim.failure.message
    with pytest.raises(NanDetectedError, match="NaN detected"):
        record_run(_toml(raw, tmp_path / "nan.toml"), [], "nan", None, str(tmp_path / "nan"))
    rows = _check_rows(str(tmp_path / "nan" / "trace.sctrace"), tmp_path, "nan_check")
    got = {(r["step"], r["tbl"]): int(r["v"]) for r in rows if r["key"] == "nan_samples"}
    assert got[0, "mid"] == sim.checks[0].tables["mid"].nan_samples > 0 and got[0, "big"] == 0


def test_nan_checker_off_lets_nans_pass_unreported(small_raw, tmp_path):
    raw = _with_faults(small_raw, nan=0.1)
    sim = simulate(config_from_dict(raw))
    assert sim.failure is None
    result = record_run(_toml(raw, tmp_path / "off.toml"), [], "off", None, str(tmp_path / "off"))
    assert _check_rows(result.trace_path, tmp_path, "nan_check") == []


# -- cost of the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["xla_sparse_core_enable_id_bound_check", "xla_sc_detect_nan"])
def test_checks_cost_sparsecore_time_as_the_constants_say(small_raw, flag):
    off = simulate(config_from_dict(small_raw))
    on = simulate(_cfg(small_raw, **{flag: True}))
    c_off, c_on = off.graph.columns(), on.graph.columns()
    assert (c_off["kind"] == c_on["kind"]).all() and (c_off["ids"] == c_on["ids"]).all()
    sc = np.isin(c_off["kind"], (SC_FWD, SC_BWD))
    assert c_on["dur_ps"][sc].sum() > c_off["dur_ps"][sc].sum()
    assert (c_on["dur_ps"][~sc] == c_off["dur_ps"][~sc]).all()
    hw, c = off.hw, off.cost.c
    widths = [g.width for g in off.groups]
    for tid in np.flatnonzero(sc):
        ids, width = int(c_off["ids"][tid]), widths[c_off["group"][tid]]
        backward = c_off["kind"][tid] == SC_BWD
        if flag == "xla_sc_detect_nan":
            cycles = ids * c.sc_nan_check_passes * math.ceil(width / hw.simd_width)
        else:
            cycles = 0 if backward else ids * c.sc_bound_check_cycles_per_id
        extra = math.ceil(cycles / hw.tiles_per_sparsecore / hw.sc_clock_hz * 1e12)
        assert c_on["dur_ps"][tid] - c_off["dur_ps"][tid] == extra


# -- int8 / bf16 footprint and bytes --------------------------------------------------------------


def _dtype(raw: dict, dtype: str) -> dict:
    for t in raw["tables"]:
        t["dtype"] = dtype
        if dtype == "int8":
            t["quantization_config_low"], t["quantization_config_high"] = -1.0, 1.0
    return raw


def test_int8_and_bf16_shrink_the_table_heap_and_sc_bytes(small_raw):
    import copy

    sims = {d: simulate(config_from_dict(_dtype(copy.deepcopy(small_raw), d))) for d in ("f32", "bf16", "int8")}
    # 2 chips x 4 SCs: vocabs padded to multiples of 8 x 8 (100032, 5056, 64); rows padded to 32 B.
    # big+mid (width 32): f32 128 B, bf16 64 B, int8 32 B; tiny (width 16): 64, 32, 16 -> 32 B.
    by_hand = {"f32": 105_088 * 128 + 64 * 64, "bf16": 105_088 * 64 + 64 * 32, "int8": 105_088 * 32 + 64 * 32}
    for d, sim in sims.items():
        assert sim.memory.heap[EMBEDDING_TABLES] == by_hand[d] // 2, d
    fwd = {d: s.graph.columns() for d, s in sims.items()}
    # SC ops move padded table rows (as above; tiny's int8 16 B -> 32 B) and f32 activation /
    # gradient rows (width 32: 128 B, 16: 64 B) whatever the table stores; Adagrad: 1 slot
    row = {"f32": {32: 128, 16: 64}, "bf16": {32: 64, 16: 32}, "int8": {32: 32, 16: 32}}
    for d, c in fwd.items():
        tiny = next(g.index for g in sims[d].groups if g.width == 16)
        for kind in (SC_FWD, SC_BWD):
            m = c["kind"] == kind
            width = np.where(c["group"][m] == tiny, 16, 32)
            table_row, f32_row = np.where(width == 16, row[d][16], row[d][32]), width * 4
            ids, uniq = c["ids"][m], c["unique_ids"][m]
            want = uniq * table_row + ids * f32_row if kind == SC_FWD else ids * f32_row + 2 * uniq * table_row * 2
            assert (c["bytes"][m] == want).all(), (d, kind)
    sc_bytes = {d: c["bytes"][c["kind"] == SC_FWD].sum() for d, c in fwd.items()}
    assert sc_bytes["f32"] > sc_bytes["bf16"] > sc_bytes["int8"] > 0
    # the all-to-alls carry f32 activations and gradients whatever the table stores
    a2a = {d: c["bytes"][np.isin(c["kind"], (A2A_FWD, A2A_BWD))].sum() for d, c in fwd.items()}
    assert a2a["f32"] == a2a["bf16"] == a2a["int8"] > 0


# -- quantization: clipping against a plain-Python reference ------------------------------------


def _splitmix(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _value(key: int, row: int, col: int, width: int) -> float:
    h = _splitmix((_splitmix(row ^ key) + col) & M64)
    s = sum(((h >> (16 * k)) & 0xFFFF) + 0.5 for k in range(4)) / 65536
    return (s - 2) * math.sqrt(3) / math.sqrt(width)


def test_clipped_values_match_a_plain_python_reference(small_raw, tmp_path):
    raw = small_raw
    raw["tables"][1].update(dtype="int8", quantization_config_low=-0.1, quantization_config_high=0.15)
    raw["tables"][2].update(
        quantization_config_low=-0.3, quantization_config_high=0.2, quantization_config_num_buckets=16
    )  # f32, simulated quantization
    cfg = config_from_dict(raw)
    sim = simulate(cfg)
    for step in (0, 2):
        batches = generate_step(cfg, step)
        for name, feats, width, low, high in (("mid", (1, 2), 32, -0.1, 0.15), ("tiny", (3,), 16, -0.3, 0.2)):
            rows = sorted({int(x) for i in feats for x in batches[i].ids.tolist()})
            key = int(table_key(cfg.seed, name))
            vals = [_value(key, r, c, width) for r in rows for c in range(width)]
            clipped = sum(1 for v in vals if v < low or v > high)
            got = sim.checks[step].tables[name].clipping
            assert (got.values, got.clipped) == (len(vals), clipped), (step, name)
            assert 0 < clipped < len(vals)
    assert sim.checks[0].tables["big"].clipping is None
    result = record_run(_toml(raw, tmp_path / "q.toml"), [], "q", None, str(tmp_path / "q"))
    rows = _check_rows(result.trace_path, tmp_path, "quantization")
    got = {(r["step"], r["tbl"]): int(r["v"]) for r in rows if r["key"] == "clipped_values"}
    assert set(got) == {(s, t) for s in range(cfg.steps) for t in ("mid", "tiny")}
    assert got[2, "mid"] == sim.checks[2].tables["mid"].clipping.clipped


def test_values_are_unit_scaled_and_bounded():
    from sim_backend.quantization import VALUE_BOUND, embedding_values

    v = embedding_values(table_key(0, "t"), np.arange(4096), 64) * math.sqrt(64)
    assert abs(v.mean()) < 0.01 and abs(v.std() - 1) < 0.01 and np.abs(v).max() < VALUE_BOUND


def test_quantize_clips_and_rounds_to_the_bucket_grid():
    q = quantize(np.array([-5.0, -1.0, 0.26, 0.3, 1.0, 7.0]), -1.0, 1.0, 5)  # levels every 0.5
    assert q.tolist() == [-1.0, -1.0, 0.5, 0.5, 1.0, 1.0]


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, key",
    [
        ({"dtype": "int8"}, "tables[1].quantization_config_low"),
        ({"quantization_config_high": 0.5}, "tables[1].quantization_config_low"),
        ({"quantization_config_low": -0.5}, "tables[1].quantization_config_high"),
        ({"quantization_config_low": 0.5, "quantization_config_high": 0.5}, "tables[1].quantization_config_high"),
        (
            {
                "dtype": "int8",
                "quantization_config_low": -1.0,
                "quantization_config_high": 1.0,
                "quantization_config_num_buckets": 300,
            },
            "tables[1].quantization_config_num_buckets",
        ),
        ({"quantization_config_num_buckets": 1}, "tables[1].quantization_config_num_buckets"),
        (
            {"quantization_config_low": float("-inf"), "quantization_config_high": 1.0},
            "tables[1].quantization_config_low",
        ),
        ({"dtype": "int4"}, "tables[1].dtype"),
    ],
)
def test_quantization_errors_name_the_key(small_raw, change, key):
    small_raw["tables"][1].update(change)
    with pytest.raises(ConfigError, match=re_key(key)):
        config_from_dict(small_raw)


@pytest.mark.parametrize("field", ["oov_fraction", "nan_fraction"])
def test_fault_fractions_are_shares(small_raw, field):
    small_raw["features"][0][field] = 1.5
    with pytest.raises(ConfigError, match=re_key(f"features[0].{field}")):
        config_from_dict(small_raw)


def re_key(key: str) -> str:
    import re

    return "^" + re.escape(key) + ":"


def test_default_config_needs_no_checks(small_raw):
    cfg = config_from_dict(small_raw)
    batches = generate_step(cfg, 0)
    out, checks = run_checks(cfg, 0, batches)
    assert checks is None and out is batches and all(fb.nan_samples is None for fb in batches)
    assert dataclasses.asdict(cfg.flags)["xla_sc_detect_nan"] is False

"""Memory model: HBM stack formulas, serialization, heap counters, SPMEM, failures, hbm_pressure.

Hand-computed figures use the small workload (2 chips x 4 SparseCores = 8 logical
replicas, default limits 4096 / 4096, width 32 and 16 tables).
"""

from __future__ import annotations

import copy
import os
import re

import numpy as np
import pytest

from profiler.reader import read_trace
from scprof.cli import main
from sim_backend.config import config_from_dict
from sim_backend.config_load import load_config
from sim_backend.emulator import simulate
from sim_backend.errors import CompileError, HbmOomError, RunFailure
from sim_backend.memory import HEAP_CONTRIBUTORS, fmt_size, stack_bytes_per_sc
from sim_backend.metrics import step_time_ps
from sim_backend.recording.record import record_run
from sim_backend.stepgraph import SC_BWD, SC_FWD
from tests.sim_backend.conftest import CONFIG_DIR
from tests.sim_backend.test_sim_pathologies import documented_fix
from tests.sim_backend.test_sim_record import small_file

SPC, REPLICAS = 4, 8  # SparseCores per chip, logical_replica_count of the small workload
MIB = 1 << 20


def unstacked(raw: dict, serialized: int = 0, pipelining: bool = False) -> dict:
    """Three table groups: big (width 32), mid (width 32), tiny (width 16)."""
    raw = copy.deepcopy(raw)
    raw["sparsecore"]["disable_table_stacking"] = True
    raw["flags"]["xla_sc_num_serialized_tables_to_optimize_hbm"] = serialized
    raw["flags"]["tf_xla_disable_full_embedding_pipelining"] = not pipelining
    return raw


# backward stack per chip: 3 * width * max_unique (4096) * replicas (8) * 4 B * 4 SCs
BWD_W32 = 3 * 32 * 4096 * 8 * 4 * 4  # 50,331,648
BWD_W16 = 3 * 16 * 4096 * 8 * 4 * 4  # 25,165,824
FWD_W32 = (2 * 32 + 1) * 4096 * 8 * 4 * 4  # 34,078,720


def test_stack_formulas_by_hand():
    # forward (2*128 + 1) * 1000 * 16 * 4 ; backward 3*128 * 1000 * 16 * 4
    assert stack_bytes_per_sc(128, 1000, 16) == (16_448_000, 24_576_000)
    assert stack_bytes_per_sc(1, 1, 1, element_bytes=2) == (6, 6)
    assert (BWD_W32, BWD_W16, FWD_W32) == (50_331_648, 25_165_824, 34_078_720)


def test_static_stack_sizes_use_the_compiled_limits_and_all_sparsecores(small_raw):
    sim = simulate(config_from_dict(unstacked(small_raw)))
    mem = sim.memory
    assert mem.logical_replica_count == REPLICAS and mem.sparsecores_per_chip == SPC
    assert [mem.stack_per_chip(g, backward=True) for g in range(3)] == [BWD_W32, BWD_W32, BWD_W16]
    assert mem.stack_per_chip(0, backward=False) == FWD_W32


@pytest.mark.parametrize(
    "k, peak",
    [
        (0, 2 * BWD_W32 + BWD_W16),  # all groups at once
        (1, BWD_W32 + BWD_W16),  # big alone, then mid + tiny
        (2, BWD_W32),
        (3, BWD_W32),
    ],
)  # one group at a time
def test_peak_stack_by_hand_for_each_serialization(small_raw, k, peak):
    sim = simulate(config_from_dict(unstacked(small_raw, serialized=k)))
    for cm in sim.timeline:  # pipelining off: forward and backward never overlap
        assert cm.stack_bytes.max() == peak
        assert cm.stack_bytes[-1] == 0 and cm.stack_bytes.min() == 0


def sc_span_per_step(sim) -> float:
    """Mean time from a step's first SparseCore op to its last (forward and backward)."""
    c, s = sim.graph.columns(), sim.schedule
    spans = []
    for kind in (SC_FWD, SC_BWD):
        for step in range(sim.cfg.steps):
            m = (c["kind"] == kind) & (c["step"] == step)
            spans.append(s.end_ps[m].max() - s.start_ps[m].min())
    return float(np.sum(spans)) / sim.cfg.steps


def test_serialization_lowers_the_peak_stack_and_lengthens_sparsecore_time(small_raw):
    sims = [simulate(config_from_dict(unstacked(small_raw, serialized=k, pipelining=True))) for k in (0, 1, 2)]
    peaks = [max(cm.stack_bytes.max() for cm in sim.timeline) for sim in sims]
    sc_time = [sc_span_per_step(sim) for sim in sims]
    assert peaks[0] > peaks[1] > peaks[2]
    assert sc_time[0] < sc_time[1] < sc_time[2]
    # pipelining on: the SparseCore phases hide under the TensorCore here, so the step barely
    # moves (never faster beyond a list-scheduling ripple; the exposed cost is checked with
    # pipelining off in test_sim_serialization.py)
    assert step_time_ps(sims[2]) >= step_time_ps(sims[0]) * (1 - 1e-4)


def counters_by_line(trace) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    ct = trace.data["counters"]
    out = {}
    for t in trace.tracks:
        m = ct["track"] == t.id
        if m.any():
            o = np.argsort(ct["ts_ps"][m], kind="stable")
            out[t.plane, t.line] = (ct["ts_ps"][m][o], ct["value"][m][o])
    return out


def held(series: tuple[np.ndarray, np.ndarray], times: np.ndarray) -> np.ndarray:
    ts, v = series
    i = np.searchsorted(ts, times, side="right") - 1
    return np.where(i >= 0, v[np.maximum(i, 0)], 0.0)


def test_heap_is_the_sum_of_its_contributors_at_all_times(small_raw, tmp_path):
    r = record_run(small_file(tmp_path, small_raw), [], "mem", None, str(tmp_path / "out"))
    tr = read_trace(r.trace_path)
    series = counters_by_line(tr)
    for chip in range(2):
        plane = f"/device:TPU:{chip}"
        parts = [series[plane, f"HBM heap: {k}"] for k in HEAP_CONTRIBUTORS]
        times = np.unique(np.concatenate([series[plane, "HBM heap"][0]] + [p[0] for p in parts]))
        total = held(series[plane, "HBM heap"], times)
        assert np.array_equal(total, np.sum([held(p, times) for p in parts], axis=0))
        prefetched = held(series[plane, "HBM heap: prefetched inputs"], times)
        assert prefetched.max() > 0 and prefetched[-1] == 0  # inputs come and go
        stack = series[plane, "HBM stack"][1]
        assert stack.max() > 0 and stack[0] == 0 and stack[-1] == 0
        for k in range(SPC):  # SPMEM is sized statically: one constant sample per SparseCore
            ts, v = series[f"{plane} SparseCore {k}", "SPMEM per tile"]
            assert list(ts) == [0] and 0 < v[0] <= tr.header.hardware.spmem_bytes_per_tile
    units = {t.line: t.unit for t in tr.tracks if t.line.startswith(("HBM", "SPMEM"))}
    assert set(units.values()) == {"bytes"}


def test_prefetch_depth_holds_more_inputs_in_the_heap(small_raw):
    peaks = []
    for depth in (1, 3):
        raw = copy.deepcopy(small_raw)
        raw["flags"]["maximum_parallel_iterations"] = depth
        raw["steps"] = 6
        sim = simulate(config_from_dict(raw))
        cm = sim.timeline[0]
        assert cm.prefetched_steps.max() <= depth
        peaks.append(cm.prefetched_bytes.max())
    assert peaks[1] > peaks[0]


# -- failures -----------------------------------------------------------------------------------


def one_table(raw: dict, **sparsecore) -> dict:
    raw = copy.deepcopy(raw)
    raw["tables"] = [{"name": "t", "vocab": 50_000, "width": 32}]
    raw["features"] = [{"name": "f", "table": "t", "multi_hot": 4}]
    raw["sparsecore"].update(sparsecore)
    return raw


def failure_event(path: str) -> dict:
    tr = read_trace(path)
    ev = tr.data["events"]
    s = tr.strings
    (i,) = np.flatnonzero(np.array([s[c] for c in ev["category"]]) == "failure")
    track = next(t for t in tr.tracks if t.id == ev["track"][i])
    args = {
        s[k]: (s[v] if kind == 3 else iv)
        for e, k, kind, v, iv in zip(
            ev["arg_event"], ev["arg_key"], ev["arg_kind"], ev["arg_string"], ev["arg_int"], strict=True
        )
        if e == i
    }
    return {
        "name": s[ev["name"][i]],
        "plane": track.plane,
        "line": track.line,
        "start_ps": int(ev["start_ps"][i]),
        "dur_ps": int(ev["dur_ps"][i]),
        "bytes": int(ev["bytes"][i]),
        "tags": dict(tr.header.tags),
        **args,
    }


SPMEM_MESSAGE = (
    "Fixed size allocations (150504 bytes) do not fit in TileSpmem (131072 bytes): table group "
    "'t' is compiled with max_ids_per_partition=200000 and max_unique_ids_per_partition=1000, "
    "buffered over 16 tiles per SparseCore; lower the limits (limits file or "
    "sparsecore.max_ids_per_partition / max_unique_ids_per_partition)"
)


def test_spmem_overflow_fails_to_compile_with_the_doc_message(small_raw, tmp_path):
    # per tile: ceil(200000 / 16) * 12 B + ceil(1000 / 16) * 8 B = 150000 + 504
    raw = one_table(small_raw, max_ids_per_partition=200_000, max_unique_ids_per_partition=1000)
    path = small_file(tmp_path, raw)
    with pytest.raises(CompileError) as err:
        record_run(path, [], "spmem", None, str(tmp_path / "out"))
    e = err.value
    assert e.message == SPMEM_MESSAGE
    assert re.match(r"Fixed size allocations \(.+\) do not fit in TileSpmem \(.+\)", e.message)
    assert isinstance(e, RunFailure) and isinstance(e, ValueError) and "\n" not in str(e)
    assert str(e) == f"{path}: {SPMEM_MESSAGE} (the failed run is recorded in {e.trace_path})"
    ev = failure_event(e.trace_path)
    assert ev == {
        "name": "spmem_overflow",
        "plane": "/host:CPU",
        "line": "Failures",
        "start_ps": 0,
        "dur_ps": 0,
        "bytes": 150504,
        "message": SPMEM_MESSAGE,
        "chip": -1,
        "capacity_bytes": 131072,
        "tags": {
            "workload": "small",
            "source": "emulator",
            "status": "failed",
            "failure": "spmem_overflow",
            "error": SPMEM_MESSAGE,
        },
    }
    tr = read_trace(e.trace_path)
    assert len(tr.data["events"]["track"]) == 1 and not len(tr.data["steps"].get("step", []))
    lines = {t.line for t in tr.tracks if t.kind}
    assert {"HBM heap", "SPMEM per tile"} <= lines  # the static memory is still shown


GATHER_MESSAGE = (
    "Gather operand too large: table group 't' stages (sample_count 16384 * feature_width 32) / "
    "kNumTiles 16 = 32768 elements (131072 bytes) per tile, but only 125952 of TileSpmem's "
    "131072 bytes are left after the fixed size allocations; use a smaller global_batch or more "
    "chips (hardware.num_chips)"
)


def test_gather_operand_too_large_with_the_doc_message(small_raw, tmp_path):
    # (16384 samples per SparseCore * 32) / 16 tiles = 32768 f32 = 131072 B; fixed 5120 B
    raw = one_table(small_raw)
    raw["global_batch"] = 8 * 16384
    with pytest.raises(CompileError) as err:
        record_run(small_file(tmp_path, raw), [], "gather", None, str(tmp_path / "out"))
    assert err.value.message == GATHER_MESSAGE
    assert err.value.message.startswith("Gather operand too large")
    assert failure_event(err.value.trace_path)["name"] == "gather_operand_too_large"
    # the doc's fix: more chips (fewer samples per SparseCore)
    raw["hardware"]["num_chips"] = 4
    assert simulate(config_from_dict(raw)).failure is None


def test_record_command_exits_2_with_one_line(small_raw, tmp_path, capsys):
    raw = one_table(small_raw, max_ids_per_partition=200_000, max_unique_ids_per_partition=1000)
    path = small_file(tmp_path, raw)
    rc = main(["record", path, "--out", str(tmp_path / "out"), "--db", str(tmp_path / "db.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"scprof: error: {path}: {SPMEM_MESSAGE}")
    assert os.path.exists(tmp_path / "out" / "small" / "trace.sctrace")  # --out DIR: DIR/<name>/


OOM = re.compile(
    r"Ran out of memory in memory space hbm on TPU:(\d+) at [\d.]+ us \(step (\d+)\)\. "
    r"Used ([\d.]+[GMKB]) of ([\d.]+[GMKB]) hbm\. Exceeded hbm capacity by ([\d.]+[GMKB])\. "
    r"Contributors: (.+); (.+)$"
)


def test_hbm_stack_oom_names_its_contributors_and_serialization_fixes_it(small_raw, tmp_path):
    raw = unstacked(small_raw)
    heap = simulate(config_from_dict(raw)).memory.heap_static
    # room for one or two groups' backward stacks, not three: 100 MiB + heap + 1 MiB of inputs
    raw["hardware"]["hbm_bytes"] = heap + 100 * MIB + MIB
    with pytest.raises(HbmOomError) as err:
        record_run(small_file(tmp_path, raw), [], "oom", None, str(tmp_path / "oom"))
    msg = err.value.message
    m = OOM.match(msg)
    assert m, msg
    contributors = dict(re.match(r"(.+) ([\d.]+[GMKB])$", p).groups() for p in m.group(6).split(", "))
    assert list(contributors)[0] == "HBM stack"  # largest first
    assert {
        "embedding tables",
        "embedding optimizer state",
        "dense weights",
        "dense optimizer state",
        "prefetched inputs",
    } <= set(contributors)
    assert "xla_sc_num_serialized_tables_to_optimize_hbm" in m.group(7)
    ev = failure_event(err.value.trace_path)
    assert ev["name"] == "hbm_oom" and ev["message"] == msg and ev["line"] == "Failures"
    assert ev["capacity_bytes"] == raw["hardware"]["hbm_bytes"] and ev["bytes"] > ev["capacity_bytes"]
    assert fmt_size(ev["bytes"] - ev["capacity_bytes"]) == m.group(5)
    assert fmt_size(ev["bytes"]) == m.group(3) and fmt_size(ev["capacity_bytes"]) == m.group(4)
    # the trace holds the whole run's memory: heap + stack first pass capacity at the event
    series = counters_by_line(read_trace(err.value.trace_path))
    plane = f"/device:TPU:{ev['chip']}"
    times = np.unique(np.concatenate([series[plane, n][0] for n in ("HBM heap", "HBM stack")]))
    total = held(series[plane, "HBM heap"], times) + held(series[plane, "HBM stack"], times)
    first = int(np.flatnonzero(total > ev["capacity_bytes"])[0])
    assert times[first] == ev["start_ps"] and total[first] == ev["bytes"]
    raw["flags"]["xla_sc_num_serialized_tables_to_optimize_hbm"] = 2
    ok = record_run(small_file(tmp_path, raw), [], "serialized", None, str(tmp_path / "ok"))
    assert ok.steps == small_raw["steps"]


def test_heap_oom_before_step_0(small_raw):
    raw = copy.deepcopy(small_raw)
    raw["hardware"]["hbm_bytes"] = MIB
    sim = simulate(config_from_dict(raw))
    f = sim.failure
    assert f.kind == "hbm_oom" and f.ts_ps == 0 and f.step is None
    assert "before step 0" in f.message and "shrink the dense part" in f.message


# -- the bundled configs ------------------------------------------------------------------------


def hbm_peak_share(name: str, overrides: list[str] = ()) -> float:
    import dataclasses

    sim = simulate(dataclasses.replace(load_config(os.path.join(CONFIG_DIR, f"{name}.toml"), list(overrides)), steps=4))
    assert sim.failure is None
    return max((cm.heap_bytes + cm.stack_bytes).max() for cm in sim.timeline) / sim.hw.hbm_bytes


def test_hbm_pressure_config_and_its_one_flag_fix():
    assert hbm_peak_share("hbm_pressure") > 0.85
    assert hbm_peak_share("hbm_pressure", documented_fix("hbm_pressure")) < 0.85


@pytest.mark.parametrize("name", ["baseline", "tuned"])
def test_baseline_and_tuned_stay_below_the_memory_threshold(name):
    assert hbm_peak_share(name) < 0.85

"""Streaming record (stream.py): the same schedule and trace as the whole-run path, a
readable truncated trace when it stops part-way, bounded state, safe folder names."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

from profiler.reader import TraceReader, read_trace
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.config import config_from_dict
from sim_backend.emulator import prepare, run_step_inputs, simulate
from sim_backend.errors import ConfigError, PreprocessError, RecordInterrupted
from sim_backend.recording import stream
from sim_backend.recording.instrument import SC_BWD_MODULE, SC_FWD_MODULE, TC_MODULE, write_trace
from sim_backend.recording.record import PARTIAL_FILE, TRACE_FILE, dir_name, record_run
from sim_backend.scheduler import OnlineScheduler
from sim_backend.stepgraph import GraphBuilder
from tests.sim_backend.test_sim_record import small_file

# (name, changes to the small workload): pipelining on/off, prefetch depth 1 and 3,
# one host thread, table initialisation on the host link, serialized table groups
VARIANTS = {
    "default": {},
    "pipelining_off": {"flags": {"tf_xla_disable_full_embedding_pipelining": True}},
    "depth_1": {"flags": {"maximum_parallel_iterations": 1}},
    "depth_3_init": {"flags": {"maximum_parallel_iterations": 3}, "include_initialization": True},
    "one_thread": {"host": {"num_threads": 1}},
    "serialized": {"flags": {"xla_sc_num_serialized_tables_to_optimize_hbm": 1}, "include_initialization": True},
}


def variant(small_raw: dict, name: str, steps: int = 7) -> dict:
    raw = copy.deepcopy(small_raw)
    raw["steps"] = steps
    raw["sparsecore"]["max_ids_per_partition"] = 32  # minibatching: 4-6 SC tasks per step (big_mid: ~55 IDs)
    for key, value in VARIANTS[name].items():
        if isinstance(value, dict):
            raw.setdefault(key, {}).update(value)
        else:
            raw[key] = value
    return raw


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_online_scheduler_gives_the_batch_schedule(small_raw, name):
    """Steps admitted one at a time as the scheduler asks: every task starts and ends when,
    and on the unit where, the batch scheduler puts it on the whole graph."""
    sim = simulate(config_from_dict(variant(small_raw, name)))
    builder = GraphBuilder(sim.cfg, sim.hw, sim.groups, sim.cost, sim.dense)
    sched = OnlineScheduler(builder.res.units(), builder.lookahead_steps, builder.free_steps)
    sched.admit(builder.graph.drain())
    for sr in sim.steps:
        builder.add_step(sr)
        sched.admit(builder.graph.drain())
        sched.run(sr.step)
    sched.run(None)
    sched.check_done()
    task, start, end, unit = (np.array(c) for c in zip(*sched.started, strict=True))
    assert sorted(task.tolist()) == list(range(len(sim.graph)))
    o = np.argsort(task)
    s = sim.schedule
    assert (start[o] == s.start_ps).all() and (end[o] == s.end_ps).all() and (unit[o] == s.unit).all()


def test_online_scheduler_refuses_steps_admitted_too_late(small_raw):
    """A step admitted after a decision it should have taken part in: an error, not a wrong schedule."""
    sim = simulate(config_from_dict(variant(small_raw, "default", steps=4)))
    builder = GraphBuilder(sim.cfg, sim.hw, sim.groups, sim.cost, sim.dense)
    sched = OnlineScheduler(builder.res.units(), builder.lookahead_steps, builder.free_steps)
    sched.admit(builder.graph.drain())
    builder.add_step(sim.steps[0])
    sched.admit(builder.graph.drain())
    sched.run(10**9)  # pretend no later step matters: runs step 0 alone
    builder.add_step(sim.steps[1])  # its host tasks were ready at time 0
    with pytest.raises(RuntimeError, match="too late"):
        sched.admit(builder.graph.drain())


def canonical(path: str) -> dict[str, list]:
    """A trace's data as sorted rows, string and track ids resolved (chunking, file order
    and interning order aside, two equal runs give equal dicts)."""
    tr = read_trace(path)
    strings = np.array(tr.strings, dtype=object)
    tracks = {t.id: (t.plane, t.line) for t in tr.tracks}
    out = {}
    for kind, cols in tr.data.items():
        names = sorted(k for k in cols if not k.startswith("arg_"))
        args: dict[int, list] = {}
        for j, e in enumerate(cols.get("arg_event", np.zeros(0, np.int64)).tolist()):
            key, string = strings[cols["arg_key"][j]], strings[cols["arg_string"][j]]
            args.setdefault(e, []).append((key, int(cols["arg_int"][j]), float(cols["arg_double"][j]), string))
        rows = []
        for i in range(len(cols[names[0]]) if names else 0):
            row = []
            for k in names:
                v = cols[k][i].item()
                if k == "track":
                    v = tracks[v]
                elif k in ("name", "table", "category"):
                    v = strings[v]
                row.append(v)
            rows.append((*row, tuple(sorted(args.get(i, [])))))
        out[kind] = sorted(rows, key=repr)
    return out


@pytest.mark.parametrize("name", ["default", "depth_3_init", "serialized"])
def test_streamed_trace_equals_the_whole_run_trace(small_raw, tmp_path, monkeypatch, name):
    """Recorded in windows of one task and flushed every 2 steps, the trace holds what the
    whole simulation written at once holds."""
    monkeypatch.setattr(stream, "WINDOW_TASKS", 1)
    monkeypatch.setattr(stream, "FLUSH_STEPS", 2)
    raw = variant(small_raw, name)
    res = record_run(small_file(tmp_path, raw), [], "s", None, str(tmp_path / "out"))
    whole = str(tmp_path / "whole.sctrace")
    write_trace(simulate(config_from_dict(raw)), whole, "s", "s", {}, {}, "test")
    assert canonical(res.trace_path) == canonical(whole)
    assert not os.path.exists(tmp_path / "out" / PARTIAL_FILE)


def ops_in_time_order(path: str) -> list[tuple]:
    """Op events (track, name, start, dur, step) in the order the file holds them."""
    tr = read_trace(path, allow_truncated=True)
    ev = tr.data["events"]
    lines = {t.id: t.line for t in tr.tracks}
    ops = [i for i, t in enumerate(ev["track"].tolist()) if lines[t] in ("XLA Ops", "Sparse Core Ops", "ICI")]
    return [tuple(int(ev[k][i]) for k in ("track", "name", "start_ps", "dur_ps", "step")) for i in ops]


class Stop(Exception):
    pass


def stop_after(step: int, error: type[BaseException] = Stop):
    def progress(done: int, total: int) -> None:
        if done == step:
            raise error(f"stopped after step {step}")

    return progress


def test_an_error_after_step_k_leaves_a_readable_truncated_trace(small_raw, tmp_path, monkeypatch):
    """An internal error part-way: no trace.sctrace, but the partial file holds the steps
    written so far (time order: exactly the first ops of the whole run) and ingests as a
    truncated run."""
    monkeypatch.setattr(stream, "FLUSH_STEPS", 3)
    path = small_file(tmp_path, variant(small_raw, "default", steps=40))
    out = tmp_path / "out"
    with pytest.raises(Stop):
        record_run(path, [], "cut", None, str(out), progress=stop_after(12))
    assert not (out / TRACE_FILE).exists()
    partial = str(out / PARTIAL_FILE)
    full = record_run(path, [], "full", None, str(tmp_path / "full"))
    cut_ops, full_ops = ops_in_time_order(partial), ops_in_time_order(full.trace_path)
    assert 0 < len(cut_ops) < len(full_ops)
    assert cut_ops == full_ops[: len(cut_ops)]
    assert max(op[4] for op in cut_ops) >= 9  # the steps before the stop were written
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        got = ingest_trace(store, partial, allow_truncated=True)
        assert got.status == "truncated" and got.events > 0
        steps = [r["step"] for r in store.rows("SELECT DISTINCT step FROM sc_partition_stats ORDER BY step")]
        assert steps == list(range(len(steps))) and len(steps) >= 12


def test_interrupt_keeps_the_partial_trace_and_names_it(small_raw, tmp_path):
    path = small_file(tmp_path, variant(small_raw, "default", steps=20))
    with pytest.raises(RecordInterrupted) as stop:
        record_run(path, [], "ctrl-c", None, str(tmp_path / "o"), progress=stop_after(5, KeyboardInterrupt))
    assert stop.value.partial_path == str(tmp_path / "o" / PARTIAL_FILE)
    assert read_trace(stop.value.partial_path, allow_truncated=True).header.run_name == "ctrl-c"


def test_a_user_error_part_way_leaves_nothing_behind(small_raw, tmp_path):
    """Limits exceeded with nothing allowed to give: no trace, no partial, no folder."""
    path = small_file(tmp_path, variant(small_raw, "default", steps=4))
    out = tmp_path / "new"
    limits = ["sparsecore.max_ids_per_partition=1", "sparsecore.enable_minibatching=false"]
    with pytest.raises(PreprocessError):
        record_run(path, limits, None, None, str(out))
    assert not out.exists()


def test_simulated_time_past_2_62_ps_is_a_user_error(small_raw, tmp_path, monkeypatch):
    """Rates too low for 100,000 steps would wrap int64 ps: refused in one line, nothing left
    (the bound lowered to 1 us here, which the small run's first steps pass)."""
    monkeypatch.setattr(stream, "MAX_SIM_TIME_PS", 10**6)
    path = small_file(tmp_path, variant(small_raw, "default", steps=4))
    out = tmp_path / "new"
    with pytest.raises(ConfigError, match=r"passes 2\^62 ps") as e:
        record_run(path, [], None, None, str(out))
    assert "\n" not in str(e.value)
    assert not out.exists()


def test_a_second_partial_does_not_overwrite_the_first(small_raw, tmp_path):
    path = small_file(tmp_path, variant(small_raw, "default", steps=10))
    out = tmp_path / "o"
    firsts = []
    for _ in range(2):
        with pytest.raises(RecordInterrupted) as stop:
            record_run(path, [], "x", None, str(out), progress=stop_after(3, KeyboardInterrupt))
        firsts.append(stop.value.partial_path)
    assert firsts == [str(out / PARTIAL_FILE), str(out / "trace-2.sctrace.partial")]


def test_held_state_does_not_grow_with_steps(small_raw, tmp_path, monkeypatch):
    """What the streamed run holds (scheduler tasks and events, task columns, pending memory
    changes) peaks no higher over steps 60-90 than over steps 20-50."""
    sizes = {}
    runs = []
    real_init = stream._Stream.__init__

    def init(self, *args, **kw):
        real_init(self, *args, **kw)
        runs.append(self)

    def progress(done: int, total: int) -> None:
        s = runs[-1]
        pending = sum(len(p[0]) for chip in s.timeline._pending for p in chip)
        sizes[done] = np.array([len(s.sched._task), len(s.sched._event), len(s.tasks.cols["task"]), pending])

    monkeypatch.setattr(stream._Stream, "__init__", init)
    monkeypatch.setattr(stream, "FLUSH_STEPS", 10)
    raw = variant(small_raw, "default", steps=91)
    # one minibatch every step: the minibatch count (4-6 at the variants' limit) varies with
    # each step's IDs, and with it what a window of steps holds
    raw["sparsecore"]["max_ids_per_partition"] = 4096
    path = small_file(tmp_path, raw)
    record_run(path, [], "m", None, str(tmp_path / "o"), progress=progress)
    early = np.max([sizes[d] for d in range(20, 51)], axis=0)
    late = np.max([sizes[d] for d in range(60, 91)], axis=0)
    assert (late <= early).all(), (early, late)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("baseline", "baseline"),
        ("v1.2_x-y", "v1.2_x-y"),
        ("../../../../tmp/x", None),
        ("..", None),
        (".", None),
        ("", None),
        ("a/b", None),
        ("a\\b", None),
        ("line\nbreak\x1b[31m", None),
        ("x" * 300, None),
    ],
)
def test_folder_names_are_one_safe_component(name, expected):
    got = dir_name(name)
    if expected is not None:
        assert got == expected
    assert got not in ("", ".", "..") and len(got) <= 100
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in got)
    assert os.path.dirname(os.path.join("runs", got)) == "runs"


def test_distinct_names_get_distinct_folders():
    assert dir_name("a/b") != dir_name("a_b") != dir_name("a?b") != dir_name("a/b/")


def test_run_inputs_helper_matches_simulate(small_raw):
    """stream.py and simulate() share the per-step host side."""
    cfg = config_from_dict(variant(small_raw, "default", steps=2))
    sim = simulate(cfg)
    sr, _ = run_step_inputs(prepare(cfg), 1)
    assert sr.dropped_ids == sim.steps[1].dropped_ids
    assert (sr.raw_ids_per_sc == sim.steps[1].raw_ids_per_sc).all()


def test_modules_get_chunks_of_their_own(small_raw, tmp_path):
    """Modules never share an events chunk with ops: they would carry the ops' typed
    columns as nulls (about 60 bytes a module, 13% of a baseline trace)."""
    res = record_run(small_file(tmp_path, variant(small_raw, "default", steps=12)), [], "m", None, str(tmp_path / "o"))
    reader = TraceReader(res.trace_path)
    modules = 0
    for batch in reader.batches():
        if batch.kind == "events":
            names = {reader.strings[i] for i in np.unique(batch.columns["name"]).tolist()}
            if names & {TC_MODULE, SC_FWD_MODULE, SC_BWD_MODULE}:
                assert names <= {TC_MODULE, SC_FWD_MODULE, SC_BWD_MODULE} and "ids" not in batch.columns
                modules += batch.rows
    assert modules > 0

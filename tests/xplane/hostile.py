"""Hand-built hostile XSpace captures: one valid TPU-like capture (synth.tpu_space) with one
value made wrong, built with the official generated classes.

`CASES` maps a case name to (class, builder, needles): the builder writes the input under a
directory and returns the paths to give `scprof ingest`; `needles` are substrings the one
error line must hold (the file, and the plane/line/event/field where the value sits). Shared
by tests/xplane/test_xplane_hostile.py and benchmarks/fuzz_decoders.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from profiler.xspace import xplane_pb2 as xp
from tests.xplane.synth import T0_NS, tpu_space

I64_MAX, U64_MAX = (1 << 63) - 1, (1 << 64) - 1
TC, SC0, HOST = "/device:TPU:0", "/device:TPU:0 SparseCore 0", "/host:CPU"


def _plane(space: xp.XSpace, name: str) -> xp.XPlane:
    return next(p for p in space.planes if p.name == name)


def _line(space: xp.XSpace, plane: str, line: str) -> xp.XLine:
    return next(ln for ln in _plane(space, plane).lines if ln.name == line)


def _stat_id(plane: xp.XPlane, name: str) -> int:
    """The stat metadata id of `name` in `plane` (added when missing)."""
    for k, v in plane.stat_metadata.items():
        if v.name == name:
            return k
    i = max(plane.stat_metadata, default=0) + 1
    plane.stat_metadata[i].id, plane.stat_metadata[i].name = i, name
    return i


def _set_event_stat(space, plane: str, line: str, index: int, name: str, **value) -> None:
    """Set stat `name` of event `index` of a line (replacing it when present) to e.g. uint64_value=..."""
    p = _plane(space, plane)
    sid = _stat_id(p, name)
    ev = _line(space, plane, line).events[index]
    for st in ev.stats:
        if st.metadata_id == sid:
            ev.stats.remove(st)
            break
    ev.stats.add(metadata_id=sid, **value)


def _plane_stat(space, plane: str, name: str, **value) -> None:
    p = _plane(space, plane)
    sid = _stat_id(p, name)
    for st in p.stats:
        if st.metadata_id == sid:
            p.stats.remove(st)
            break
    p.stats.add(metadata_id=sid, **value)


def _scprof_facts(space, **facts) -> None:
    """A `/host:scprof` plane holding run facts, as scprof's exporter writes them."""
    p = space.planes.add(id=999, name="/host:scprof")
    for name, value in facts.items():
        sid = _stat_id(p, name)
        kw = {"str_value": value} if isinstance(value, str) else value
        p.stats.add(metadata_id=sid, **kw)


def _write(d: Path, space: xp.XSpace, name: str = "hostile.xplane.pb") -> list[str]:
    path = d / name
    path.write_bytes(space.SerializeToString())
    return [str(path)]


def _mutated(edit: Callable[[xp.XSpace], object]) -> Callable[[Path], list[str]]:
    def build(d: Path) -> list[str]:
        space = tpu_space(steps=2)
        edit(space)
        return _write(d, space)

    return build


def _event(space, plane, line, index=0) -> xp.XEvent:
    return _line(space, plane, line).events[index]


def _late_line(space) -> None:
    """A second line whose origin is near 2^62 ns: its events lie ~4.6e27 ps after the first."""
    _line(space, TC, "XLA Ops").timestamp_ns = 1 << 62


def _step_name(name: str):
    def edit(space) -> None:
        p = _plane(space, TC)
        ev = _event(space, TC, "Steps", 1)
        mid = max(p.event_metadata) + 1
        p.event_metadata[mid].id, p.event_metadata[mid].name = mid, name
        ev.metadata_id = mid
        for st in list(ev.stats):  # no group_id: the step number comes from the name
            ev.stats.remove(st)

    return edit


def _many_lines(space) -> None:
    """100,001 lines of one event each: a 2.6 MB file whose import took hours (quadratic in lines)."""
    p = _plane(space, HOST)
    for i in range(100_001):
        line = p.lines.add(id=100 + i, name=f"thread {i}", timestamp_ns=T0_NS)
        line.events.add(metadata_id=1, offset_ps=i, duration_ps=1)


def _self_appended(d: Path) -> list[str]:
    data = tpu_space(steps=2).SerializeToString()
    path = d / "twice.xplane.pb"
    path.write_bytes(data + data)
    return [str(path)]


def _same_file_twice(d: Path) -> list[str]:
    (path,) = _write(d, tpu_space(steps=2))
    return [path, os.path.join(os.path.dirname(path), ".", os.path.basename(path))]


def _fifo(d: Path) -> list[str]:
    path = d / "pipe.xplane.pb"
    os.mkfifo(path)
    return [str(path)]


def _fifo_trace(d: Path) -> list[str]:
    path = d / "pipe.sctrace"
    os.mkfifo(path)
    return [str(path)]


def _fifo_in_run_dir(d: Path) -> list[str]:
    run = d / "run1"
    run.mkdir()
    _write(run, tpu_space(steps=2), "a.xplane.pb")
    os.mkfifo(run / "b.xplane.pb")
    return [str(run)]


def _link_loop_in_run_dir(d: Path) -> list[str]:
    run = d / "run1"
    run.mkdir()
    _write(run, tpu_space(steps=2), "a.xplane.pb")
    os.symlink(run / "b.xplane.pb", run / "b.xplane.pb")  # a link to itself
    return [str(run)]


def _device(d: Path) -> list[str]:
    path = d / "zero.xplane.pb"
    os.symlink("/dev/zero", path)
    return [str(path)]


def _dir_as_file(d: Path) -> list[str]:
    run = d / "run1"
    run.mkdir()
    _write(run, tpu_space(steps=2), "a.xplane.pb")
    (run / "b.xplane.pb").mkdir()
    return [str(run / "b.xplane.pb")]


def _ev_set(plane, line, index=0, **fields):
    def edit(space) -> None:
        ev = _event(space, plane, line, index)
        for k, v in fields.items():
            setattr(ev, k, v)

    return edit


def _stat(plane, line, index, name, **value):
    return lambda space: _set_event_stat(space, plane, line, index, name, **value)


def _meta_stat(plane, event_name, name, **value):
    def edit(space) -> None:
        p = _plane(space, plane)
        md = next(m for m in p.event_metadata.values() if m.name == event_name)
        md.stats.add(metadata_id=_stat_id(p, name), **value)

    return edit


def _rename_plane(old, new):
    return lambda space: setattr(_plane(space, old), "name", new)


def _many_big_ids(space) -> None:
    """Two SparseCore events of one step and core whose `ids` are each within int64 but whose sum is not."""
    for i in range(2):
        _set_event_stat(space, SC0, "Sparse Core Ops", i, "ids", int64_value=1 << 62)
        _set_event_stat(space, SC0, "Sparse Core Ops", i, "group_id", int64_value=0)
        _set_event_stat(space, SC0, "Sparse Core Ops", i, "sc", int64_value=0)


def _short_events_sum(space) -> None:
    """33,000 events shorter than one timeline bin, in one bin, whose durations sum past int64."""
    p = _plane(space, HOST)
    line = p.lines.add(id=8, name="busy", timestamp_ns=T0_NS)
    mid = max(p.event_metadata) + 1
    p.event_metadata[mid].id, p.event_metadata[mid].name = mid, "tick"
    line.events.add(metadata_id=mid, offset_ps=(1 << 62) - 2, duration_ps=1)  # the run spans ~2^62 ps
    for i in range(33_000):
        line.events.add(metadata_id=mid, offset_ps=i, duration_ps=(1 << 48) - 1)


F = "hostile.xplane.pb"
OPS, SC_OPS = "XLA Ops", "Sparse Core Ops"
# name -> (class in the issue, builder, needles of the one error line)
CASES: dict[str, tuple[str, Callable[[Path], list[str]], tuple[str, ...]]] = {
    # timestamps
    "line_ts_2^62": ("timestamps", _mutated(_late_line), (F, TC, OPS, "timestamp")),
    "line_ts_-2^63": (
        "timestamps",
        _mutated(lambda s: setattr(_line(s, TC, OPS), "timestamp_ns", -(1 << 63))),
        (F, TC, OPS, "timestamp"),
    ),
    "offset_2^63-1": (
        "timestamps",
        _mutated(_ev_set(TC, OPS, 3, offset_ps=I64_MAX)),
        (F, TC, OPS, "event 3", "offset_ps"),
    ),
    "offset_negative": (
        "timestamps",
        _mutated(_ev_set(TC, OPS, 2, offset_ps=-1)),
        (F, TC, OPS, "event 2", "offset_ps"),
    ),
    # durations
    "dur_2^63-1": (
        "durations",
        _mutated(_ev_set(TC, OPS, 1, duration_ps=I64_MAX)),
        (F, TC, OPS, "event 1", "duration_ps"),
    ),
    "dur_2^62_at_end": (
        "durations",
        _mutated(_ev_set(TC, OPS, 7, duration_ps=1 << 62)),
        (F, TC, OPS, "event 7", "duration_ps"),
    ),
    "dur_negative": (
        "durations",
        _mutated(_ev_set(TC, OPS, 5, duration_ps=-5)),
        (F, TC, OPS, "event 5", "duration_ps"),
    ),
    "dur_sum_overflow": ("durations", _mutated(_short_events_sum), (F, "duration_ps", "sum")),
    # ids / counts
    "ids_2^64-1": (
        "ids/counts",
        _mutated(_stat(SC0, SC_OPS, 1, "ids", uint64_value=U64_MAX)),
        (F, SC0, SC_OPS, "event 1", "ids"),
    ),
    "bytes_2^63": (
        "ids/counts",
        _mutated(_stat(SC0, SC_OPS, 0, "bytes_accessed", uint64_value=1 << 63)),
        (F, SC0, SC_OPS, "event 0", "bytes_accessed"),
    ),
    "flops_meta_2^64-1": (
        "ids/counts",
        _mutated(_meta_stat(TC, "fusion.2", "flops", uint64_value=U64_MAX)),
        (F, TC, "fusion.2", "flops"),
    ),
    "ids_negative": (
        "ids/counts",
        _mutated(_stat(SC0, SC_OPS, 0, "unique_ids", int64_value=-7)),
        (F, SC0, "event 0", "unique_ids"),
    ),
    "ids_sum_overflow": ("ids/counts", _mutated(_many_big_ids), (F, "ids", "sum")),
    "arg_uint64_2^64-1": ("ids/counts", _mutated(_stat(SC0, SC_OPS, 0, "fingerprint", uint64_value=U64_MAX)), ()),
    # int32 columns
    "group_id_2^40": (
        "group/SC/chip ids",
        _mutated(_stat(TC, OPS, 2, "group_id", int64_value=1 << 40)),
        (F, TC, OPS, "event 2", "group_id"),
    ),
    "group_id_-2^40": (
        "group/SC/chip ids",
        _mutated(_stat(TC, OPS, 2, "group_id", int64_value=-(1 << 40))),
        (F, TC, OPS, "group_id"),
    ),
    "sc_stat_2^40": (
        "group/SC/chip ids",
        _mutated(_stat(SC0, SC_OPS, 0, "sc", int64_value=1 << 40)),
        (F, SC0, "event 0", "sc"),
    ),
    "minibatch_uint64": (
        "group/SC/chip ids",
        _mutated(_stat(SC0, SC_OPS, 0, "minibatch", uint64_value=U64_MAX)),
        (F, SC0, "minibatch"),
    ),
    "chip_id_2^40": ("group/SC/chip ids", _mutated(_rename_plane(TC, f"/device:TPU:{1 << 40}")), (F, "chip")),
    "sc_id_2^40": (
        "group/SC/chip ids",
        _mutated(_rename_plane(SC0, f"/device:TPU:0 SparseCore {1 << 40}")),
        (F, "SparseCore"),
    ),
    "gpu_id_2^70": (
        "group/SC/chip ids",
        _mutated(_rename_plane("/custom:widget", f"/device:GPU:{1 << 70}")),
        (F, "chip"),
    ),
    # JSON facts of the /host:scprof plane
    "facts_bad_json": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, hardware_json="{")),
        (F, "/host:scprof", "hardware_json"),
    ),
    "facts_json_list": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, hardware_json="[1, 2]")),
        (F, "hardware_json", "object"),
    ),
    "facts_num_chips_str": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, hardware_json='{"num_chips": "eight"}')),
        (F, "hardware_json", "num_chips"),
    ),
    "facts_hbm_2^70": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, hardware_json=f'{{"hbm_bytes": {1 << 70}}}')),
        (F, "hardware_json", "hbm_bytes"),
    ),
    "facts_config_bad": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, config_json="not json")),
        (F, "config_json"),
    ),
    "facts_tags_list": ("JSON facts", _mutated(lambda s: _scprof_facts(s, tags_json="[]")), (F, "tags_json")),
    "facts_start_str": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, start_time_unix_ns="yesterday")),
        (F, "start_time_unix_ns"),
    ),
    "facts_start_uint64": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, start_time_unix_ns={"uint64_value": U64_MAX})),
        (F, "start_time_unix_ns"),
    ),
    "facts_start_1e30": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, start_time_unix_ns={"double_value": 1e30})),
        (F, "start_time_unix_ns"),
    ),
    "facts_run_name_int": (
        "JSON facts",
        _mutated(lambda s: _scprof_facts(s, run_name={"int64_value": 5})),
        (F, "run_name"),
    ),
    # wrongly typed stats
    "plane_tflops_str": (
        "typed stats",
        _mutated(lambda s: _plane_stat(s, TC, "peak_teraflops_per_second", str_value="fast")),
        (F, TC, "peak_teraflops_per_second"),
    ),
    "plane_hbm_bw_inf": (
        "typed stats",
        _mutated(lambda s: _plane_stat(s, TC, "peak_hbm_bw_gigabytes_per_second", double_value=float("inf"))),
        (F, TC, "peak_hbm_bw_gigabytes_per_second"),
    ),
    "plane_memory_size_str": (
        "typed stats",
        _mutated(lambda s: _plane_stat(s, TC, "memory_size", str_value="16G")),
        (F, TC, "memory_size"),
    ),
    "plane_memory_size_2^64-1": (
        "typed stats",
        _mutated(lambda s: _plane_stat(s, TC, "memory_size", uint64_value=U64_MAX)),
        (F, TC, "memory_size"),
    ),
    "memory_stat_str": (
        "typed stats",
        _mutated(_stat(HOST, "python", 1, "bytes_allocated", str_value="lots")),
        (F, HOST, "python", "event 1", "bytes_allocated"),
    ),
    "group_id_double": ("typed stats", _mutated(_stat(TC, OPS, 0, "group_id", double_value=1.5)), ()),
    "group_id_str": ("typed stats", _mutated(_stat(TC, OPS, 0, "group_id", str_value="one")), ()),
    # step names (Steps-line events without a group_id are numbered by their names)
    "step_name_superscript": ("step names", _mutated(_step_name("²")), ()),
    "step_name_2^70": ("step names", _mutated(_step_name(str(1 << 70))), (F, TC, "Steps", "step number")),
    "step_name_5000_digits": ("step names", _mutated(_step_name("9" * 5000)), (F, TC, "Steps", "step number")),
    "lines_100001": ("lines (time)", _mutated(_many_lines), (F, "100,00", "lines hold events", "at most 100,000")),
    # repeated input
    "self_appended": ("self-appended capture", _self_appended, ("twice.xplane.pb", "twice")),
    # (two files of one run with the same bytes are two hosts, as XProf reads them: test_xplane_import.py)
    "same_file_twice": ("self-appended capture", _same_file_twice, (F, "twice")),
    # special files
    "fifo": ("special files", _fifo, ("pipe.xplane.pb", "not a regular file")),
    "fifo_sctrace": ("special files", _fifo_trace, ("pipe.sctrace", "not a regular file")),
    "fifo_in_run_dir": ("special files", _fifo_in_run_dir, ("b.xplane.pb", "not a regular file")),
    "link_loop_in_run_dir": ("special files", _link_loop_in_run_dir, ("b.xplane.pb", "cannot read")),
    "dev_zero": ("special files", _device, ("zero.xplane.pb", "not a regular file")),
    "dir_as_file": ("special files", _dir_as_file, ("b.xplane.pb",)),
}

# Cases that import (a value kept faithfully rather than refused), with what the store must hold.
IMPORTS = {"arg_uint64_2^64-1", "step_name_superscript", "group_id_double", "group_id_str"}

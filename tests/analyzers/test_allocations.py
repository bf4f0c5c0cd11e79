"""The allocations analyzer (analyzers/rules/allocations.py, analysis.memory.allocators): per
allocator the peak of bytes_allocated, the allocation count and the allocations live at the peak.

Checked against independent references: the TF2 GPU capture's allocator events read straight from
its .xplane.pb files with the generated protobuf classes and replayed in plain Python (peak,
counts, and the live set at the peak from an address -> size map); a hand-made capture whose
figures are computed by hand (an address freed and reused, a free of an allocation made before the
capture, allocations never freed, a tie at the peak, an allocator of a GPU without a plane); and
runs without allocator events (emulated, CPU captures) that give no figures.
"""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from analyzers.registry import analyze_run
from profiler.store import Store
from profiler.xspace import xplane_pb2 as xp
from scprof.cli import main
from tests.xplane.helpers import DATA, JAX_SMALL, read_space
from tests.xplane.synth import PlaneBuilder

TF2 = os.path.join(DATA, "wild", "tf2_gpu_multi_worker")
TF2_FILES = os.path.join(TF2, "plugins", "profile", "GPU-multi-worker")
MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")


def _ingest(tmp_path, target: str, name: str) -> str:
    db = str(tmp_path / f"{name}.duckdb")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", target, "--db", db, "--name", name]) == 0
    return db


def _figures(db: str) -> tuple[dict, list[str]]:
    with Store.open(db, read_only=True) as store:
        a = analyze_run(store, 1, only=("allocations",)).analyses["allocations"]
    return a.figures, a.notes


def _stat(st: xp.XStat, names: dict[int, str]):
    """One XStat's value as the protobuf holds it (a ref names another stat metadata)."""
    kind = st.WhichOneof("value")
    return names.get(st.ref_value) if kind == "ref_value" else getattr(st, kind) if kind else None


def raw_allocators(path: str) -> dict[str, dict]:
    """Per allocator of one host's XSpace file, replayed in (time, file order): max
    bytes_allocated, the earliest event at it, the allocation count and the allocations live
    then (address -> allocation_bytes; a free drops its address)."""
    events: dict[str, list] = {}
    order = 0
    for plane in read_space(path).planes:
        if plane.name != "/host:CPU":
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        meta_names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                order += 1
                name = meta_names.get(ev.metadata_id)
                if name not in MEMORY_EVENTS:
                    continue
                stats = {stat_names.get(s.metadata_id): _stat(s, stat_names) for s in ev.stats}
                if not stats.get("allocator_name"):
                    continue
                ts = line.timestamp_ns * 1000 + ev.offset_ps
                events.setdefault(stats["allocator_name"], []).append((ts, order, name, stats))
    out = {}
    for alloc, evs in events.items():
        evs.sort(key=lambda e: (e[0], e[1]))
        peak = max(e[3]["bytes_allocated"] for e in evs)
        at = next(i for i, e in enumerate(evs) if e[3]["bytes_allocated"] == peak)
        live: dict[int, int] = {}
        for _, _, name, stats in evs[: at + 1]:
            if name == "MemoryAllocation":
                live[stats["addr"]] = stats["allocation_bytes"]
            else:
                live.pop(stats["addr"], None)
        out[alloc] = {
            "peak_bytes": peak,
            "allocations": sum(e[2] == "MemoryAllocation" for e in evs),
            "deallocations": sum(e[2] == "MemoryDeallocation" for e in evs),
            "fragmentation": evs[at][3].get("fragmentation"),
            "live": live,
        }
    return out


@pytest.fixture(scope="module")
def tf2_figures(tmp_path_factory):
    return _figures(_ingest(tmp_path_factory.mktemp("tf2"), TF2, "tf2"))[0]


def test_tf2_peaks_and_counts_match_the_raw_capture(tf2_figures):
    got = {(a["host"], a["allocator"]): a for a in tf2_figures["allocators"]}
    hosts = sorted(f for f in os.listdir(TF2_FILES) if f.endswith(".xplane.pb"))
    assert len(hosts) == 2
    want_keys = set()
    for f in hosts:
        host = f.removesuffix(".xplane.pb")
        raw = raw_allocators(os.path.join(TF2_FILES, f))
        assert set(raw) == {"GPU_1_bfc", "GPU_4_bfc", "GPU_6_bfc", "gpu_host_bfc"}
        assert raw["GPU_4_bfc"]["allocations"] + raw["GPU_4_bfc"]["deallocations"] == 969
        for alloc, r in raw.items():
            want_keys.add((host, alloc))
            a = got[(host, alloc)]
            assert a["peak_bytes"] == r["peak_bytes"], (host, alloc)
            assert a["allocations"] == r["allocations"], (host, alloc)
            assert a["deallocations"] == r["deallocations"], (host, alloc)
            assert a["fragmentation_at_peak_ratio"] == pytest.approx(r["fragmentation"]), (host, alloc)
            assert a["live_at_peak"] == len(r["live"]), (host, alloc)
            assert a["live_at_peak_bytes"] == sum(r["live"].values()), (host, alloc)
            largest = sorted(r["live"].values(), reverse=True)[: len(a["largest_live"])]
            assert [x["bytes"] for x in a["largest_live"]] == largest, (host, alloc)
    assert set(got) == want_keys
    assert tf2_figures["device_peak_bytes"] == max(
        a["peak_bytes"] for a in got.values() if a["allocator"].startswith("GPU_")
    )


def test_tf2_allocators_map_to_their_gpu_chips(tf2_figures):
    for a in tf2_figures["allocators"]:
        if a["allocator"] == "gpu_host_bfc":
            assert (a["device_kind"], a["chip"]) == ("host", -1)
        else:
            n = int(a["allocator"].split("_")[1])
            # chips are numbered over both hosts' 8 GPUs in file order: 179 first
            assert a["device_index"] == n and a["chip"] == n + (8 if a["host"].startswith("34.83.195.180") else 0)


def hand_made_space() -> xp.XSpace:
    """GPU_0_bfc held 1000 B before the capture (64 B of it at 0xA0); its events, one per ns:

        t  event           addr  bytes  bytes_allocated
        1  free            A0    64     936   (allocated before the capture)
        2  alloc           A1    100    1036
        3  alloc           A2    300    1336
        4  free            A1    100    1236
        5  alloc (reuse)   A1    50     1286
        6  alloc           A3    200    1486  <- the peak, fragmentation 0.25
        7  free            A2    300    1186
        8  alloc           A4    250    1436
        9  alloc           A5    50     1486  (the peak again: the earlier one counts)

    Live at the peak: A2 300, A3 200, A1 50 (the second allocation) = 550 B; 936 B held since
    before the capture. GPU_3_bfc has no /device:GPU:3 plane; gpu_host_bfc serves the host;
    mystery_bfc names no device."""
    space = xp.XSpace(hostnames=["gpu-host"])
    gpu = PlaneBuilder(space, 1, "/device:GPU:0")
    gpu.event(gpu.line(1, "Stream #1"), "kernel", 0, 5000)
    host = PlaneBuilder(space, 2, "/host:CPU")
    th = host.line(1, "tf_gpu_private_0")
    rows = [
        ("MemoryDeallocation", 0xA0, 64, 936),
        ("MemoryAllocation", 0xA1, 100, 1036),
        ("MemoryAllocation", 0xA2, 300, 1336),
        ("MemoryDeallocation", 0xA1, 100, 1236),
        ("MemoryAllocation", 0xA1, 50, 1286),
        ("MemoryAllocation", 0xA3, 200, 1486),
        ("MemoryDeallocation", 0xA2, 300, 1186),
        ("MemoryAllocation", 0xA4, 250, 1436),
        ("MemoryAllocation", 0xA5, 50, 1486),
    ]
    for i, (name, addr, size, allocated) in enumerate(rows, start=1):
        host.event(
            th,
            name,
            i * 1000,
            0,
            allocator_name="GPU_0_bfc",
            addr=addr,
            allocation_bytes=size,
            requested_bytes=size - 1,
            bytes_allocated=allocated,
            peak_bytes_in_use=2000,
            fragmentation=0.25 if i == 6 else 0.5,
            tf_op=f"op_{addr:x}_{i}",
            region_type="output",
            data_type=19,
        )
    for i, allocator in enumerate(("GPU_3_bfc", "gpu_host_bfc", "mystery_bfc")):
        host.event(
            th,
            "MemoryAllocation",
            20_000 + i,
            0,
            allocator_name=allocator,
            addr=1,
            allocation_bytes=8,
            bytes_allocated=8,
            fragmentation=0.0,
        )
    return space


def test_live_at_peak_pairs_allocations_and_frees_by_address(tmp_path):
    path = tmp_path / "hand.xplane.pb"
    path.write_bytes(hand_made_space().SerializeToString())
    figures, _ = _figures(_ingest(tmp_path, str(path), "hand"))
    by = {a["allocator"]: a for a in figures["allocators"]}
    a = by["GPU_0_bfc"]
    assert (a["device_kind"], a["device_index"], a["chip"]) == ("device", 0, 0)
    assert a["peak_bytes"] == 1486 and a["peak_ts_ps"] - a["first_ts_ps"] == 5000  # the 6th event, not the 9th
    assert (a["allocations"], a["deallocations"], a["events"]) == (6, 3, 9)
    assert a["peak_in_use_bytes"] == 2000
    assert a["fragmentation_at_peak_ratio"] == 0.25
    assert (a["live_at_peak"], a["live_at_peak_bytes"], a["unattributed_at_peak_bytes"]) == (3, 550, 936)
    assert [(x["bytes"], x["tf_op"]) for x in a["largest_live"]] == [
        (300, "op_a2_3"),
        (200, "op_a3_6"),
        (50, "op_a1_5"),
    ]
    assert a["largest_live"][0] == {
        "bytes": 300,
        "requested_bytes": 299,
        "tf_op": "op_a2_3",
        "region_type": "output",
        "data_type": "19",
        "shape": None,
        "allocated_ts_ps": a["first_ts_ps"] + 2000,
    }
    assert (by["GPU_3_bfc"]["device_kind"], by["GPU_3_bfc"]["chip"]) == ("device", None)
    assert (by["gpu_host_bfc"]["device_kind"], by["gpu_host_bfc"]["chip"]) == ("host", -1)
    assert (by["mystery_bfc"]["device_kind"], by["mystery_bfc"]["chip"]) == ("unknown", None)
    assert by["mystery_bfc"]["live_at_peak"] == 1 and by["mystery_bfc"]["unattributed_at_peak_bytes"] == 0
    assert figures["device_peak_bytes"] == 1486


def test_runs_without_allocator_events_have_no_figures(tmp_path, store_path):
    figures, notes = _figures(str(store_path))  # an emulated run: HBM counters, no allocators, nothing lacking
    assert figures == {} and notes == []
    figures, notes = _figures(_ingest(tmp_path, JAX_SMALL, "cpu"))  # a JAX CPU capture
    assert figures == {} and any("no allocator events" in n for n in notes)

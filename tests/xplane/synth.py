"""A small TPU-like XSpace with SparseCore planes, built with the generated classes."""

from __future__ import annotations

from profiler.xspace import xplane_pb2 as xp

T0_NS = 1_700_000_000_000_000_000  # a real-looking epoch origin: ns * 1000 would overflow int64 ps


class PlaneBuilder:
    def __init__(self, space: xp.XSpace, pid: int, name: str):
        self.p = space.planes.add(id=pid, name=name)
        self.stats: dict[str, int] = {}
        self.events: dict[str, int] = {}

    def stat(self, name: str) -> int:
        if name not in self.stats:
            i = self.stats[name] = len(self.stats) + 1
            self.p.stat_metadata[i].id, self.p.stat_metadata[i].name = i, name
        return self.stats[name]

    def meta(self, name: str, **stats) -> int:
        if name not in self.events:
            i = self.events[name] = len(self.events) + 1
            md = self.p.event_metadata[i]
            md.id, md.name = i, name
            for k, v in stats.items():
                self.set(md.stats.add(), k, v)
        return self.events[name]

    def set(self, st: xp.XStat, name: str, value) -> None:
        st.metadata_id = self.stat(name)
        if isinstance(value, float):
            st.double_value = value
        elif isinstance(value, int):
            st.int64_value = value
        elif isinstance(value, tuple):  # ("ref", "string") -> interned through stat metadata
            st.ref_value = self.stat(value[1])
        else:
            st.str_value = value

    def line(self, lid: int, name: str, ts_ns: int = T0_NS) -> xp.XLine:
        return self.p.lines.add(id=lid, name=name, timestamp_ns=ts_ns)

    def event(self, line: xp.XLine, name: str, offset_ps: int, dur_ps: int, meta_stats=None, **stats) -> None:
        ev = line.events.add(metadata_id=self.meta(name, **(meta_stats or {})), offset_ps=offset_ps, duration_ps=dur_ps)
        for k, v in stats.items():
            self.set(ev.stats.add(), k, v)


def tpu_space(steps: int = 3) -> xp.XSpace:
    """2 steps of 1 ms per step: TensorCore Steps/XLA Ops, 2 SparseCores, host memory, an unknown plane."""
    space = xp.XSpace(hostnames=["tpu-host-0"])
    tc = PlaneBuilder(space, 0, "/device:TPU:0")
    tc.p.stats.add(metadata_id=tc.stat("device_type_string"), str_value="TPU v5p")
    tc.p.stats.add(metadata_id=tc.stat("peak_teraflops_per_second"), double_value=459.0)
    tc.p.stats.add(metadata_id=tc.stat("peak_hbm_bw_gigabytes_per_second"), double_value=2765.0)
    st_line, ops = tc.line(1, "Steps"), tc.line(2, "XLA Ops", T0_NS + 1)  # second line 1 ns later
    step_ps = 1_000_000_000
    for s in range(steps):
        tc.event(st_line, str(s), s * step_ps, step_ps - 1000, group_id=s)
        for k in range(4):
            tc.event(
                ops,
                f"fusion.{k}",
                s * step_ps + k * 100_000_000,
                50_000_000,
                meta_stats={"hlo_category": "convolution", "flops": 1000 * (k + 1), "bytes_accessed": 64},
                group_id=s,
            )
    for core in range(2):
        sc = PlaneBuilder(space, 100 + core, f"/device:TPU:0 SparseCore {core}")
        sc_ops = sc.line(1, "Sparse Core Ops")
        for s in range(steps):
            sc.event(
                sc_ops,
                "SparseDenseMatmulOp",
                s * step_ps + 500_000,
                30_000_000,
                group_id=s,
                table=("ref", f"table_{core}"),
                ids=800 + s,
                unique_ids=600,
                dropped_ids=2,
                bytes_accessed=4096,
                custom_note="hot",
            )
    host = PlaneBuilder(space, 200, "/host:CPU")
    th = host.line(7, "python")
    for i in range(3):
        host.event(
            th,
            "MemoryAllocation",
            i * 1_000_000,
            0,
            allocator_name="hbm",
            bytes_allocated=1 << (20 + i),
            peak_bytes_in_use=1 << 23,
        )
    other = PlaneBuilder(space, 300, "/custom:widget")
    other.p.stats.add(metadata_id=other.stat("widget_rev"), int64_value=7)
    wl = other.line(1, "Widget Line")
    other.event(wl, "blink", 10, 5, brightness=0.5, mood="calm")
    return space

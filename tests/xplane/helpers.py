"""Shared helpers of the XProf interop tests: paths of the committed captures, and
independent counts of what an XSpace file holds (walking the official classes)."""

from __future__ import annotations

import os

from profiler.xspace import xplane_pb2 as xp

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
JAX_RUN_DIR = os.path.join(DATA, "jax_cpu_train", "plugins", "profile", "run1")
JAX_LOGDIR = os.path.join(DATA, "jax_cpu_train")
JAX_SMALL = os.path.join(DATA, "jax_cpu_small.xplane.pb")


def read_space(path: str) -> xp.XSpace:
    with open(path, "rb") as f:
        return xp.XSpace.FromString(f.read())


def count_space(space: xp.XSpace) -> dict:
    """Planes with lines, events per (plane, line), and the distinct step_num / group_id values."""
    lines: dict[tuple[str, str], int] = {}
    steps: set[int] = set()
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            if line.events:
                lines[(plane.name, line.name)] = lines.get((plane.name, line.name), 0) + len(line.events)
            for ev in line.events:
                for st in ev.stats:
                    if names.get(st.metadata_id) in ("step_num", "group_id"):
                        steps.add(st.int64_value or st.uint64_value)
    planes = {p for p, _ in lines}
    return {"planes": planes, "lines": lines, "events": sum(lines.values()), "steps": steps}

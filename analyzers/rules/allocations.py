"""Device memory from the allocators' own events: XProf's memory profile on a real capture.

A GPU capture made by TensorFlow records, on the host plane, a MemoryAllocation or
MemoryDeallocation event for every allocation its allocators (GPU_<n>_bfc for GPU n,
gpu_host_bfc for pinned host memory) make, each carrying the allocator's state after it:
bytes_allocated, peak_bytes_in_use, fragmentation, and the allocation's size, address,
op and region. Per allocator this analysis gives the peak of bytes_allocated and its time,
the allocator's own peak in use, the allocations and deallocations, fragmentation at the
peak, and the allocations live at the peak (paired with their frees by address), the
largest first: what held the memory when it was fullest. One query
(analysis.memory.allocators) computes it all; emulated runs, whose HBM is counters
(the memory analyzer), and captures without allocator events get no figures (a note
says what is missing unless the run has HBM counters).
"""

from __future__ import annotations

from typing import Any

from analyzers.context import RunContext
from analyzers.findings import Analysis

NAME = "allocations"
QUESTION = "How much device memory does each allocator hold at its peak, and which allocations hold it?"
TOP = 10  # largest live allocations kept per allocator


def analyze(ctx: RunContext) -> Analysis:
    table = ctx.sql("analysis.memory.allocators", top=TOP)
    result = Analysis(NAME, tables={"allocators": table})
    rows = table.to_pylist()
    if not rows:
        # a run whose memory is HBM counters (an emulated run: the memory analyzer's) lacks nothing here
        if not any(r["hbm_peak_bytes"] is not None for r in ctx.sql("analysis.memory.memory_peaks").to_pylist()):
            result.notes.append("the run records no allocator events (MemoryAllocation / MemoryDeallocation)")
        return result
    device = [r["peak_bytes"] for r in rows if r["device_kind"] == "device" and r["peak_bytes"] is not None]
    result.figures = {
        "allocators": rows,
        "device_peak_bytes": max(device) if device else None,
    }
    return result


def allocator_rows(analysis: Any) -> list[dict[str, Any]]:
    """The allocations analyzer's allocators (figures `allocations.allocators`), device ones first
    by peak, then the host's, then those of an unknown device; [] for a run without allocator events."""
    rows = list(((analysis.figures if analysis is not None else {}) or {}).get("allocators") or [])
    kinds = ("device", "host")
    return sorted(
        rows,
        key=lambda a: (
            kinds.index(a["device_kind"]) if a["device_kind"] in kinds else 2,
            -(a["peak_bytes"] or 0),
            a["allocator"],
        ),
    )

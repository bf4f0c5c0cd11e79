"""The analyzers' figures as the Overview shows them: each labelled with what it is, its unit
and its scope, read at its path in the report's figures (what `scprof analyze --json` prints), so
a card can never say another thing than the analyzers; the step-time split's bars; a failed
run's facts. No Dash here: testable on a report alone."""

from __future__ import annotations

from typing import Any

from analyzers.registry import RunReport
from profiler.units import evidence_label, unit_of
from ui.data import ALLOCATOR_PEAK_DETAIL, Kpi

# The analyzers' figures the Overview names: dotted path under `scprof analyze --json`'s
# "figures" -> (label, scope). A scope's "{covers}" is the breakdown's counted steps. Figures not
# named here are listed under their analysis and key.
FIGURE_TEXT: dict[str, tuple[str, str]] = {
    "breakdown.share.idle": ("idle: nothing running", "share of wall time, {covers}, all chips"),
    "idle_gaps.tensorcore.host.share": (
        "TensorCores waiting for host input",
        "share of TensorCore time, {covers}, all chips (the host_bound finding's figure)",
    ),
    "idle_gaps.device.host_input_wait_share": (
        "device awaiting host input",
        "share of device step time, {covers}, all chips: idle until input work it waited for ended "
        "(the host_bound finding's figure; input prepared ahead is not counted)",
    ),
    "overlap.overlap_share_of_sc": (
        "SparseCore time overlapped by TensorCore work",
        "share of SparseCore busy time, all chips",
    ),
    "overlap.tc_idle_share_waiting_for_input": (
        "TensorCore gaps caused by host input",
        "share of the TensorCores' idle-gap time (not of step time), all chips",
    ),
    "overlap.tc_busy_share": ("TensorCore busy", "share of step time, all chips"),
    "overlap.sc_busy_share": ("SparseCore busy", "share of step time, all chips"),
    "minibatching.tables": ("table stacks with SparseCore statistics", "stacked tables count as one"),
    "minibatching.tables_minibatched": ("table stacks split into minibatches", "a step split into more than one"),
    "memory.hbm_peak_share": ("HBM peak, share of capacity", "per chip: the highest chip, whole run"),
    "allocations.device_peak_bytes": ("device memory peak (allocators)", ALLOCATOR_PEAK_DETAIL),
    "stacking.tables": ("embedding tables", "in the compiled table layout"),
    "stacking.stacks": ("table stacks", "in the compiled table layout"),
    "stacking.padded_bytes": ("embedding tables, padded size", "all tables, summed over chips"),
    "stacking.wasted_bytes": ("padding waste", "bytes of padding in the tables' padded size, summed over chips"),
    "stacking.waste_share": ("padding waste share", "of the tables' padded size"),
    "breakdown.hbm_bandwidth_share": ("HBM bandwidth used", "share of the peak, {covers}, per chip"),
    "breakdown.slow_steps": ("slow steps", "counted steps over twice the median step time, {covers}"),
    "breakdown.slow_steps_time_share": ("time in slow steps", "share of the counted steps' time, {covers}"),
    "id_dropping.dropped_ids": ("dropped IDs", "total over every step, all chips"),
    "utilization.idle_share": (
        "device idle, first op to last",
        "share of the main device kind's active time, its cores summed (XProf's device idle)",
    ),
    "utilization.idle_share_of_span": (
        "device idle over the capture",
        "share of the capture's span, every core of the main device kind (empty ones too)",
    ),
    "utilization.idle_share_of_span_with_ops": (
        "device idle over the capture, cores with ops",
        "share of the capture's span, the main device kind's cores that ran ops (the device_idle finding's figure)",
    ),
}
# The cards at the head of the analyzers' part, in order (those the run has).
HEADLINE_FIGURES = (
    "idle_gaps.tensorcore.host.share",
    "idle_gaps.device.host_input_wait_share",
    "breakdown.share.idle",
    "overlap.overlap_share_of_sc",
    "memory.hbm_peak_share",
    "minibatching.tables_minibatched",
    "stacking.tables",
    "stacking.stacks",
    "stacking.wasted_bytes",
    "stacking.waste_share",
)


def figure_at(figures: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a report's figures (None when absent). A wall-time split
    without idle time has no idle category: its idle share is 0, not missing."""
    node: Any = figures
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        if not isinstance(node, dict) or part not in node:
            split = path == "breakdown.share.idle" and part == "idle" and isinstance(node, dict) and node
            return 0.0 if split else None
        node = node[part]
    return node


def _scalars(figures: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    """(dotted path, value) of every number in a report's figures (lists, such as the top ops, left out)."""
    out: list[tuple[str, float]] = []
    for key, value in figures.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _scalars(value, path + ".")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out.append((path, value))
    return out


def figure_kpi(figures: dict[str, Any], path: str) -> Kpi | None:
    """A card for the figure at `path`, labelled with what it is, its unit and its scope."""
    value = figure_at(figures, path)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    covers = str((figures.get("breakdown") or {}).get("covers") or "the counted steps").removeprefix("over ")
    leaf = path.rsplit(".", 1)[-1]
    unit = "share" if path.startswith("breakdown.share.") or leaf == "share" else unit_of(leaf)
    if path in FIGURE_TEXT:
        label, scope = FIGURE_TEXT[path]
    else:
        analysis_name, _, rest = path.partition(".")
        *groups, _ = rest.split(".")  # the leaf in words without its unit (the value shows it): units.evidence_label
        label = " · ".join([g.replace("_", " ") for g in groups] + [evidence_label(leaf)])
        scope = f"{analysis_name} analysis"
    return Kpi(label, float(value), unit, scope.format(covers=covers), path)


def analysis_kpis(report: RunReport) -> tuple[list[Kpi], list[Kpi]]:
    """(headline cards, every other figure) of the analyzers' report, each from its figures
    (the numbers `scprof analyze --json` prints) with its label, unit and scope."""
    figures = report.to_dict()["figures"]
    head = [k for p in HEADLINE_FIGURES if (k := figure_kpi(figures, p)) is not None]
    shown = {k.source for k in head}
    rest = [
        k
        for p, _ in _scalars(figures)
        if p not in shown and not _shown_elsewhere(p, figures) and (k := figure_kpi(figures, p)) is not None
    ]
    return head, rest


# Figures the Overview shows elsewhere: its first row (step times, minibatches, dropped IDs, the
# memory peak) and the step-time split chart (the breakdown's shares); and counts of steps (in scopes).
ELSEWHERE = (
    "breakdown.steps",
    "breakdown.steps_recorded",
    "minibatching.minibatches_per_step_mean",
    "id_dropping.dropped_ids",
    "memory.hbm_peak_bytes",
)


# A run without memory counters shows its allocators' peak in the first row's memory card instead
# (ui.data's overview_kpis: "device memory peak" on a GPU capture).
ALLOCATOR_PEAK = "allocations.device_peak_bytes"


def _shown_elsewhere(path: str, figures: dict[str, Any]) -> bool:
    if path == ALLOCATOR_PEAK:
        return figure_at(figures, "memory.hbm_peak_bytes") is None
    return path in ELSEWHERE or path.startswith(("breakdown.step_ps_", "breakdown.share."))


WAIT_CAUSES = {  # idle_gaps' causes of a TensorCore gap, and of a device's wait (real captures)
    "host": "waiting for host input",
    "sparsecore": "waiting for the SparseCores",
    "collective": "waiting in a collective",
    "unknown": "idle, cause unknown",
    # a real capture's device: idle while the host did this (awaited or not: the card
    # "device awaiting host input" counts only the input work it waited for)
    "host_input": "idle while the host ran input work",
    "input_transfer": "idle while a host-to-device copy ran",
    "launch": "idle while the host launched work",
    "host_other": "idle while the host ran other work",
    "idle": "idle, nothing on the host either",
}


def time_split(report: RunReport) -> list[dict[str, Any]]:
    """The step-time split as bars of shares, each part from the analyzers' figures: the wall
    time by category (breakdown.share, counted steps), and the TensorCores' (or a real capture's
    device's) time by what it waited for (idle_gaps), where a host-bound run shows. Each bar:
    {name, scope, parts: [{name, share, source}]}; a TensorCore bar's rest (busy, or gaps under
    1% of a median step) is 1 - the causes' shares."""
    from analyzers.time_split import CATEGORIES

    figures = report.to_dict()["figures"]
    bd = figures.get("breakdown") or {}
    bars: list[dict[str, Any]] = []
    share = bd.get("share") or {}
    if share:
        order = [c for c in CATEGORIES if c in share] + sorted(c for c in share if c not in CATEGORIES)
        bars.append(
            {
                "name": "wall time",
                "scope": f"by category, {str(bd.get('covers', '')).removeprefix('over ')}, all chips",
                "parts": [{"name": c, "share": float(share[c]), "source": f"breakdown.share.{c}"} for c in order],
            }
        )
    gaps = figures.get("idle_gaps") or {}
    tc = gaps.get("tensorcore") or {}
    if tc:
        parts = [
            {
                "name": f"TensorCore {WAIT_CAUSES.get(c, c)}",
                "share": float(v["share"]),
                "source": f"idle_gaps.tensorcore.{c}.share",
            }
            for c, v in tc.items()
        ]
        rest = max(0.0, 1.0 - sum(p["share"] for p in parts))
        parts.insert(0, {"name": "TensorCore busy (or gaps under 1% of a step)", "share": rest, "source": ""})
        bars.append(
            {
                "name": "TensorCore time",
                "scope": f"by what it waited for, {str(bd.get('covers', '')).removeprefix('over ')}, all chips",
                "parts": parts,
            }
        )
    device = gaps.get("device") or {}
    if device.get("wait_share"):
        parts = [{"name": "device busy", "share": float(device["busy_share"]), "source": "idle_gaps.device.busy_share"}]
        parts += [
            {"name": f"device {WAIT_CAUSES.get(c, c)}", "share": float(v), "source": f"idle_gaps.device.wait_share.{c}"}
            for c, v in device["wait_share"].items()
            if v
        ]
        scope = f"by what the host did while it was idle, {str(bd.get('covers', '')).removeprefix('over ')}, all chips"
        bars.append({"name": "device time", "scope": scope, "parts": parts})
    return bars


# What a failure's bytes measure, by its kind: (memory, scope, what the requested bytes are). The
# SPMEM overflow check is of the fixed-size buffers alone, of the stack with the largest; the
# "SPMEM per tile" counter holds fixed + gather buffers: two quantities, two names.
FAILURE_MEMORY = {
    "spmem_overflow": ("SPMEM", "per tile", "fixed-size buffers needed (the failed check)"),
    "gather_operand_too_large": ("SPMEM", "per tile", "fixed + gather buffers needed (the failed check)"),
    "hbm_oom": ("HBM", "per chip", "needed"),
}
SPMEM_COUNTER_TEXT = "SPMEM per tile, fixed + gather buffers (the largest stack)"


def failure_facts(report: RunReport) -> list[dict[str, Any]]:
    """The run's recorded failures (the failures analysis' figures): kind, start_ps, message,
    requested_bytes against capacity_bytes (None when the failure records none), with `memory`,
    `scope` and `needed` saying what the bytes measure."""
    rows = ((report.to_dict()["figures"].get("failures") or {}).get("failures")) or []
    keys = ("memory", "scope", "needed")
    return [r | dict(zip(keys, FAILURE_MEMORY.get(r["kind"], ("memory", "", "needed")), strict=True)) for r in rows]


def failure_needed_label(f: dict[str, Any]) -> str:
    """The name of a failure's requested bytes, on its card and where a chart marks them."""
    return f"{f['memory']} {f['scope']}".strip() + f": {f['needed']}"

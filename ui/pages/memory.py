"""The Memory page: HBM, SPMEM and other counters over time per chip, and HBM by contributor at
each chip's peak; to see how close a run comes to its memory capacity and what fills it (and, for
a failed compile, how far it overshot). A capture whose allocators recorded their allocations (a
TensorFlow GPU capture) gets its device memory from them instead: per allocator its peak, the
allocations live then, and bytes allocated and fragmentation over time (the allocations analyzer)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import html

from analyzers.registry import analyze_run
from analyzers.rules.allocations import allocator_rows
from profiler.store import Store
from profiler.units import format_fine_share, format_value
from profiler.xspace.map_names import MEMORY_STATS
from ui import data as ui_data
from ui import figures, render, state
from ui.pages.common import chips_checklist, run_and_steps, run_page, steps_slider
from ui.pages.overview import failure_cards
from ui.render import time_unit

# HBM contributors (the emulator's names: sim_backend/memory.py) and totals: one colour each,
# the same on every run; any other name gets a colour from its name alone (contributor_color).
CONTRIBUTOR_COLORS = {
    "embedding tables": "#1e88e5",
    "embedding optimizer state": "#90caf9",
    "dense weights": "#43a047",
    "dense optimizer state": "#a5d6a7",
    "constants": "#8d6e63",
    "prefetched inputs": "#fb8c00",
    "HBM heap": "#3949ab",
    "HBM stack": "#e53935",
}
PALETTE = ("#5e35b1", "#00897b", "#f4511e", "#6d4c41", "#c0ca33", "#d81b60", "#546e7a", "#fdd835")
BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def contributor_color(name: str) -> str:
    """A contributor's colour from its name ("HBM heap: dense weights" -> dense weights'), fixed across runs."""
    short = name.split(": ", 1)[-1]
    if short in CONTRIBUTOR_COLORS:
        return CONTRIBUTOR_COLORS[short]
    return PALETTE[int(hashlib.sha1(short.encode()).hexdigest(), 16) % len(PALETTE)]


def byte_unit(largest_bytes: float) -> tuple[str, float]:
    """The binary unit that shows values up to `largest_bytes` with a few digits: (name, scale)."""
    for name, scale in BYTE_UNITS:
        if largest_bytes >= scale:
            return name, scale
    return "B", 1.0


def layout_memory(store: Store, st: dict[str, str]) -> Any:
    run, bounds, steps = run_and_steps(store, st)
    chips = sorted({c["chip"] for c in ui_data.counters(store, run) if c["chip"] >= 0})
    chosen = state.int_list(st.get("chips"))
    chosen = [c for c in chosen if c in chips] if chosen is not None else chips[:1]
    return run_page(
        "memory",
        store,
        run,
        {"run": run, "steps": list(steps), "chips": chosen},
        chips_checklist("memory-chips", chips, chosen, ui_data.chip_names(store, run)),
        steps_slider("memory-steps", bounds, steps),
    )


def series_groups(cs: list[dict[str, Any]], data: dict[int, dict[str, np.ndarray]], names: dict[int, str]) -> list:
    """Counter series with identical samples drawn once: [(name, samples)], named by counter and
    the chips and SparseCores (planes) they come from."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in cs:
        s = data.get(c["track_id"])
        if s is not None:
            groups.setdefault((c["counter"], s["ts_ps"].tobytes(), s["value"].tobytes()), []).append(c)
    out = []
    for members in groups.values():
        c = members[0]
        by_chip: dict[int, list[str]] = {}
        for m in members:
            by_chip.setdefault(m["chip"], []).append(_core(m))
        where = [
            (ui_data.chip_name(names, chip) if chip >= 0 else "host") + (f" {_cores(cores)}" if any(cores) else "")
            for chip, cores in by_chip.items()
        ]
        name = c["counter"] if where == ["host"] else f"{c['counter']} · {', '.join(where)}"
        out.append((name, data[c["track_id"]]))
    return out


def _cores(cores: list[str]) -> str:
    """SparseCore labels as a range when consecutive: ["0", "1", "2", "3"] -> "SC 0–3"."""
    nums = sorted(int(c) for c in cores if c.isdigit())
    if len(nums) > 2 and nums == list(range(nums[0], nums[-1] + 1)):
        return f"SC {nums[0]}–{nums[-1]}"
    return "SC " + ", ".join(map(str, nums))


def _core(c: dict[str, Any]) -> str:
    """The SparseCore a counter's plane names ("/device:TPU:0 SparseCore 2" -> "2"), else ""."""
    plane = str(c.get("plane") or "")
    return plane.rsplit("SparseCore ", 1)[1] if "SparseCore " in plane else ""


def render_memory(store: Store, st: dict[str, Any]) -> Any:
    run, steps, chips = st["run"], tuple(st["steps"]), st.get("chips") or []
    info = ui_data.run_info(store, run)
    parts: list[Any] = []
    failed = []
    if info.get("status") == "failed":  # the failure's bytes against the room there was, as figures
        failed = figures.failure_facts(analyze_run(store, run, only=("failures",)))
        parts += [failure_cards(i, f) for i, f in enumerate(failed)]
    # the SPMEM failure's requested bytes, marked on the SPMEM chart under the card's name
    spmem_need = next(
        ((f["requested_bytes"], figures.failure_needed_label(f)) for f in failed if f["memory"] == "SPMEM"), None
    )
    series = ui_data.counters(store, run)
    word = ui_data.memory_word(store, run)  # HBM on a TPU, device memory on a GPU or CPU
    if not series:
        what = "HBM heap/stack, SPMEM, ..." if word == "HBM" else "device memory, allocator statistics, ..."
        parts.append(render.empty(f"This run records no memory counters ({what})."))
        return html.Div(parts)
    names = ui_data.chip_names(store, run)
    window = ui_data.steps_window(store, run, steps) if steps[1] >= steps[0] else None
    if window is None:  # no steps: the whole run, counters included (a failed compile records only them)
        lo = min([int(info["first_ps"] or 0)] + [int(c["first_ps"]) for c in series])
        hi = max([int(info["last_ps"] or 0)] + [int(c["last_ps"]) for c in series])
        window = (lo, hi + 1)
    t0, t1 = window
    unit, scale = time_unit(max(t1 - t0, 1))
    hbm = [c for c in series if ui_data.is_hbm(c) and c["chip"] in chips]
    spmem = [c for c in series if ui_data.is_spmem(c) and c["chip"] in chips]
    allocators = allocator_rows(ui_data.analysis_of(store, run, "allocations"))
    kept = {(a["plane"], a["allocator"]) for a in allocators}
    other = [
        c
        for c in series
        if not ui_data.is_hbm(c)
        and not ui_data.is_hbm_part(c)
        and not ui_data.is_spmem(c)
        and not is_allocator_counter(c, kept)  # drawn in the device memory section, bytes apart from ratios
        and (c["chip"] in chips or c["chip"] < 0)
    ]
    data = ui_data.counter_series(store, run, [c["track_id"] for c in hbm + spmem + other], t0, t1)

    def line_chart(
        cs: list[dict],
        what: str,
        capacity: float | None = None,
        cap_label: str = "",
        needed: tuple[float, str] | None = None,
    ) -> go.Figure:
        groups = series_groups(cs, data, names)
        return counter_chart(
            groups,
            what,
            (unit, scale),
            all(c["unit"] == "bytes" for c in cs),
            cs[0]["unit"] if cs else "",
            capacity,
            cap_label,
            needed,
        )

    cap = info.get("hbm_bytes")
    if hbm:
        bucketed = any(data.get(c["track_id"], {}).get("bucketed") for c in hbm)
        parts.append(
            render.section(
                "HBM over time",
                render.graph(line_chart(hbm, "HBM in use", cap, "HBM capacity"), id="memory-hbm", height=340),
                help_text="Per chip (the chips chosen above). Each counter's value holds from its sample on"
                + (" (downsampled: the highest value per pixel column)." if bucketed else "."),
            )
        )
    elif allocators:  # a GPU capture: its device memory is its allocators'
        parts.append(allocator_section(store, run, allocators, series, names))
    else:
        noun = ui_data.device_noun(names)
        parts.append(render.empty(f"No {word} counters recorded for the chosen {noun}s."))
    peaks = ui_data.hbm_peaks(store, run)
    if peaks:
        parts.append(peak_section(peaks, names, cap))
    tile = info.get("spmem_bytes_per_tile")
    if spmem:
        parts.append(
            render.section(
                figures.SPMEM_COUNTER_TEXT,
                render.graph(
                    line_chart(spmem, "SPMEM per tile", tile, "tile scratchpad", spmem_need),
                    id="memory-spmem",
                    height=300,
                ),
                help_text="What one tile's scratchpad holds for the stack that needs the most, fixed-size "
                "buffers (sized by the limits) plus the gather buffer, per SparseCore of the chosen chips "
                "(SparseCores with the same samples drawn once); a compile-time figure, so often a single sample."
                + (" The dotted line is what the failed check asked for." if spmem_need else ""),
            )
        )
    elif not allocators:  # a GPU capture (allocators) has no SPMEM to miss
        parts.append(
            render.note(
                "SPMEM: this run records no SPMEM counter"
                + (f" (tile scratchpad {format_value(tile, 'bytes')})." if tile else ".")
            )
        )
    if hbm and allocators:  # both kinds of memory data: the allocators' after the counters'
        parts.append(allocator_section(store, run, allocators, series, names))
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for c in other:  # one chart per unit: bytes, ratios and counts never share an axis
        by_unit.setdefault(c["unit"] or "", []).append(c)
    for u, cs in sorted(by_unit.items()):
        title = "Other counters" + (f" ({u})" if len(by_unit) > 1 and u else "")
        parts.append(render.section(title, render.graph(line_chart(cs, "value"), height=260)))
    return html.Div(parts)


def peak_section(peaks: list[dict[str, Any]], names: dict[int, str], cap: float | None) -> html.Section:
    """HBM by contributor at each chip's own peak (every chip, highest first named in the title)."""
    top = peaks[0]
    vunit, div = byte_unit(max([p["peak"] for p in peaks] + [cap or 0.0]))
    pf = render.figure(xaxis_title=f"HBM in use at the chip's peak ({vunit})", barmode="stack", showlegend=True)
    order = sorted(peaks, key=lambda p: p["chip"])
    labels = [ui_data.chip_name(names, p["chip"]) for p in order]
    contributors = list(dict.fromkeys(c for p in order for c in p["parts"]))
    for name in contributors:
        short = name.split(": ", 1)[-1]
        pf.add_trace(
            go.Bar(
                y=labels,
                x=[p["parts"].get(name, 0.0) / div for p in order],
                name=short,
                orientation="h",
                marker_color=contributor_color(name),
                customdata=[format_value(p["parts"].get(name), "bytes") for p in order],
                hovertemplate=f"%{{y}} · {render.plain(name)}: %{{customdata}}<extra></extra>",
            )
        )
    pf.update_yaxes(autorange="reversed")
    if cap:
        pf.add_vline(x=cap / div, line_dash="dash", line_color="#c62828", annotation_text="capacity per chip")
    share = f" = {format_value(top['peak'] / cap, 'share')} of capacity" if cap else ""
    return render.section(
        f"HBM at each chip's peak: the highest {format_value(top['peak'], 'bytes')}{share} on "
        f"{ui_data.chip_name(names, top['chip'])} at {format_value(top['ts_ps'], 'ps')}",
        render.graph(pf, id="memory-peaks", height=120 + 36 * len(peaks)),
        help_text=f"Every chip ({len(peaks)}), each at the moment of its own highest total over the whole run "
        "(the store's hbm_peaks), split by contributor; the same colour for a contributor on every run.",
    )


def runs_peak_figure(sides: list[tuple[str, dict[str, Any]]], cap: float | None) -> go.Figure:
    """HBM by contributor at each run's peak (data.hbm_peak), one horizontal stacked bar per run
    (`sides`: (label, peak)), in the Memory page's colours; contributors at 0 B on every side
    left out; the capacity per chip as a line when given."""
    vunit, div = byte_unit(max([p["peak"] for _, p in sides] + [cap or 0.0]))
    fig = render.figure(
        xaxis_title=f"HBM in use at the run's peak ({vunit}, the highest chip)", barmode="stack", showlegend=True
    )
    labels = [render.plain(label) for label, _ in sides]
    contributors = list(dict.fromkeys(c for _, p in sides for c, v in p["parts"].items() if v))
    for name in contributors:
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[p["parts"].get(name, 0.0) / div for _, p in sides],
                name=name.split(": ", 1)[-1],
                orientation="h",
                marker_color=contributor_color(name),
                customdata=[format_value(p["parts"].get(name, 0.0), "bytes") for _, p in sides],
                hovertemplate=f"%{{y}} · {render.plain(name)}: %{{customdata}}<extra></extra>",
            )
        )
    fig.update_yaxes(autorange="reversed")
    if cap:
        fig.add_vline(x=cap / div, line_dash="dash", line_color="#c62828", annotation_text="capacity per chip")
    fig.update_layout(legend=dict(orientation="h", y=-0.45), margin=dict(l=200, r=20, t=20, b=40))
    return fig


def counter_chart(
    groups: list[tuple[str, dict[str, np.ndarray]]],
    what: str,
    time: tuple[str, float],
    bytes_axis: bool,
    value_unit: str,
    capacity: float | None = None,
    cap_label: str = "",
    needed: tuple[float, str] | None = None,
) -> go.Figure:
    """Counter series (series_groups) over time: steps of lines; a bar per series when every
    series has one sample (a compile-time figure); bytes on an axis in the unit that suits them;
    the capacity and what a failure `needed` (bytes, its name) as lines across."""
    top = max(
        [float(np.max(s["value"])) for _, s in groups if len(s["value"])]
        + [capacity or 0.0, needed[0] if needed else 0.0]
    )
    vunit, div = byte_unit(top) if bytes_axis else (value_unit, 1.0)
    ytitle = f"{what} ({vunit})" if vunit else what
    if groups and all(len(s["ts_ps"]) == 1 for _, s in groups):
        fig = render.figure(yaxis_title=ytitle, showlegend=False, bargap=0.5)
        for name, s in groups:
            v = float(s["value"][0])
            fig.add_trace(
                go.Bar(
                    x=[name],
                    y=[v / div],
                    name=name,
                    text=[format_value(v, "bytes") if bytes_axis else f"{v:,.4g}"],
                    textposition="outside",
                    hovertemplate=f"{render.plain(name)}<br>%{{y:,.4g}} {vunit} (one sample, at "
                    f"{format_value(int(s['ts_ps'][0]), 'ps')})<extra></extra>",
                )
            )
    else:
        tunit, scale = time
        fig = render.figure(xaxis_title=f"time ({tunit})", yaxis_title=ytitle, showlegend=True)
        for name, s in groups:
            n = len(s["ts_ps"])  # a single sample: a marker (a line needs two)
            fig.add_trace(
                go.Scatter(
                    x=s["ts_ps"] / scale,
                    y=s["value"] / div,
                    mode="markers" if n == 1 else ("lines+markers" if n < 30 else "lines"),
                    marker=dict(size=10 if n == 1 else 5),
                    line_shape="hv",
                    name=name,
                    hovertemplate=f"{render.plain(name)}<br>%{{x:.4g}} {tunit}<br>%{{y:,.4g}} {vunit}<extra></extra>",
                )
            )
    if bytes_axis:
        fig.update_yaxes(rangemode="tozero", ticksuffix=f" {vunit}", tickformat=",.4~g", title_text=what)
        fig.update_yaxes(range=[0, top / div * 1.15])
    if capacity:
        fig.add_hline(
            y=capacity / div,
            line_dash="dash",
            line_color="#c62828",
            annotation_text=f"{cap_label} {format_value(capacity, 'bytes')}",
            annotation_position="top left",
        )
    if needed:
        fig.add_hline(
            y=needed[0] / div,
            line_dash="dot",
            line_color="#ef6c00",
            # the card's exact bytes, and the axis' unit
            annotation_text=f"{needed[1]} {int(needed[0]):,} B ({format_value(needed[0], 'bytes')})",
            annotation_position="top right",  # apart from the capacity's, which is top left
        )
    return fig


# TensorFlow's DataType numbers (types.proto) as XProf's memory profile names them.
TF_DATA_TYPES = {
    1: "float",
    2: "double",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    18: "complex128",
    19: "half",
    20: "resource",
    21: "variant",
    22: "uint32",
    23: "uint64",
}
HOST_DASHES = ("solid", "dash", "dot", "dashdot")  # the allocators' lines of each host of a run
LIVE_SHOWN = 10  # largest live allocations listed per allocator (the analyzer keeps as many)


def is_allocator_counter(c: dict[str, Any], allocators: set[tuple[str, str]]) -> bool:
    """A counter the ingest made from an allocator's stats ("<allocator> <stat>" on its host plane)."""
    name, _, stat = str(c["counter"]).rpartition(" ")
    return stat in MEMORY_STATS and (c.get("plane"), name) in allocators


def allocator_label(a: dict[str, Any], names: dict[int, str], hosts: int) -> str:
    """ "GPU_4_bfc · GPU:4" (with its host when the run has several); a device allocator whose GPU
    has no plane in the run says so."""
    if a["device_kind"] == "host":
        where = "host"
    elif a["device_kind"] != "device":
        where = "device unknown"
    elif a["chip"] is not None and a["chip"] >= 0:
        where = ui_data.chip_name(names, a["chip"])
    else:
        where = f"GPU {a['device_index']} (no device plane)"
    return f"{a['allocator']} · {where}" + (f" · {a['host']}" if hosts > 1 and a["host"] else "")


def allocator_section(
    store: Store, run: int, allocators: list[dict[str, Any]], series: list[dict[str, Any]], names: dict[int, str]
) -> html.Section:
    """Device memory from the allocators (the allocations analyzer's figures): a table per
    allocator, bytes allocated over time (a byte axis) and fragmentation (a ratio axis of its
    own), and the largest allocations live at each allocator's peak."""
    hosts = len({a["host"] for a in allocators})
    labels = [allocator_label(a, names, hosts) for a in allocators]
    start_ps = ui_data.run_info(store, run).get("first_ps") or 0  # times from the run's start, as `analyze`'s
    table_rows = [
        {
            **a,
            "label": label,
            "fragmentation_text": format_fine_share(a["fragmentation_at_peak_ratio"]),
            "peak_from_start_ps": a["peak_ts_ps"] - start_ps if a["peak_ts_ps"] is not None else None,
        }
        for a, label in zip(allocators, labels, strict=True)
    ]
    table = render.table(
        table_rows,
        [
            ("label", "allocator · device", "text"),
            ("peak_bytes", "peak allocated", "bytes"),
            ("peak_from_start_ps", "at (from the run's start)", "ps"),
            ("peak_in_use_bytes", "allocator's peak in use", "bytes"),
            ("allocations", "allocations", "count"),
            ("deallocations", "frees", "count"),
            ("fragmentation_text", "fragmentation at peak", "text"),
            ("live_at_peak", "live at peak", "count"),
            ("live_at_peak_bytes", "their bytes", "bytes"),
            ("unattributed_at_peak_bytes", "held since before the capture", "bytes"),
        ],
        id="memory-allocators",
    )
    tracks = {(c.get("plane"), c["counter"]): c for c in series}
    charts: list[Any] = []
    charts_of = (  # (stat, which allocators, axis title, graph id): bytes of device and host memory apart
        ("bytes_allocated", "device", "device memory allocated", "memory-allocator-device-bytes"),
        ("bytes_allocated", "host", "host memory allocated", "memory-allocator-host-bytes"),
        ("bytes_allocated", "unknown", "memory allocated", "memory-allocator-other-bytes"),
        ("fragmentation", None, "fragmentation", "memory-allocator-fragmentation"),
    )
    for stat, kind, what, graph_id in charts_of:
        chosen = [
            (label, tracks.get((a["plane"], f"{a['allocator']} {stat}")))
            for a, label in zip(allocators, labels, strict=True)
            if kind is None or a["device_kind"] == kind
        ]
        chosen = [(label, c) for label, c in chosen if c is not None]
        if chosen:
            fig = _allocator_chart(store, run, chosen, what, stat == "bytes_allocated", allocators, labels)
            charts.append(render.graph(fig, id=graph_id, height=300 if kind == "device" or kind is None else 240))
    live = [
        _live_details(a, label, i == 0)
        for i, (a, label) in enumerate(zip(allocators, labels, strict=True))
        if a["live_at_peak"]
    ]
    return render.section(
        "Device memory (allocator)",
        table,
        *charts,
        html.H4("Largest allocations live at each allocator's peak"),
        *live,
        help_text="From the allocators' own allocation and free events (XProf's memory profile): every allocator of "
        "the run, whatever the chips chosen above. Peak: the most bytes the allocator held during the capture, at its "
        "earliest moment; the allocator's peak in use may predate the capture; what it held before the capture "
        "began is in no allocation event. Bytes and fragmentation (1 − the largest free chunk / free bytes) on "
        "charts of their own.",
    )


def _allocator_chart(
    store: Store,
    run: int,
    chosen: list[tuple[str, dict[str, Any]]],
    what: str,
    bytes_axis: bool,
    allocators: list[dict[str, Any]],
    labels: list[str],
) -> go.Figure:
    """One allocator stat over the whole capture, a line per allocator in a colour of its own; on
    the bytes chart each allocator's peak as a marker."""
    t0 = min(int(c["first_ps"]) for _, c in chosen)
    t1 = max(int(c["last_ps"]) for _, c in chosen) + 1
    unit, scale = time_unit(max(t1 - t0, 1))
    data = ui_data.counter_series(store, run, [c["track_id"] for _, c in chosen], t0, t1)
    groups = [(label, data[c["track_id"]]) for label, c in chosen if c["track_id"] in data]
    fig = counter_chart(groups, what, (unit, scale), bytes_axis, "" if bytes_axis else "ratio")
    colors = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}
    hosts = sorted({a["host"] for a in allocators})
    dashes = {
        label: HOST_DASHES[hosts.index(a["host"]) % len(HOST_DASHES)]
        for a, label in zip(allocators, labels, strict=True)
    }
    for trace in fig.data:  # a dash per host: the same allocator on two hosts stays visible where they coincide
        trace.update(
            line_color=colors.get(trace.name), marker_color=colors.get(trace.name), line_dash=dashes.get(trace.name)
        )
    if bytes_axis and groups and not all(len(s["ts_ps"]) == 1 for _, s in groups):
        vunit, div = byte_unit(max(float(np.max(s["value"])) for _, s in groups))
        shown = {label for label, _ in groups}
        peaks = [
            (a, label)
            for a, label in zip(allocators, labels, strict=True)
            if label in shown and a["peak_ts_ps"] is not None
        ]
        fig.add_trace(
            go.Scatter(
                x=[a["peak_ts_ps"] / scale for a, _ in peaks],
                y=[a["peak_bytes"] / div for a, _ in peaks],
                mode="markers",
                marker=dict(symbol="diamond-open", size=12, color=[colors[label] for _, label in peaks]),
                name="peak",
                customdata=[[render.plain(label), format_value(a["peak_bytes"], "bytes")] for a, label in peaks],
                hovertemplate=f"%{{customdata[0]}}<br>peak %{{customdata[1]}} at %{{x:.4g}} {unit}<extra></extra>",
            )
        )
    if not bytes_axis:
        fig.update_yaxes(title_text="fragmentation", tickformat=".2~%", rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.3), margin=dict(b=90))
    return fig


def _live_details(a: dict[str, Any], label: str, open_: bool) -> html.Details:
    """One allocator's largest allocations live at its peak (the analyzer's largest_live)."""
    rows = [{**r, "data_type": _data_type(r.get("data_type"))} for r in (a.get("largest_live") or [])[:LIVE_SHOWN]]
    summary = (
        f"{label}: {a['live_at_peak']:,} allocations live at its peak of {format_value(a['peak_bytes'], 'bytes')} "
        f"hold {format_value(a['live_at_peak_bytes'], 'bytes')}; "
        f"{format_value(a['unattributed_at_peak_bytes'], 'bytes')} held since before the capture"
    )
    table = render.table(
        rows,
        [
            ("bytes", "size", "bytes"),
            ("requested_bytes", "requested", "bytes"),
            ("tf_op", "op", "wrap"),
            ("region_type", "region", "text"),
            ("data_type", "data type", "text"),
            ("shape", "shape", "text"),
            ("allocated_ts_ps", "allocated at", "ps"),
        ],
    )
    return html.Details([html.Summary(summary), table], open=open_, className="card")


def _data_type(v: Any) -> str | None:
    """A TensorFlow DataType number by its name ("19" -> "half"); other values as they are."""
    text = None if v is None else str(v)
    return TF_DATA_TYPES.get(int(text), text) if text is not None and text.isdigit() else text

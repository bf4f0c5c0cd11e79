"""The pages' data: plain Python values computed from the store (SQL in profiler/sql/ui/) and
from the analyzers' reports. No Dash here, so every function is testable on a small store.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from analyzers import runstats
from analyzers.findings import Analysis
from analyzers.registry import MEMORY_PEAK_FIGURES, RunReport, analyze_run
from analyzers.rules.breakdown import step_stats
from profiler import sqltree, stdlib, units
from profiler.errors import ScprofError, StoreError
from profiler.stdlib import HBM_COUNTERS
from profiler.store import Store
from profiler.units import format_bytes
from ui.store_access import KeyedCache, run_memo

ANALYSES = KeyedCache(size=8)
COMPARISONS = KeyedCache(size=8)
MAX_STEP_COLUMNS = 400  # SparseCore heatmap columns; longer runs are bucketed by steps
MAX_COUNTER_POINTS = 2000  # counter samples per series sent before bucketing


# ---- runs -----------------------------------------------------------------------------------

RUN_SORT_KEYS = ("run_id", "name", "source", "status", "steps", "events", "mean_step_ps", "ingested")


def runs(
    store: Store, text: str = "", sort: str = "run_id", descending: bool = False, trials: bool = False
) -> list[dict[str, Any]]:
    """The runs listing, filtered by `text` (in name, source, status, hardware or tags) and sorted;
    what-if trials only with `trials`."""
    # the store's runs listing, as `scprof runs` prints it
    rows = sqltree.query(store.con, "stdlib.runs.runs_listed", trials=trials).to_pylist()
    for r in rows:
        r["status_text"] = r["status"] + (f" ({r['failure']})" if r["failure"] else "")
    needle = (text or "").strip().lower()
    if needle:
        fields = ("name", "source", "status_text", "hardware", "tags")
        rows = [r for r in rows if any(needle in str(r[f] or "").lower() for f in fields)]
    key = sort if sort in RUN_SORT_KEYS else "run_id"
    rows.sort(key=lambda r: (r[key] is None, r[key] if r[key] is not None else 0), reverse=descending)
    return rows


def trials_count(store: Store) -> int:
    """How many what-if trials the store holds (runs with a whatif_origin tag)."""
    return int(sqltree.query(store.con, "stdlib.runs.trials_count").column("trials")[0].as_py())


def run_options(store: Store, keep: int | None = None) -> list[dict[str, Any]]:
    """Dropdown options for picking a run: label `name (#id)`, value the run_id. What-if trials are
    left out (in a store holding nothing else, kept), but for `keep`, the run a picker shows."""
    rows = sqltree.query(store.con, "ui.runs.run_names").to_pylist()
    listed = [r for r in rows if not r["trial"] or r["run_id"] == keep] if not all(r["trial"] for r in rows) else rows
    return [
        {"label": f"{r['name']} (#{r['run_id']}{', what-if trial' if r['trial'] else ''})", "value": r["run_id"]}
        for r in listed
    ]


def resolve(store: Store, ref: Any) -> int | None:
    """run_id for a run given by id or name; None when absent or unknown."""
    if ref in (None, ""):
        return None
    try:
        return store.resolve_run(ref)
    except StoreError:
        return None


def run_info(store: Store, run_id: int) -> dict[str, Any]:
    rows = sqltree.query(store.con, "ui.runs.run", run=run_id).to_pylist()
    if not rows:
        raise StoreError(f"run {run_id} not found")
    info = rows[0]
    for k in ("config", "tags", "hardware_extra"):
        try:
            info[k] = json.loads(info[k]) if isinstance(info[k], str) else (info[k] or {})
        except ValueError:
            info[k] = {}
    return info


def timed_steps(store: Store, run_id: int) -> int:
    """The run's steps with a step time: the count `scprof runs` lists (the run_list view's steps)."""
    return int(sqltree.query(store.con, "ui.runs.timed_steps", run=run_id).column("steps")[0].as_py())


def step_bounds(store: Store, run_id: int) -> tuple[int, int] | None:
    """First and last step of the run, or None when it has no steps."""
    r = run_memo(
        store,
        run_id,
        "step_range",
        None,
        lambda: sqltree.query(store.con, "ui.overview.step_range", run=run_id).to_pylist()[0],
    )
    return None if r["lo"] is None else (int(r["lo"]), int(r["hi"]))


def clamp_steps(bounds: tuple[int, int] | None, steps: tuple[int, int] | None) -> tuple[int, int]:
    """An inclusive step range inside the run's (the whole run when `steps` is None)."""
    if bounds is None:
        return (0, -1)
    if steps is None:
        return bounds
    lo, hi = max(bounds[0], steps[0]), min(bounds[1], steps[1])
    return (lo, hi) if lo <= hi else bounds


def step_times(store: Store, run_id: int, steps: tuple[int, int]) -> dict[str, np.ndarray]:
    """step, step_ps, start_ps, counted arrays of the steps in range (the store's step_times view)."""
    return run_memo(store, run_id, "step_times", tuple(steps), lambda: _step_times(store, run_id, steps))


def _step_times(store: Store, run_id: int, steps: tuple[int, int]) -> dict[str, np.ndarray]:
    t = sqltree.query(store.con, "ui.overview.step_times", run=run_id, step_lo=steps[0], step_hi=steps[1])
    out = {c: t.column(c).to_numpy().astype(np.int64) for c in ("step", "step_ps", "start_ps")}
    out["counted"] = t.column("counted").to_numpy(zero_copy_only=False).astype(bool)
    return out


def steps_covered(st: dict[str, np.ndarray]) -> str:
    """Which steps a summary of `st` (step_times) covers, for people (profiler.stdlib.steps_covered)."""
    return stdlib.steps_covered(st["step"].tolist(), st["counted"].tolist())


def steps_window(store: Store, run_id: int, steps: tuple[int, int]) -> tuple[int, int] | None:
    """[start, end) in ps covered by the steps (their markers on device chips, else their step
    times), or None."""
    r = run_memo(
        store,
        run_id,
        "steps_window",
        tuple(steps),
        lambda: sqltree.query(
            store.con, "ui.overview.steps_span", run=run_id, step_lo=steps[0], step_hi=steps[1]
        ).to_pylist()[0],
    )
    return None if r["t0"] is None else (int(r["t0"]), int(r["t1"]))


# ---- overview ---------------------------------------------------------------------------------


@dataclass
class Kpi:
    label: str
    value: float | None
    unit: str  # "ps", "bytes", "share", "count" or free text
    detail: str = ""
    source: str = ""  # where the figure is in `scprof analyze --json`: a dotted path under "figures"


def overview_kpis(store: Store, run_id: int, steps: tuple[int, int]) -> list[Kpi]:
    """The Overview's headline figures that SQL gives directly (cached per run and steps)."""
    return run_memo(store, run_id, "kpis", tuple(steps), lambda: _overview_kpis(store, run_id, steps))


def _overview_kpis(store: Store, run_id: int, steps: tuple[int, int]) -> list[Kpi]:
    st = step_times(store, run_id, steps)
    kpis: list[Kpi] = []
    covered = steps_covered(st)
    # over the whole run these are the analyzers' figures (the same definitions); over a chosen
    # range of steps they are those definitions applied to it, and name no source
    whole = steps == step_bounds(store, run_id)

    def src(path: str) -> str:
        return path if whole else ""

    if st["counted"].any():
        stats = step_stats(st["step_ps"][st["counted"]])
        kpis += [
            Kpi(f"step time {k}", stats[f"step_ps_{k}"], "ps", covered, src(f"breakdown.step_ps_{k}"))
            for k in ("mean", "p50", "p90")
        ]
    else:
        kpis.append(Kpi("step time", None, "ps", covered if len(st["step"]) else "no steps in this run"))
    part = sqltree.query(
        store.con, "ui.overview.step_minibatches", run=run_id, step_lo=steps[0], step_hi=steps[1]
    ).to_pylist()[0]
    if has_sparsecores(store, run_id):  # a GPU or CPU run has no SparseCore to split a batch
        kpis.append(
            Kpi(
                "SC minibatches per step",
                part["minibatches_per_step"],
                "count",
                f"mean of the most any partition was split into; {covered}"
                if part["max_minibatches"] is not None
                else "not recorded",
                src("minibatching.minibatches_per_step_mean") if part["max_minibatches"] is not None else "",
            )
        )
    total = f"total over steps {steps[0]}–{steps[1]}"
    kpis.append(
        Kpi(
            "dropped IDs",
            part["dropped_ids"],
            "count",
            f"{total}, all chips" if part["dropped_ids"] is not None else "not recorded",
            src("id_dropping.dropped_ids") if part["dropped_ids"] is not None else "",
        )
    )
    info = run_info(store, run_id)
    cap = info.get("hbm_bytes")
    word = memory_word(store, run_id)  # HBM on a TPU, device memory on a GPU or CPU
    # RunReport.memory_peak's rule, read without the whole report (a first view must not wait on every
    # analyzer): the counters' peak (memory.hbm_peak_bytes: the store's hbm_peaks), else the allocators'
    mem = hbm_peak(store, run_id)
    alloc = analysis_of(store, run_id, "allocations") if mem is None else None
    alloc_peak = (alloc.figures or {}).get("device_peak_bytes") if alloc is not None else None
    if mem is not None:
        detail = f"per chip: the highest, chip {mem['chip']}, over the whole run; " + (
            f"of {format_bytes(cap)} capacity" if cap else "capacity unknown"
        )
        kpis.append(Kpi(f"{word} peak", mem["peak"], "bytes", detail, MEMORY_PEAK_FIGURES[0]))
    elif alloc_peak is not None:  # the analyzers' cards then leave it to this one
        kpis.append(Kpi(f"{word} peak", alloc_peak, "bytes", ALLOCATOR_PEAK_DETAIL, MEMORY_PEAK_FIGURES[1]))
    else:
        kpis.append(Kpi(f"{word} peak", None, "bytes", f"no {word} counters or allocator events recorded"))
    return kpis


ALLOCATOR_PEAK_DETAIL = "the highest device allocator's bytes allocated, whole capture (Memory page)"


def memory_word(store: Store, run_id: int) -> str:
    """What the run's device memory is called for people (profiler.units.memory_word, from its device
    tracks' kinds): "HBM" on a TPU, "device memory" on a GPU or CPU; every page words memory by it."""

    def compute() -> str:
        kinds = sqltree.query(store.con, "analysis.run.device_kinds", run=run_id).column("kind").to_pylist()
        return units.memory_word(kinds)

    return run_memo(store, run_id, "memory_word", (), compute)


CHIP_PREFIX = {
    "tensorcore": "TPU",
    "sparsecore": "TPU",
    "sc_tile": "TPU",
    "gpu": "GPU",
    "cpu": "CPU",
    "device": "device",
}


def chip_names(store: Store, run_id: int) -> dict[int, str]:
    """Each device chip's label by its kind: TPU:0, GPU:1, CPU:0 (a CPU running XLA ops), device:2."""

    def compute() -> dict[int, str]:
        rows = sqltree.query(store.con, "ui.overview.chip_kinds", run=run_id).to_pylist()
        return {r["chip"]: f"{CHIP_PREFIX.get(r['kind'], 'device')}:{r['chip']}" for r in rows}

    return run_memo(store, run_id, "chip_names", (), compute)


def device_prefix(names: dict[int, str]) -> str:
    """The kind that names a run's chips (chip_names): TPU, GPU or CPU; `device` when several; TPU
    when the tracks name none (an emulated run's counters, a failed compile)."""
    kinds = {n.split(":")[0] for n in names.values()}
    return kinds.pop() if len(kinds) == 1 else ("device" if kinds else "TPU")


def device_noun(names: dict[int, str]) -> str:
    """What the UI's labels call one of a run's devices: a TPU's "chip", else "GPU", "CPU" or "device"."""
    prefix = device_prefix(names)
    return "chip" if prefix == "TPU" else prefix


def chip_name(names: dict[int, str], chip: int) -> str:
    """A chip's label from chip_names; one the run's tracks do not name takes the kind of its others."""
    return names.get(chip, f"{device_prefix(names)}:{chip}")


def chip_step_times(store: Store, run_id: int, steps: tuple[int, int]) -> list[dict[str, Any]]:
    return run_memo(
        store,
        run_id,
        "chip_steps",
        tuple(steps),
        lambda: sqltree.query(
            store.con, "ui.overview.chip_step_times", run=run_id, step_lo=steps[0], step_hi=steps[1]
        ).to_pylist(),
    )


def analysis(store: Store, run_id: int) -> RunReport:
    """The run's report (its stored analysis, else analyze_run's: analyzers/runstats.py), cached by the
    run's content key (a stale run is analysed once per process)."""
    key = ("analysis", store.path, *_run_key(store, run_id))
    return ANALYSES.get_or_compute(key, lambda: runstats.report(store, run_id))


def analysis_of(store: Store, run_id: int, name: str) -> Analysis | None:
    """One analyzer's result, for a page that shows only it (the Memory page's allocators): from the
    run's report when it is cached or stored and current, else that analyzer alone (analyze_run's
    `only`), so the page does not wait on the whole suite for a run analysed by older code."""
    key = ("analysis", store.path, *_run_key(store, run_id))
    report = ANALYSES.get(key) or runstats.stored_report(store, run_id)
    if report is None:
        report = ANALYSES.get_or_compute((*key, name), lambda: analyze_run(store, run_id, only=(name,)))
    return report.analyses.get(name)


def _run_key(store: Store, run_id: int) -> tuple:
    rows = sqltree.query(store.con, "ui.runs.run_key", run=run_id).to_pylist()
    if not rows:
        raise StoreError(f"run {run_id} not found")
    r = rows[0]
    return (r["run_id"], r["uuid"], r["ingested_at"])


def breakdown_per_step(report: RunReport, steps: tuple[int, int], chip: int | None = None) -> dict[str, Any]:
    """From the breakdown analysis (analyzers.rules.breakdown: the one split): {steps: [...], per_step:
    {cat: [ps per step]}} (mean over chips, or one chip) for every step in range, and per chip
    {chips: [...], per_chip: {cat: [mean ps per step]}} over the counted steps in range."""
    a = report.analyses.get("breakdown")
    if a is None or "step_breakdown" not in a.tables:
        return {}
    t = a.tables["step_breakdown"]
    times = a.tables["step_times"]
    chips = t.column("chip").to_numpy()
    step = t.column("step").to_numpy()
    dur = t.column("dur_ps").to_numpy().astype(np.float64)
    names, code = _codes(t.column("category"))  # category of row i: names[code[i]]; -1: none
    in_range = (step >= steps[0]) & (step <= steps[1])
    counted_steps = times.column("step").to_numpy()[times.column("counted").to_numpy(zero_copy_only=False)]
    counted = in_range & np.isin(step, counted_steps)
    from analyzers.time_split import CATEGORIES

    present = {names[k] for k in np.unique(code[in_range]) if k >= 0}
    cats = [c for c in CATEGORIES if c in present]
    cat_index = {c: i for i, c in enumerate(cats)}
    ci = np.array([cat_index.get(n, -1) for n in names] + [-1], np.int64)[code]  # code -1 -> the appended -1
    known = ci >= 0
    sel = in_range & ((chips == chip) if chip is not None else True)
    steps_sel, step_i = np.unique(step[sel], return_inverse=True)
    n_chips = max(len(np.unique(chips[sel])), 1)
    by_step = np.zeros((len(cats), len(steps_sel)))
    k = known[sel]
    np.add.at(by_step, (ci[sel][k], step_i[k]), dur[sel][k])
    chip_list, chip_i = np.unique(chips[counted], return_inverse=True)
    n_steps = max(len(np.unique(step[counted])), 1)
    by_chip = np.zeros((len(cats), len(chip_list)))
    k = known[counted]
    np.add.at(by_chip, (ci[counted][k], chip_i[k]), dur[counted][k])
    return {
        "steps": steps_sel.tolist(),
        "per_step": {c: (by_step[i] / n_chips).tolist() for i, c in enumerate(cats)},
        "chips": chip_list.tolist(),
        "per_chip": {c: (by_chip[i] / n_steps).tolist() for i, c in enumerate(cats)},
        "counted_steps": np.unique(step[counted]).tolist(),
    }


def _codes(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A text column as its distinct values and each row's index into them (-1 for null), without a
    Python loop per row."""
    arr = column.combine_chunks()
    enc = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()
    return enc.dictionary.to_pylist(), enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


# ---- SparseCore ------------------------------------------------------------------------------


def has_sparsecores(store: Store, run_id: int) -> bool:
    """Whether the run has SparseCores (ui.sparsecore.has_sparsecores): the SparseCore page and
    figures are left out for one without (a GPU or CPU capture, a PyTorch trace)."""
    return run_memo(
        store,
        run_id,
        "has_sparsecores",
        (),
        lambda: bool(sqltree.query(store.con, "ui.sparsecore.has_sparsecores", run=run_id).column(0)[0].as_py()),
    )


def sc_tables(store: Store, run_id: int) -> tuple[list[str], bool]:
    """Tables with partition statistics (True), else tables named on events (False)."""
    return run_memo(store, run_id, "sc_tables", None, lambda: _sc_tables(store, run_id))


def _sc_tables(store: Store, run_id: int) -> tuple[list[str], bool]:
    names = sqltree.query(store.con, "ui.sparsecore.sc_tables", run=run_id).column("table_name").to_pylist()
    if names:
        return names, True
    return sqltree.query(store.con, "ui.sparsecore.sc_tables_from_events", run=run_id).column(
        "table_name"
    ).to_pylist(), False


def sparsecore(store: Store, run_id: int, steps: tuple[int, int], tables: list[str]) -> dict[str, Any]:
    """Heatmap matrices (partition x step bucket) of IDs, unique IDs, minibatches, dropped IDs and
    ratios to the limits, the per-step skew, and the per-table summary (cached per run and view)."""
    return run_memo(
        store, run_id, "sparsecore", (tuple(steps), tuple(tables)), lambda: _sparsecore(store, run_id, steps, tables)
    )


def _sparsecore(store: Store, run_id: int, steps: tuple[int, int], tables: list[str]) -> dict[str, Any]:
    _, from_stats = sc_tables(store, run_id)
    n_steps = steps[1] - steps[0] + 1
    sb = max(1, math.ceil(n_steps / MAX_STEP_COLUMNS))
    if from_stats:
        t = sqltree.query(
            store.con,
            "ui.sparsecore.sc_cells",
            run=run_id,
            step_lo=steps[0],
            step_hi=steps[1],
            tables=list(tables),
            sb=sb,
        )
    elif not tables:  # all tables: the ingest-time summary of the same events
        t = sqltree.query(
            store.con, "ui.sparsecore.sc_cells_from_summary", run=run_id, step_lo=steps[0], step_hi=steps[1], sb=sb
        )
    else:
        ids = {
            r["value"]: r["string_id"]
            for r in sqltree.query(
                store.con, "ui.runs.string_ids", run=run_id, values=["sc_forward", *tables]
            ).to_pylist()
        }
        table_ids = [ids[t] for t in tables if t in ids] or ([-1] if tables else [])
        t = sqltree.query(
            store.con,
            "ui.sparsecore.sc_cells_from_events",
            run=run_id,
            step_lo=steps[0],
            step_hi=steps[1],
            table_ids=table_ids,
            forward_id=ids.get("sc_forward", -1),
            sb=sb,
        )
    if t.num_rows == 0:
        return {"empty": True, "from_stats": from_stats}
    cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in t.column_names}
    parts = sorted(set(zip(cols["chip"].tolist(), cols["sc"].tolist(), strict=True)))
    step_cols = sorted(set(cols["step"].tolist()))
    pi = {p: i for i, p in enumerate(parts)}
    si = {s: i for i, s in enumerate(step_cols)}
    rows = np.array([pi[p] for p in zip(cols["chip"].tolist(), cols["sc"].tolist(), strict=True)])
    cidx = np.array([si[s] for s in cols["step"].tolist()])
    mats = {}
    for m in ("ids", "unique_ids", "minibatches", "dropped_ids", "ids_ratio", "unique_ratio"):
        mat = np.full((len(parts), len(step_cols)), np.nan)
        mat[rows, cidx] = np.asarray(cols[m], dtype=np.float64)
        mats[m] = mat
    ids = mats["ids"]
    with np.errstate(invalid="ignore", divide="ignore"):
        skew = np.nanmax(ids, axis=0) / np.nanmean(ids, axis=0)
    summary = sqltree.query(
        store.con, "ui.sparsecore.sc_table_summary", run=run_id, step_lo=steps[0], step_hi=steps[1], tables=list(tables)
    ).to_pylist()
    return {
        "empty": False,
        "from_stats": from_stats,
        "step_bucket": sb,
        "partitions": [f"chip {c} · SC {s}" for c, s in parts],
        "steps": step_cols,
        "matrices": mats,
        "skew": skew,
        "minibatches_per_step": np.nanmax(mats["minibatches"], axis=0),
        "dropped_per_step": np.nansum(mats["dropped_ids"], axis=0),
        "tables": summary,
    }


# ---- memory ----------------------------------------------------------------------------------


def counters(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The run's counter series: track_id, chip, counter, unit, samples, peak."""
    return run_memo(
        store,
        run_id,
        "counters",
        None,
        lambda: sqltree.query(store.con, "ui.memory.counter_series", run=run_id).to_pylist(),
    )


def is_hbm(c: dict[str, Any]) -> bool:
    """An HBM total whose sum is the HBM in use (the store's rule, profiler/sql/stdlib/memory.sql hbm_usage:
    'HBM heap' and 'HBM stack' in bytes); contributor tracks ("HBM heap: dense weights") are parts of it."""
    return c["unit"] == "bytes" and c["counter"] in HBM_COUNTERS


def is_hbm_part(c: dict[str, Any]) -> bool:
    """One contributor of an HBM total, recorded as "<total>: <contributor>"."""
    return c["unit"] == "bytes" and c["counter"].split(": ", 1)[0] in HBM_COUNTERS and ": " in c["counter"]


def is_spmem(c: dict[str, Any]) -> bool:
    return c["unit"] == "bytes" and ("spmem" in c["counter"].lower() or "scratchpad" in c["counter"].lower())


def counter_series(
    store: Store, run_id: int, track_ids: list[int], t0: int, t1: int, max_points: int = MAX_COUNTER_POINTS
) -> dict[int, dict[str, np.ndarray]]:
    """Per track: ts_ps and value arrays in [t0, t1) (bucketed to the highest value per column
    when a series has more than max_points samples), plus `bucketed` when so."""
    if not track_ids:
        return {}
    n = (
        sqltree.query(store.con, "ui.memory.counter_window_count", run=run_id, tracks=track_ids, t0=t0, t1=t1)
        .column("n")[0]
        .as_py()
    )
    if n <= max_points * len(track_ids):
        t = sqltree.query(store.con, "ui.memory.counter_samples_window", run=run_id, tracks=track_ids, t0=t0, t1=t1)
        value_col, bucketed = "value", False
    else:
        b = max(1, -(-(t1 - t0) // max_points))
        t = sqltree.query(store.con, "ui.memory.counter_buckets", run=run_id, tracks=track_ids, t0=t0, t1=t1, b=b)
        value_col, bucketed = "hi", True
    tid = t.column("track_id").to_numpy()
    ts = t.column("ts_ps").to_numpy()
    val = t.column(value_col).to_numpy()
    return {
        k: {"ts_ps": ts[tid == k], "value": val[tid == k], "bucketed": bucketed} for k in track_ids if np.any(tid == k)
    }


def hbm_peak(store: Store, run_id: int, chips: list[int] | None = None) -> dict[str, Any] | None:
    """The run's HBM peak (of the given chips): the highest chip's in the store's hbm_peaks view,
    its chip, its earliest time, and each HBM counter's value then (a total recorded with its
    contributors shown as those)."""
    return run_memo(
        store, run_id, "hbm_peak", tuple(chips) if chips is not None else None, lambda: _hbm_peak(store, run_id, chips)
    )


def hbm_peaks(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Every chip's HBM peak (the store's hbm_peaks view), highest first, each with its HBM
    counters' values then (as hbm_peak's `parts`)."""
    return run_memo(
        store,
        run_id,
        "hbm_peaks",
        None,
        lambda: [
            _peak_parts(store, run_id, r)
            for r in sqltree.query(store.con, "ui.memory.hbm_peaks_all", run=run_id).to_pylist()
        ],
    )


def _hbm_peak(store: Store, run_id: int, chips: list[int] | None) -> dict[str, Any] | None:
    top = sqltree.query(
        store.con, "ui.memory.hbm_peak", run=run_id, chips=list(chips or []), all_chips=chips is None
    ).to_pylist()
    return _peak_parts(store, run_id, top[0]) if top else None


def _peak_parts(store: Store, run_id: int, row: dict[str, Any]) -> dict[str, Any]:
    best = {"chip": row["chip"], "peak": float(row["hbm_peak_bytes"]), "ts_ps": int(row["hbm_peak_ts_ps"])}
    held = sqltree.query(store.con, "ui.memory.hbm_at", run=run_id, chip=best["chip"], ts=best["ts_ps"]).to_pylist()
    values = {r["counter"]: float(r["value"]) for r in held}
    # the totals' values, with a total recorded with its contributors ("HBM heap: <name>") shown as those
    split = {c.split(": ", 1)[0] for c in values if ": " in c}
    totals = {c: v for c, v in values.items() if ": " not in c and c not in split}
    best["parts"] = totals | {c: v for c, v in values.items() if ": " in c}
    return best


# ---- compare ---------------------------------------------------------------------------------


def compare(store: Store, base: int, cand: int) -> tuple[dict[str, Any] | None, str | None]:
    """compare_runs(...).to_dict() (cached), or (None, why not): analyzers/compare.py missing, or
    runs that cannot be compared (the message names the run and what it lacks)."""
    try:
        from analyzers.compare import compare_runs
    except ImportError as e:
        return None, f"run comparison (analyzers/compare.py) is not available in this build: {e}"
    key = ("compare", store.path, *_run_key(store, base), *_run_key(store, cand))
    try:
        result = COMPARISONS.get_or_compute(
            key, lambda: compare_runs(store, base, cand, reports=(analysis(store, base), analysis(store, cand)))
        )
    except ScprofError as e:  # runs that cannot be compared (one without steps): say why
        return None, str(e)
    return (result.to_dict() if hasattr(result, "to_dict") else dict(result)), None

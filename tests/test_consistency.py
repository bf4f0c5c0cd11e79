"""One definition of every figure: each figure shown in more than one place is the same everywhere.

Every bundled config is recorded (6 steps each, so warm-up and drain are left out of the
summaries) and two JAX CPU captures are imported into one store. For every run, mean, p50 and
p90 step time, the breakdown's shares, SparseCore minibatches per step, dropped IDs, the HBM
peak and the findings are read from `scprof analyze --json`, `scprof compare --json`, `scprof
runs --json`, the UI's data callbacks (ui/data.py) and the Perfetto export's breakdown track,
and must agree. The store's step_times view is checked against plain Python over the events. What `record`
printed of each run it stored is checked against the same figures.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import defaultdict
from pathlib import Path

import pytest

from exporters.perfetto import BREAKDOWN_CATEGORY, write_trace
from exporters.perfetto.validate import read_trace
from profiler.store import Store
from scprof.cli import main
from tests.ui.test_data import text_of
from tests.xplane.test_wild_captures import CAPTURES as WILD_CAPTURES
from tests.xplane.test_wild_captures import ingest_path
from ui import data
from ui import figures as ui_figures
from ui.pages.overview import render_overview, render_overview_analysis

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
DATA = ROOT / "tests" / "data"
# every real capture the project holds: JAX on CPU, made-here input-pipeline captures, PyTorch
# (Kineto) traces, and the corpus made elsewhere (tests/data/wild: TPU, GPU, HTA's traces)
CAPTURES = {
    "jax_small": DATA / "jax_cpu_small.xplane.pb",
    "jax_train": DATA / "jax_cpu_train",
    "jax_json": DATA / "jax_cpu_json",
    **{f"input_{n}": DATA / "input_pipeline" / n for n in ("host_bound", "prefetched", "two_hosts")},
    "input_missing_stats": DATA / "input_pipeline" / "missing_stats.xplane.pb",
    **{
        f"torch_{n}": DATA / "torch_dataloader" / f"{n}.pt.trace.json.gz"
        for n in ("dataloader_bound", "dataloader_workers")
    },
    **{f"wild_{n}": Path(ingest_path(n)) for n in WILD_CAPTURES},
}
STEPS = 6
DEVICE_KINDS = "SELECT DISTINCT kind FROM tracks WHERE run_id = ? AND chip >= 0 AND kind NOT IN ('counter', 'host')"
REL = 1e-9  # shares and means computed in another order differ in the last bits only


def cli(*args: str) -> str:
    """Run `scprof ARGS`; its stdout (exit 0 asserted)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0, args
    return out.getvalue()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("consistency")
    db = str(tmp / "store.duckdb")
    for config in CONFIGS:
        # configs that fail to compile (gather_too_large, spmem_overflow) are stored as failed runs
        printed = io.StringIO()
        with (
            contextlib.suppress(SystemExit),
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.redirect_stdout(printed),
        ):
            main(["record", str(config), "--steps", str(STEPS), "--out", str(tmp / config.stem), "--db", db])
        (tmp / f"{config.stem}.record.txt").write_text(printed.getvalue())
    for name, path in CAPTURES.items():
        cli("ingest", str(path), "--name", name, "--db", db)
    return db


@pytest.fixture(scope="module")
def runs(db) -> dict[str, dict]:
    listed = {r["name"]: r for r in json.loads(cli("runs", "--json", "--db", db))}
    assert set(listed) == {c.stem for c in CONFIGS} | set(CAPTURES)
    return listed


def reference_step_times(store: Store, run_id: int) -> dict[int, tuple[int, int, bool]]:
    """{step: (start_ps, dur_ps, counted)} in plain Python, from the rule in profiler/sql/stdlib/steps.sql:
    each device chip's step from its TensorCore `Steps` markers, else its other step markers,
    else its host's step markers, else the extent of its events of the step; the host only in
    runs without device chips; a step's time is its longest chip's; all but the first and last
    step count, given 5 or more. A track's host is its plane name's part before `/host:` or
    `/device:`."""
    tracks = store.rows("SELECT * FROM tracks WHERE run_id = ?", [run_id])
    chip_of = {r["track_id"]: r for r in tracks}

    def host(plane: str) -> str:
        cut = [i for i in (plane.find("/host:"), plane.find("/device:")) if i >= 0]
        return plane[: min(cut)] if cut else ""

    spans: dict = defaultdict(dict)  # (chip, rank) -> {step: [start, end]}
    host_marks: dict = defaultdict(list)  # host -> [(step, start, end)]

    def widen(key, step, start, end):
        s = spans[key].setdefault(step, [start, end])
        s[0], s[1] = min(s[0], start), max(s[1], end)

    for m in store.rows("SELECT track_id, step, start_ps, dur_ps FROM steps WHERE run_id = ?", [run_id]):
        t = chip_of[m["track_id"]]
        rank = 4 if t["chip"] < 0 else (1 if t["line"] == "Steps" else 2)
        widen((t["chip"], rank), m["step"], m["start_ps"], m["start_ps"] + m["dur_ps"])
        if t["chip"] < 0:
            host_marks[host(t["plane"])].append((m["step"], m["start_ps"], m["start_ps"] + m["dur_ps"]))
    for t in tracks:
        if t["chip"] >= 0 and t["kind"] != "counter":
            for step, start, end in host_marks.get(host(t["plane"]), []):
                widen((t["chip"], 3), step, start, end)
    for e in store.rows(
        "SELECT track_id, step, start_ps, dur_ps FROM events WHERE run_id = ? AND step IS NOT NULL", [run_id]
    ):
        chip = chip_of[e["track_id"]]["chip"]
        widen((chip, 5 if chip < 0 else 3.5), e["step"], e["start_ps"], e["start_ps"] + e["dur_ps"])
    chips = {chip for chip, _ in spans}
    if any(c >= 0 for c in chips):
        chips = {c for c in chips if c >= 0}
    per_step: dict = {}
    for chip in chips:
        best = min(rank for c, rank in spans if c == chip)
        for step, (start, end) in spans[(chip, best)].items():
            s0, d0 = per_step.get(step, (start, end - start))
            per_step[step] = (min(s0, start), max(d0, end - start))
    order = sorted(per_step)
    return {s: (*per_step[s], len(order) < 5 or order[0] < s < order[-1]) for s in order}


def test_step_times_view_equals_plain_python_over_the_events(db, runs):
    with Store.open(db, read_only=True) as store:
        for name in ("baseline", "pipelining_off", "jax_train", "jax_small"):
            run = runs[name]["run_id"]
            got = {
                r["step"]: (r["start_ps"], r["dur_ps"], r["counted"])
                for r in store.rows("SELECT * FROM step_times WHERE run_id = ?", [run])
            }
            want = reference_step_times(store, run)
            assert got == want and len(want) >= 3, name
            assert sum(c for _, _, c in want.values()) == (len(want) - 2 if len(want) >= 5 else len(want))


def export_shares(store: Store, run_id: int, out: str, counted: set[int]) -> dict[str, float]:
    """Each category's share of the Perfetto export's breakdown slices over the counted steps."""
    write_trace(store, run_id, out)
    total: dict[str, int] = defaultdict(int)
    for s in read_trace(out).slices:
        if BREAKDOWN_CATEGORY in s.categories and dict(s.args)["step"] in counted:
            total[s.name] += dict(s.args).get("dur_ps", (s.end_ts - s.ts) * 1000)
    whole = sum(total.values())
    return {c: v / whole for c, v in sorted(total.items())}


def kpis(store: Store, run: int) -> dict[str, float | None]:
    steps = data.clamp_steps(data.step_bounds(store, run), None)
    return {k.label: k.value for k in data.overview_kpis(store, run, steps)}


def test_every_figure_is_the_same_everywhere(db, runs, tmp_path):
    base = runs["baseline"]["run_id"]
    checked = no_hbm_words = 0
    with Store.open(db, read_only=True) as store:
        for name, listed in runs.items():
            run = listed["run_id"]
            report = json.loads(cli("analyze", name, "--json", "--db", db))
            figures = report["figures"]
            ui_report = data.analysis(store, run)
            # findings: analyze, the UI's Findings page and its Overview
            assert len(report["findings"]) == len(ui_report.findings), name
            k = kpis(store, run)
            assert data.timed_steps(store, run) == listed["steps"], name  # every page's header: runs' steps
            hbm = data.hbm_peak(store, run)
            # memory is "HBM" on a TPU (or a run whose tracks name no device), "device memory" on a GPU
            # or CPU run, from the run's device tracks' kinds (read here, not through the product)
            kinds = {r["kind"] for r in store.rows(DEVICE_KINDS, [run])}
            tpu = not kinds or bool(kinds & {"tensorcore", "sparsecore", "sc_tile"})
            word = "HBM" if tpu else "device memory"
            assert data.memory_word(store, run) == word, name
            peak = k[f"{word} peak"]
            allocators = figures.get("allocations", {}).get("device_peak_bytes")
            if "memory" in figures and "hbm_peak_bytes" in figures["memory"]:
                assert figures["memory"]["hbm_peak_bytes"] == peak == hbm["peak"], name
            else:  # no memory counters: the allocators' peak (a GPU capture), else none
                assert peak == allocators and hbm is None, name
            if not tpu:  # a GPU or CPU run says device memory on every surface, never HBM
                analyze_text = cli("analyze", name, "--db", db)
                state = {"run": run, "steps": list(data.clamp_steps(data.step_bounds(store, run), None))}
                overview_text = text_of(render_overview(store, state)) + text_of(render_overview_analysis(store, state))
                for where, text in (("analyze", analyze_text), ("overview", overview_text), ("cards", str(list(k)))):
                    assert "HBM" not in text, (name, where, text[text.find("HBM") - 80 : text.find("HBM") + 40])
                no_hbm_words += 1
            mb = figures.get("minibatching", {})
            # a run without SparseCores (the CPU captures) has no such card: the figure is absent both ways
            assert mb.get("minibatches_per_step_mean") == k.get("SC minibatches per step"), name
            assert ("SC minibatches per step" in k) == data.has_sparsecores(store, run), name
            assert figures.get("id_dropping", {}).get("dropped_ids") == k["dropped IDs"], name
            # the Overview's figure cards and split bars: each the figure at its path, each name once
            head, rest = ui_figures.analysis_kpis(ui_report)
            for card in head + rest:
                assert card.value == pytest.approx(ui_figures.figure_at(figures, card.source), rel=REL), (name, card)
            labels = [c.label for c in head + rest]
            assert len(labels) == len(set(labels)), (name, labels)
            # a name means one quantity: a card and a bar part with the same words show the same path
            named = {c.label: c.source for c in head + rest}
            for bar in ui_figures.time_split(ui_report):
                for part in bar["parts"]:
                    if part["source"]:
                        assert named.setdefault(part["name"], part["source"]) == part["source"], (name, part)
            for bar in ui_figures.time_split(ui_report):
                for part in bar["parts"]:
                    if part["source"]:
                        want = ui_figures.figure_at(figures, part["source"])
                        assert part["share"] == pytest.approx(want, rel=REL), (name, part)
                names = [p["name"] for p in bar["parts"]]
                assert len(names) == len(set(names)), (name, names)
            # findings: the UI's are analyze's, value for value
            for ui_f, f in zip(ui_report.findings, report["findings"], strict=True):
                assert (ui_f.rule, ui_f.title, ui_f.value) == (f["rule"], f["title"], f["value"]), name
            if listed["status"] != "ok" or "step_ps_mean" not in figures.get("breakdown", {}):
                # failed, or a capture without steps: no step figure anywhere
                assert "step_ps_mean" not in figures.get("breakdown", {}) and listed["mean_step_ps"] is None, name
                assert k.get("step time mean") is None, name
                continue
            bd = figures["breakdown"]
            st = data.step_times(store, run, data.clamp_steps(data.step_bounds(store, run), None))
            counted = set(st["step"][st["counted"]].tolist())
            assert bd["steps"] == len(counted) == listed["counted_steps"], name
            # mean / p50 / p90: analyze, `scprof runs`, the UI's Runs page and Overview
            assert bd["step_ps_mean"] == k["step time mean"], name
            assert listed["mean_step_ps"] == pytest.approx(bd["step_ps_mean"], rel=REL), name  # DuckDB's avg
            ui_runs = {r["run_id"]: r for r in data.runs(store)}
            assert ui_runs[run]["mean_step_ps"] == listed["mean_step_ps"], name
            assert (bd["step_ps_p50"], bd["step_ps_p90"]) == (k["step time p50"], k["step time p90"]), name
            # compare: the run against the baseline (the baseline against itself is refused by the UI only)
            cmp_ = json.loads(cli("compare", "baseline", name, "--json", "--db", db))
            assert cmp_["step_time"]["cand_mean_ps"] == pytest.approx(bd["step_ps_mean"], rel=REL), name
            assert cmp_["step_time"]["cand_steps"] == bd["steps"], name
            ui_cmp, why = data.compare(store, base, run)
            assert why is None and ui_cmp["step_time"] == cmp_["step_time"], name
            n_base = len(json.loads(cli("analyze", "baseline", "--json", "--db", db))["findings"])
            f = cmp_["findings"]
            assert len(f["new"]) + len(f["persisting"]) == len(report["findings"]), name
            assert len(f["resolved"]) + len(f["persisting"]) == n_base, name
            # the breakdown: analyze's shares, compare's mean per counted step and chip, the UI's
            # per-chip means and the Perfetto export's breakdown track
            if "share" not in bd:
                assert not any(data.breakdown_per_step(ui_report, (0, STEPS)).get("per_chip", {}).values()), name
                continue
            share = bd["share"]
            per = {r["category"]: r["cand_ps"] for r in cmp_["breakdown"] if r["cand_ps"]}
            assert set(per) == set(share), name
            for c in share:
                assert per[c] / sum(per.values()) == pytest.approx(share[c], rel=REL), (name, c)
            ui_bd = data.breakdown_per_step(ui_report, data.clamp_steps(data.step_bounds(store, run), None))
            ui_chip = {c: sum(v) / len(v) for c, v in ui_bd["per_chip"].items()}
            assert set(ui_bd["counted_steps"]) == counted, name
            for c in share:
                assert ui_chip[c] == pytest.approx(per[c], rel=REL), (name, c)
            exported = export_shares(store, run, str(tmp_path / f"{name}.pftrace"), counted)
            assert exported.keys() == share.keys(), name
            for c in share:
                assert exported[c] == pytest.approx(share[c], rel=REL), (name, c)
            checked += 1
    assert checked >= len(CONFIGS) - 2 + 10  # every recorded run that compiled, and the captures with steps
    assert no_hbm_words >= 5  # the GPU and CPU captures


def test_a_run_without_steps_is_refused_by_name_everywhere(db, runs):
    """compare with a failed run (no steps): one line naming the run and what it lacks, exit 2
    from the CLI, and the same words on the UI's Compare page (no internal error)."""
    from ui.pages.compare import render_compare, render_compare_verdict

    failed = [n for n, r in runs.items() if r["status"] == "failed"]
    assert failed  # gather_too_large and spmem_overflow do not compile
    base = runs["baseline"]["run_id"]
    with Store.open(db, read_only=True) as store:
        for name in failed:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                assert main(["compare", "baseline", name, "--db", db]) == 2
            want = f"compare: candidate '{name}' (run_id {runs[name]['run_id']}) has no steps (the run is failed"
            (line,) = err.getvalue().splitlines()
            assert line.startswith(f"scprof: error: {want}"), line
            assert line.endswith("step time needs steps in both runs"), line
            comparison, why = data.compare(store, base, runs[name]["run_id"])
            assert comparison is None and why.startswith(want), why
            state = {"base": base, "cand": runs[name]["run_id"]}
            assert want in str(render_compare_verdict(store, state))
            render_compare(store, state)  # the SQL side renders too


def test_record_prints_the_stored_figures(db, runs):
    """`scprof record`'s lines are the stored analysis's figures in analyze's words: the same
    events as `runs`, the same step time and time split as `analyze`, minibatches and dropped IDs."""
    from profiler.units import format_ps

    for config in CONFIGS:
        printed = (Path(db).parent / f"{config.stem}.record.txt").read_text()
        listed = runs[config.stem]
        if listed["status"] != "ok":
            assert printed == "", config.stem  # a failed run: the error line on stderr, exit 2
            continue
        figures = json.loads(cli("analyze", config.stem, "--json", "--db", db))["figures"]
        text = cli("analyze", config.stem, "--db", db)
        lines = printed.splitlines()
        assert lines[0] == f"recorded {config.stem!r}: {listed['events']:,} events stored", config.stem
        bd = figures["breakdown"]
        step_line = next(line for line in lines if line.startswith("step time"))
        assert f"mean {format_ps(bd['step_ps_mean'])}" in step_line and step_line in text.splitlines(), config.stem
        split = next(line for line in lines if line.startswith("time split"))
        assert split in text.splitlines(), config.stem
        mb = figures["minibatching"]["minibatches_per_step_mean"]
        assert f"minibatches per step  mean {mb:.2f} (every stack)" in lines, config.stem
        assert f"dropped IDs  {figures['id_dropping']['dropped_ids']:,}" in lines, config.stem
        assert "chip 0" not in printed, config.stem  # the emulator's own chip-0 tallies are not printed

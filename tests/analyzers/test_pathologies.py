"""Acceptance: every bundled pathology config yields its finding, the tuned run none,
and the one-flag fix written in each config (`# Fix: --set ...`) makes its findings go.

Runs the real emulator on the bundled configs (10 steps each) and on each pathology
with its fix, ingests the traces and analyzes them from the store alone.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analyzers.compare import compare_runs
from analyzers.context import RunContext
from analyzers.findings import make_fix
from analyzers.registry import analyze_run
from analyzers.rules import breakdown
from analyzers.time_split import CATEGORIES, split_timelines
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from sim_backend.errors import RunFailure
from sim_backend.recording.record import record_run
from tests.sim_backend.test_sim_pathologies import documented_fix
from tests.tracekit import REPO

STEPS = 10
# the baseline's two stacks, named as jax-tpu-embedding's auto_stack_tables names them
STACK_A = "t0_t1_t2_t3_t4_t5_t6_t7_t8_t9_t10_t11_t12_t13_t14_...c4eff8215590"
STACK_B = "t16_t17_t18_t19_t20_t21_t22_t23_t24_t25"
# config -> the rules its profile must raise (and no other problem rule)
EXPECTED = {
    "baseline": {"minibatching", "host_bound"},
    "tuned": set(),
    "host_bound": {"host_bound"},
    "pipelining_off": {"not_pipelined"},
    "limits_too_low": {"minibatching"},
    "id_dropping": {"id_dropping"},
    # stacking off: every table its own stack (too few), and no stacking shift spreading hot rows
    "skewed_ids": {"sc_load_skew", "too_few_stacked_tables", "oversized_limits"},
    "too_few_stacked": {"too_few_stacked_tables", "sc_load_skew"},
    "too_many_stacked": {"too_many_stacked_tables"},
    "tiny_widths": {"padding_waste"},
    "hbm_pressure": {"hbm_heap_pressure"},
    "hbm_stack_pressure": {"hbm_stack_pressure", "oversized_limits"},
    "deep_prefetch": {"hbm_heap_pressure", "oversized_limits"},
    "spmem_overflow": {"failure_spmem_overflow"},  # fails to compile: recorded, stored as failed
    "gather_too_large": {"failure_gather_operand_too_large"},
    "quantized": {"quantization_clipping"},
    "fsdp": set(),  # not a pathology: dense weights sharded over the data axis
}
# pathologies whose config names a one-flag fix (baseline's fix is tuned.toml, a whole config)
FIXABLE = sorted(name for name, rules in EXPECTED.items() if rules and name != "baseline")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pathologies")
    db = str(tmp / "runs.duckdb")
    with Store.open(db) as s:
        runs = [(name, name, []) for name in EXPECTED] + [("baseline_seed1", "baseline", ["seed=1"])]
        runs += [(f"{name}_fixed", name, documented_fix(name)) for name in FIXABLE]
        for name, config, overrides in runs:
            try:
                path = record_run(
                    str(REPO / "configs" / f"{config}.toml"), overrides, name, STEPS, str(tmp / name)
                ).trace_path
            except RunFailure as failed:  # a failed run is recorded before record_run raises
                path = failed.trace_path
            ingest_trace(s, path, name=name)
    with Store.open(db, read_only=True) as s:
        yield s


@pytest.mark.parametrize("config", sorted(EXPECTED))
def test_config_yields_exactly_its_findings(store, config):
    report = analyze_run(store, store.resolve_run(config))
    assert {f.rule for f in report.findings} == EXPECTED[config]


# Limits cost SparseCore time (docs/emulator.md): configs whose generous limits create their
# memory or stacking pathology also waste SparseCore time on empty buffer slots, a second problem
# their one-flag fix does not address (skewed_ids' fix stacks its 26 tables, summing their limits).
SECOND_PROBLEM = {"oversized_limits"}
FIX_KEEPS = {"too_many_stacked", "hbm_stack_pressure", "deep_prefetch", "skewed_ids"}


@pytest.mark.parametrize("config", FIXABLE)
def test_documented_fix_leaves_no_finding(store, config):
    run = store.resolve_run(f"{config}_fixed")
    assert store.rows("SELECT status FROM runs WHERE run_id = ?", [run])[0]["status"] == "ok"
    kept = SECOND_PROBLEM if config in FIX_KEEPS else set()
    assert {f.rule for f in analyze_run(store, run).findings} == kept


def test_findings_name_the_right_entities(store):
    skew = analyze_run(store, store.resolve_run("skewed_ids")).findings
    hot = [f for f in skew if f.rule == "sc_load_skew"]
    assert hot and all(f.entities["tables"] and f.entities["scs"] and f.entities["chips"] for f in hot)
    # the hottest partition of each flagged table is the one its partition statistics say
    for f in hot:
        (table,) = f.entities["tables"]
        rows = store.rows(
            "SELECT chip, sc, sum(ids) AS ids FROM sc_partition_stats WHERE run_id = ? AND table_name = ? "
            "GROUP BY ALL ORDER BY ids DESC LIMIT 1",
            [store.resolve_run("skewed_ids"), table],
        )
        assert (rows[0]["chip"], rows[0]["sc"]) == (f.entities["chips"][0], f.entities["scs"][0]) or f.evidence[
            "persistence_share"
        ] < 1
    mb = [f for f in analyze_run(store, store.resolve_run("limits_too_low")).findings if f.rule == "minibatching"]
    assert [f.entities["tables"] for f in mb] == [[STACK_A], [STACK_B]]  # both stacks over their limits
    drop = [f for f in analyze_run(store, store.resolve_run("id_dropping")).findings if f.rule == "id_dropping"]
    assert [f.entities["tables"] for f in drop] == [[STACK_B]] and drop[0].value > 0  # only B over 2048


def test_tuned_beats_baseline_with_an_interval_excluding_zero(store):
    c = compare_runs(store, store.resolve_run("baseline"), store.resolve_run("tuned"))
    assert c.verdict == "improved" and c.step_time.ci_high < 0
    assert {f["rule"] for f in c.findings["resolved"]} == {"minibatching", "host_bound"}
    assert not c.findings["new"]


def test_per_op_deltas_match_the_events(store):
    base, cand = store.resolve_run("baseline"), store.resolve_run("tuned")
    c = compare_runs(store, base, cand)
    ops = {(r["track_kind"], r["name"]): r for r in c.ops}
    # independent figure: SparseCore forward time per counted step, summed from the run's slices
    for run, key in ((base, "base_ps_per_step"), (cand, "cand_ps_per_step")):
        (row,) = store.rows(
            "SELECT sum(dur_ps) / (SELECT count(*) FROM step_times WHERE run_id = $run AND counted) AS per_step "
            "FROM slices WHERE run_id = $run AND track_kind = 'sparsecore' AND name = 'SparseDenseMatmulOp' "
            "AND step IN (SELECT step FROM step_times WHERE run_id = $run AND counted)",
            {"run": run},
        )
        assert ops["sparsecore", "SparseDenseMatmulOp"][key] == pytest.approx(row["per_step"])
    # tuned limits: one minibatch instead of three, so fewer, cheaper SparseCore passes
    assert ops["sparsecore", "SparseDenseMatmulOp"]["change"] == "faster"
    assert (
        ops["sparsecore", "SparseDenseMatmulOp"]["cand_events_per_step"]
        < ops["sparsecore", "SparseDenseMatmulOp"]["base_events_per_step"]
    )
    # zero-length markers (table layout) are not ops
    assert all((r["base_ps_per_step"] or 0) + (r["cand_ps_per_step"] or 0) > 0 for r in c.ops)
    assert ("host", "table_layout") not in ops


def test_same_config_other_seed_is_not_a_change(store):
    c = compare_runs(store, store.resolve_run("baseline"), store.resolve_run("baseline_seed1"))
    assert c.verdict in ("no change", "inconclusive")
    assert c.step_time.ci_low <= 0 <= c.step_time.ci_high


def test_memory_findings_name_their_driver_and_lever(store):
    (stack,) = [
        f for f in analyze_run(store, store.resolve_run("hbm_stack_pressure")).findings if f.rule.startswith("hbm")
    ]
    assert stack.evidence["driver"] == "HBM stack" and "xla_sc_num_serialized_tables" in stack.recommendation
    (heap,) = [f for f in analyze_run(store, store.resolve_run("deep_prefetch")).findings if f.rule.startswith("hbm")]
    assert heap.evidence["driver"] == "prefetched inputs" and "maximum_parallel_iterations" in heap.recommendation
    for name in ("spmem_overflow", "gather_too_large"):  # failed compiles are stored, marked failed
        assert store.rows("SELECT status FROM runs WHERE name = ?", [name])[0]["status"] == "failed"


# The op events as plain SQL rows (chip, start_ps, end_ps, priority, core_kind; host events on
# every chip with windows): an independent selection of what the analyzers read as op_arrays.
EVENTS_SQL = """
WITH chips AS (SELECT DISTINCT chip FROM step_windows WHERE run_id = $run),
ev AS (
    SELECT k.chip, e.start_ps, e.start_ps + e.dur_ps AS end_ps, k.priority, k.core_kind
    FROM events e
    JOIN timeline_kinds($run) k ON k.track_id = e.track_id AND k.category_id = coalesce(e.category_id, -1)
    WHERE e.run_id = $run AND e.dur_ps > 0
)
SELECT chip, start_ps, end_ps, priority, core_kind FROM ev WHERE chip >= 0
UNION ALL
SELECT chips.chip, ev.start_ps, ev.end_ps, ev.priority, ev.core_kind FROM ev, chips WHERE ev.chip < 0
"""


def test_split_from_op_arrays_matches_a_plain_sql_selection(store):
    # the analyzers split op_arrays' tracks, classed through a (track, category) lookup; the same
    # sweep over the events selected in plain SQL (sorted by chip and start) must agree everywhere,
    # and so must the sum of the per-span splits the Perfetto export makes (split_windows with a span)
    views = {"priority": (CATEGORIES, False), "core_kind": (breakdown.CORE_SETS, True)}
    for (run,) in store.con.execute("SELECT run_id FROM runs WHERE status = 'ok'").fetchall():
        ctx = RunContext(store, run)
        windows = ctx.sql("analysis.split.step_windows")  # installs the analysis.base macros EVENTS_SQL reads
        events = store.query(EVENTS_SQL, {"run": run})
        by_sql = split_timelines(events, windows, views)
        for view, table in breakdown.timeline_splits(ctx).items():
            assert table.num_rows > 0
            assert sorted(table.to_pylist(), key=str) == sorted(by_sql[view].to_pylist(), key=str), (run, view)
        lo, hi = pc.min(windows.column("start_ps")).as_py(), pc.max(windows.column("end_ps")).as_py()
        cut = lo + (hi - lo) // 3  # inside some window: both halves of it are split and summed
        parts = []
        for a, z in ((lo, cut), (cut, hi)):
            w = windows.filter(pc.and_(pc.less(windows.column("start_ps"), z), pc.greater(windows.column("end_ps"), a)))
            w = w.set_column(2, "start_ps", pc.max_element_wise(w.column("start_ps"), pa.scalar(a, pa.int64())))
            w = w.set_column(3, "end_ps", pc.min_element_wise(w.column("end_ps"), pa.scalar(z, pa.int64())))
            parts.append(breakdown.split_windows(ctx, w, span=(a, z))["priority"])
        spans = pa.concat_tables(parts).group_by(["chip", "step", "category"]).aggregate([("dur_ps", "sum")])
        whole = breakdown.step_breakdown(ctx)
        assert sorted(spans.to_pylist(), key=str) == sorted(
            whole.rename_columns(["chip", "step", "category", "dur_ps_sum"]).select(spans.column_names).to_pylist(),
            key=str,
        ), run


# pathology -> (its rule, whether its documented fix is a limits file): the documented one-flag
# fix of each config whose lever is a config key is the structured fix its finding carries
FIX_RULES = {
    "host_bound": "host_bound",
    "pipelining_off": "not_pipelined",
    "too_few_stacked": "too_few_stacked_tables",
    "skewed_ids": "too_few_stacked_tables",
    "too_many_stacked": "too_many_stacked_tables",
    "hbm_stack_pressure": "hbm_stack_pressure",
    "deep_prefetch": "hbm_heap_pressure",
    "quantized": "quantization_clipping",
    "tiny_widths": "padding_waste",
    "id_dropping": "id_dropping",
    "limits_too_low": "minibatching",
}


@pytest.mark.parametrize("config", sorted(FIX_RULES))
def test_finding_carries_the_documented_fix(store, config):
    (item,) = documented_fix(config)
    key, _, text = item.partition("=")
    fixes = [f.fix for f in analyze_run(store, store.resolve_run(config)).findings if f.rule == FIX_RULES[config]]
    assert fixes and all(fixes), f"{config}: {FIX_RULES[config]} carries no fix"
    if key == "flags.xla_sparse_core_max_ids_file":  # the documented limits file: derived limits
        assert all(f["derive_limits"] for f in fixes)
        return
    value = {"true": True, "false": False}.get(text, text)
    value = float(value) if isinstance(value, str) and value.replace(".", "", 1).isdigit() else value
    assert any(f["set"].get(key) == value for f in fixes), (config, fixes)
    # fixes that change the model's numerics are marked: quantization ranges, widths, dropping
    assert all(f["changes_numerics"] for f in fixes) == (config in ("quantized", "tiny_widths", "id_dropping"))


def test_skew_names_the_id_shuffle(store):
    """skewed_ids: the skew findings that cost step time carry sparsecore.shuffle_ids=true, the
    emulator's ID shuffle (tests/whatif/test_verify_bundled.py shows its simulation is faster);
    a table whose hottest partition moves between steps (sampling noise) is info, without it."""
    found = [f for f in analyze_run(store, store.resolve_run("skewed_ids")).findings if f.rule == "sc_load_skew"]
    skew = [f for f in found if f.severity != "info"]
    assert skew and all(f.fix == make_fix(set={"sparsecore.shuffle_ids": True}) for f in skew)
    assert all(f.fix is None and f.evidence["persistence_share"] < 0.5 for f in found if f.fix is None)

"""The stacking analyzer on hand-built runs: layout events in, padding and stack findings out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzers.context import RunContext
from analyzers.rules import stacking
from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_to_store import ingest_trace

N_SC = 16  # SparseCores of the slice: vocabularies pad to a multiple of it
STEP_PS = 20_000


def table(name: str, stack: str, n_in_stack: int, vocab: int, width: int, dtype_bytes: int = 4, slots: int = 1) -> dict:
    """One layout event's fields, padding computed by hand (32-byte rows, 16 SparseCores)."""
    padded_row = -(-width * dtype_bytes // 32) * 32
    return {
        "stack": stack,
        "table_name": name,
        "stack_tables": n_in_stack,
        "features": 1,
        "vocab": vocab,
        "padded_vocab": -(-vocab // N_SC) * N_SC,
        "width": width,
        "padded_width": padded_row // dtype_bytes,
        "dtype_bytes": dtype_bytes,
        "row_bytes": width * dtype_bytes,
        "padded_row_bytes": padded_row,
        "optimizer_slots": slots,
    }


def record(
    path: Path,
    layout: list[dict],
    ops: list[tuple[str, str, int, int, int, int]] = (),
    steps: int = 0,
    minibatches: dict[str, int] | None = None,
    loads: dict[str, tuple[int, int, int, int]] | None = None,
    hardware: dict | None = None,
    config: dict | None = None,
) -> Path:
    """A run: layout events; SC ops (stack, category, step, sc, ids, dur); TC step markers;
    partition statistics (`loads`: per stack, observed IDs and unique IDs, compiled limits)."""
    hw = {"generation": "v5p", "num_chips": 1, **(hardware or {})}
    with Recorder(str(path), run_name="r", hardware=hw, config=config or {}, start_time_unix_ns=0) as rec:
        if layout:
            t = rec.track("/host:CPU", "Table Layout", "host")
            n = len(layout)
            keys = [k for k in layout[0] if k != "stack"]
            rec.emit(
                track=[t] * n,
                name=["table_layout"] * n,
                category=["compile"] * n,
                start_ps=[0] * n,
                dur_ps=[0] * n,
                table=[r["stack"] for r in layout],
                bytes=[r["padded_vocab"] * r["padded_row_bytes"] for r in layout],
                args={k: [r[k] for r in layout] for k in keys},
            )
        if ops:
            tracks = [
                rec.track(f"/device:TPU:0 SparseCore {sc}", "Sparse Core Ops", "sparsecore", 0, sc)
                for _, _, _, sc, _, _ in ops
            ]
            start = [s * STEP_PS + i % 50 * 10 for i, (_, _, s, _, _, _) in enumerate(ops)]
            rec.emit(
                track=tracks,
                name=[c for _, c, _, _, _, _ in ops],
                category=[c for _, c, _, _, _, _ in ops],
                table=[st for st, _, _, _, _, _ in ops],
                step=[s for _, _, s, _, _, _ in ops],
                ids=[i for _, _, _, _, i, _ in ops],
                start_ps=start,
                dur_ps=[d for *_, d in ops],
            )
        if steps:
            tc = rec.track("/device:TPU:0", "Steps", "tensorcore", chip=0, core=0)
            rec.steps(
                track=[tc] * steps,
                step=list(range(steps)),
                start_ps=[s * STEP_PS for s in range(steps)],
                dur_ps=[STEP_PS] * steps,
            )
        if minibatches:
            names = list(minibatches)
            rec.partition_stats(
                step=[0] * len(names),
                chip=[0] * len(names),
                sc=[0] * len(names),
                table=names,
                ids=[(loads or {}).get(n, (1,) * 4)[0] for n in names],
                unique_ids=[(loads or {}).get(n, (1,) * 4)[1] for n in names],
                max_ids_per_partition=[(loads or {}).get(n, (1,) * 4)[2] for n in names],
                max_unique_ids_per_partition=[(loads or {}).get(n, (1,) * 4)[3] for n in names],
                minibatches=[minibatches[n] for n in names],
                dropped_ids=[0] * len(names),
            )
    return path


def analyze(tmp_path: Path, **kw) -> stacking.Analysis:
    db = str(tmp_path / "s.duckdb")
    with Store.open(db) as store:
        ingest_trace(store, str(record(tmp_path / "r.sctrace", **kw)))
    with Store.open(db, read_only=True) as store:
        return stacking.analyze(RunContext(store, 1))


def test_padding_waste_against_hand_computed_values(tmp_path):
    layout = [
        table("narrow", "narrow", 1, vocab=1000, width=1),  # 4 of 32 bytes per row
        table("wide", "wide", 1, vocab=3, width=128),  # 3 rows padded to 16
        table("half", "half", 1, vocab=40, width=3, dtype_bytes=2),
    ]  # 6 of 32 bytes
    result = analyze(tmp_path, layout=layout)
    rows = {r["table_name"]: r for r in result.tables["stacking_tables"].to_pylist()}
    n = rows["narrow"]
    assert (n["padded_vocab"], n["padded_width"], n["padded_row_bytes"]) == (1008, 8, 32)
    assert n["row_padding_share"] == pytest.approx(7 / 8)
    assert n["stored_bytes"] == 4000 and n["padded_bytes"] == 1008 * 32
    assert n["row_padding_bytes"] == 1000 * 28 and n["vocab_padding_bytes"] == 8 * 32
    assert n["waste_share"] == pytest.approx(1 - 4000 / (1008 * 32))
    w = rows["wide"]
    assert (w["padded_vocab"], w["row_padding_bytes"], w["vocab_padding_bytes"]) == (16, 0, 13 * 512)
    assert w["waste_share"] == pytest.approx(13 / 16)
    h = rows["half"]
    assert (h["padded_width"], h["padded_vocab"]) == (16, 48)
    assert h["row_padding_share"] == pytest.approx(26 / 32)
    total = 1008 * 32 + 16 * 512 + 48 * 32
    rules = {f.rule: f for f in result.findings}
    assert set(rules) == {"padding_waste", "vocab_padding_waste"}
    pad = [f for f in result.findings if f.rule == "padding_waste"]
    # narrow holds 32256 of 41984 table bytes: critical; half (1536 B, 3.7%) a warning
    assert [(f.entities["tables"], f.severity) for f in pad] == [(["half"], "warning"), (["narrow"], "critical")]
    assert "tables.narrow.width=8" in pad[1].recommendation
    vocab = rules["vocab_padding_waste"]
    assert vocab.value == pytest.approx((8 * 32 + 13 * 512 + 8 * 32) / total)
    assert result.figures["wasted_bytes"] == total - 4000 - 3 * 512 - 40 * 6


def small_stacks_run(n_stacks: int, steps: int = 4, scs: int = 2) -> dict:
    """n one-table stacks of one key; every op costs 1000 ps + 2 ps per ID (fwd and bwd)."""
    layout = [table(f"t{i}", f"t{i}", 1, vocab=1600, width=16) for i in range(n_stacks)]
    ops = [
        (f"t{i}", cat, s, sc, ids, 1000 + 2 * ids)
        for i in range(n_stacks)
        for s in range(steps)
        for sc in range(scs)
        for cat in ("sc_forward", "sc_backward")
        for ids in [(7 * i + 3 * s + sc) % 11 * 10 + 10]
    ]
    return {"layout": layout, "ops": ops, "steps": steps}


def test_too_few_stacked_tables_with_the_overhead_share(tmp_path):
    result = analyze(tmp_path, **small_stacks_run(6))
    assert result.figures["stacks"] == 6 and result.figures["tables_per_stack_max"] == 1
    assert result.figures["stacks_below_5"] == 6
    (f,) = result.findings
    assert f.rule == "too_few_stacked_tables" and f.entities["tables"] == [f"t{i}" for i in range(6)]
    # 6 stacks -> 1: 5 x (forward + backward) fewer ops per SparseCore and step, 1000 ps each
    assert f.evidence["extra_ops_per_step"] == 10 and f.evidence["fixed_ps_per_op"] == pytest.approx(1000)
    assert f.value == pytest.approx(10 * 1000 / STEP_PS) and f.severity == "critical"
    assert "disable_table_stacking=false" in f.recommendation


def test_one_small_stack_per_width_is_not_too_few(tmp_path):
    run = small_stacks_run(1)
    run["layout"].append(table("other", "other", 1, vocab=1600, width=32))
    assert analyze(tmp_path, **run).findings == []


@pytest.mark.parametrize(("n", "minibatches", "expected"), [(100, 1, None), (101, 1, "warning"), (150, 3, "warning")])
def test_too_many_stacked_tables(tmp_path, n, minibatches, expected):
    layout = [table(f"t{i}", "stack_0", n, vocab=1600, width=32) for i in range(n)]
    result = analyze(tmp_path, layout=layout, minibatches={"stack_0": minibatches})
    assert result.figures["tables_per_stack_max"] == n
    found = [(f.rule, f.severity) for f in result.findings]
    assert found == ([] if expected is None else [("too_many_stacked_tables", expected)])
    if expected and minibatches == 1:  # no minibatches: split so the all-to-alls overlap other stacks' lookups
        k = result.findings[0].evidence["suggested_tables_per_stack"]
        assert k <= 100 and f"max_tables_per_stack={k}" in result.findings[0].recommendation
        assert result.findings[0].fix["set"] == {"sparsecore.max_tables_per_stack": k}


# 150 tables of width 32 with the default limits (256 per table: 38,400 per partition for the
# stack, the sum), a load of twice that; 16 tiles, 1,024 samples per SparseCore (4,096 over one
# v5p chip's 4 SparseCores). SPMEM per tile at the observed load, by hand:
# ceil(76800/16) * 12 + ceil(40000/16) * 8 + ceil(1024 * 32 / 16) * 4 = 57,600 + 20,000 + 8,192
NEED_BYTES = 85_792
BIG_STACK = {
    "loads": {"stack_0": (76_800, 40_000, 38_400, 38_400)},
    "config": {"global_batch": 4096},
    "minibatches": {"stack_0": 3},
}


def test_big_stack_minibatched_by_its_limits_is_not_split(tmp_path):
    """The stack's limits (the sum of its tables') cause its minibatches while SPMEM holds the load:
    the fix is derived limits, not a split (which shrinks each stack's limit with its load)."""
    layout = [table(f"t{i}", "stack_0", 150, vocab=1600, width=32) for i in range(150)]
    hw = {"sparsecores_per_chip": 4, "tiles_per_sparsecore": 16, "spmem_bytes_per_tile": 131_072}
    (f,) = analyze(tmp_path, layout=layout, hardware=hw, **BIG_STACK).findings
    assert f.rule == "too_many_stacked_tables" and f.evidence["cause"] == "limits"
    assert f.evidence["spmem_at_observed_bytes"] == NEED_BYTES
    assert "Split it" not in f.recommendation and "derive" in f.recommendation
    assert f.fix["derive_limits"] and "sparsecore.max_tables_per_stack" not in f.fix["set"]


def test_big_stack_whose_load_overflows_spmem_is_split(tmp_path):
    """With 64 KiB of SPMEM per tile the load cannot be held at any limit: split in two (each half's
    load, 77,600 bytes of buffers, over two tiles' 57,344 left beside the 8,192 of gather), then derive."""
    layout = [table(f"t{i}", "stack_0", 150, vocab=1600, width=32) for i in range(150)]
    hw = {"sparsecores_per_chip": 4, "tiles_per_sparsecore": 16, "spmem_bytes_per_tile": 65_536}
    (f,) = analyze(tmp_path, layout=layout, hardware=hw, **BIG_STACK).findings
    assert f.evidence["cause"] == "spmem" and f.severity == "critical"
    assert f.fix["set"] == {"sparsecore.max_tables_per_stack": 75} and f.fix["derive_limits"]


def test_a_run_without_layout_events_says_it_cannot_see(tmp_path):
    result = analyze(tmp_path, layout=[], ops=small_stacks_run(2)["ops"], steps=4)
    assert result.findings == [] and result.figures == {}
    assert result.notes and "no table layout" in result.notes[0]


def test_counts_equal_an_independent_count(tmp_path):
    rng = np.random.default_rng(5)
    sizes = [int(s) for s in rng.integers(1, 12, size=7)]
    layout = [
        table(
            f"s{j}_{i}",
            f"stack_{j}" if n > 1 else f"s{j}_0",
            n,
            vocab=int(rng.integers(1, 5000)),
            width=int(rng.choice([1, 8, 16, 64])),
        )
        for j, n in enumerate(sizes)
        for i in range(n)
    ]
    for r in layout:  # one width per stack, as stacking requires
        r.update(
            {
                k: v
                for k, v in table("x", "x", 1, 1, 8 * (1 + hash(r["stack"]) % 4)).items()
                if k in ("width", "padded_width", "row_bytes", "padded_row_bytes")
            }
        )
    result = analyze(tmp_path, layout=layout)
    fig = result.figures
    assert (fig["tables"], fig["stacks"]) == (sum(sizes), len(sizes))
    assert fig["tables_per_stack_max"] == max(sizes) and fig["stacks_below_5"] == sum(s < 5 for s in sizes)
    assert fig["tables_per_stack_mean"] == pytest.approx(sum(sizes) / len(sizes))


def library_config(tables: list[tuple[str, int, str]], samples_per_sc: int, scs: int = 2) -> dict:
    """A config of f32 adagrad tables (name, width, combiner), one one-hot feature each, with the
    global batch that gives `samples_per_sc` samples to each of one chip's `scs` SparseCores."""
    return {
        "global_batch": samples_per_sc * scs,
        "tables": [
            {"name": n, "width": w, "combiner": c, "optimizer": "adagrad", "dtype": "f32"} for n, w, c in tables
        ],
        "features": [{"name": f"f{n}", "table": n, "multi_hot": 1} for n, _, _ in tables],
        "sparsecore": {"stack_activation_mem_bytes_limit": 2 << 20},
    }


@pytest.mark.parametrize(
    ("samples", "library_stacks"),
    [
        (1024, 1),  # 16 x 1,024 x 4 = 64 KiB of activations per table: all 6 fit one 2 MiB stack
        (12_288, 3),  # 768 KiB per table: two fit in 2 MiB (1.5 MiB), three do not (2.25 MiB)
        (65_536, 6),  # 4 MiB per table: each is a stack of its own, as the library stacks them
    ],
)
def test_too_few_counts_the_stacks_the_library_would_make(tmp_path, samples, library_stacks):
    """One chip's SparseCores take large shares of the batch, so the library's activation bound
    splits stacks of wide tables: stacks it keeps apart cannot be merged by turning stacking on."""
    run = small_stacks_run(6)
    config = library_config([(f"t{i}", 16, "sum") for i in range(6)], samples)
    result = analyze(tmp_path, **run, config=config, hardware={"sparsecores_per_chip": 2})
    found = [f for f in result.findings if f.rule == "too_few_stacked_tables"]
    if library_stacks == 6:
        assert found == []
        return
    (f,) = found
    assert f.evidence["stacks_if_stacked"] == library_stacks
    assert f.evidence["extra_ops_per_step"] == (6 - library_stacks) * 2  # forward + backward per stack


def test_too_few_keeps_combiners_apart(tmp_path):
    """Tables of different combiners never stack: 3 sum + 3 mean tables make 2 stacks at best."""
    run = small_stacks_run(6)
    config = library_config([(f"t{i}", 16, "sum" if i < 3 else "mean") for i in range(6)], 1024)
    (f,) = analyze(tmp_path, **run, config=config, hardware={"sparsecores_per_chip": 2}).findings
    assert f.evidence["stacks_if_stacked"] == 2 and f.evidence["extra_ops_per_step"] == 8


def test_narrow_table_in_a_wider_stack_is_padding(tmp_path):
    """The layout gives a stack's width (its widest table's); a width-2 table stacked with width-8
    ones has rows of 8 f32 (32 bytes) holding 8 bytes: 3/4 padding, by the config's own width."""
    layout = [table(f"t{i}", "s", 4, vocab=1600, width=8) for i in range(4)]
    config = {
        "tables": [{"name": f"t{i}", "width": 2 if i == 0 else 8} for i in range(4)],
        "features": [{"name": "f0", "table": "t0", "multi_hot": 8}]
        + [{"name": f"f{i}", "table": f"t{i}", "multi_hot": 1} for i in range(1, 4)],
    }
    ops = [("s", "sc_forward", 0, 0, 1000, 5000)]
    (f,) = [f for f in analyze(tmp_path, layout=layout, ops=ops, config=config).findings if f.rule == "padding_waste"]
    assert f.entities["tables"] == ["t0"] and f.value == pytest.approx(3 / 4)
    assert f.evidence["row_padding_bytes"] == 1600 * (32 - 8)
    assert f.evidence["share_of_table_bytes"] == pytest.approx(1 / 4)
    assert f.evidence["share_of_lookups"] == pytest.approx(8 / 11)  # t0's 8 of the stack's 11 IDs per sample
    assert f.severity == "critical" and f.fix["set"] == {"tables.t0.width": 8}
    (tmp_path / "x").mkdir()
    assert analyze(tmp_path / "x", layout=layout, ops=ops).findings == []  # without the config: invisible


@pytest.mark.parametrize(("width", "severity"), [(16, "info"), (8, "info"), (4, "critical")])
def test_int8_rows_padded_by_their_element_type_are_info(tmp_path, width, severity):
    """An int8 row of width 8-31 is narrow by its 1-byte elements: its f32 activations and
    gradients (width x 4 >= 32 bytes) carry no padding, so the padding is the table rows' alone."""
    layout = [table("q", "q", 1, vocab=1600, width=width, dtype_bytes=1), table("w", "w", 1, vocab=1600, width=64)]
    (f,) = [f for f in analyze(tmp_path, layout=layout).findings if f.rule == "padding_waste"]
    assert f.value == pytest.approx(1 - width / 32) and f.severity == severity
    assert (f.fix is None) == (severity == "info")


def test_too_many_without_minibatches_whose_split_hides_nothing_is_info(tmp_path):
    """101 tables in one stack, no minibatches, and no SparseCore all-to-all on the step: a split
    could hide nothing, and adds a forward and a backward pass at the fixed 1,000 ps each per
    SparseCore and step (-2,000 / 20,000 ps of the step), so the finding is info."""
    layout = [table(f"t{i}", "stack_0", 101, vocab=1600, width=32) for i in range(101)]
    ops = [
        ("stack_0", cat, s, sc, ids, 1000 + 2 * ids)
        for s in range(4)
        for sc in range(2)
        for cat in ("sc_forward", "sc_backward")
        for ids in [(3 * s + sc) % 11 * 10 + 10]
    ]
    (f,) = analyze(tmp_path, layout=layout, ops=ops, steps=4, minibatches={"stack_0": 1}).findings
    assert f.rule == "too_many_stacked_tables" and f.evidence["cause"] == "size"
    assert f.evidence["added_fixed_ps_per_step"] == pytest.approx(2000)
    assert f.evidence["net_if_all_hidden_share"] == pytest.approx(-2000 / STEP_PS)
    assert f.severity == "info" and "gains little" in f.recommendation

"""configs/untuned/ (the workloads `scprof tune` is judged on, benchmarks/tune_vs_grid.py):
each loads, is untuned as its header says, matches its header's claims (generation, chips,
tables, widths, ID distributions, host- or SparseCore-bound, minibatching), records, and
the set covers the issue's ranges (v4/v5p/v6e, 1-8 chips, 2-200 tables, widths 1-128,
Zipf and hot-set IDs, at least two host-bound and two SparseCore-bound)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from sim_backend.config_load import load_config
from sim_backend.recording.record import record_run

REPO = Path(__file__).resolve().parents[2]
UNTUNED = sorted((REPO / "configs" / "untuned").glob("*.toml"))
NAMES = [p.name for p in UNTUNED]


def header(path: Path) -> str:
    """The leading comment block, as one line of text."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def claims(path: Path) -> dict:
    """What the header says: generation, chips, tables, widths, distributions, bound."""
    text = header(path)
    m = re.search(r"\b(v4|v5p|v6e) x (\d+) chips?\b", text)
    assert m, f"{path.name}: the header names no '<generation> x <n> chips'"
    tables = re.search(r"\b(\d+) tables\b", text)
    widths = re.search(r"\bwidths? (\d+(?:(?:, | and |-)\d+)*)", text)
    assert tables and widths, f"{path.name}: the header gives no table count or widths"
    bound = {"HOST-BOUND", "SPARSECORE-BOUND"} & set(re.findall(r"[A-Z]+-BOUND", text))
    assert len(bound) == 1, f"{path.name}: the header says neither or both of HOST-BOUND / SPARSECORE-BOUND"
    mb = "with minibatching" in text
    assert mb != ("no minibatching" in text), f"{path.name}: the header must say 'with' or 'no minibatching'"
    return {
        "generation": m.group(1),
        "chips": int(m.group(2)),
        "tables": int(tables.group(1)),
        "widths": [int(w) for w in re.findall(r"\d+", widths.group(1))],
        "zipf": "Zipf" in text,
        "hot_set": "hot-set" in text,
        "bound": bound.pop(),
        "minibatching": mb,
        "untuned_line": "Untuned:" in text,
    }


def test_there_are_six_to_eight_configs():
    assert 6 <= len(UNTUNED) <= 8, NAMES


@pytest.mark.parametrize("path", UNTUNED, ids=NAMES)
def test_config_matches_its_header(path):
    cfg = load_config(str(path))
    c = claims(path)
    assert c["untuned_line"], f"{path.name}: no 'Untuned:' line saying what is untuned"
    assert cfg.hardware.generation == c["generation"]
    assert cfg.hardware.num_chips == c["chips"]
    assert len(cfg.tables) == c["tables"]
    widths = [t.width for t in cfg.tables]
    assert (min(widths), max(widths)) == (min(c["widths"]), max(c["widths"]))
    assert set(widths) <= set(range(min(c["widths"]), max(c["widths"]) + 1))
    dists = {f.distribution for f in cfg.features}
    assert ("zipf" in dists) == c["zipf"] and ("hot_set" in dists) == c["hot_set"]
    assert dists <= {"zipf", "hot_set"}
    if c["bound"] == "HOST-BOUND":  # few threads, no prefetch
        assert cfg.flags.maximum_parallel_iterations == 1
        assert cfg.host.num_threads <= 2


@pytest.mark.parametrize("path", UNTUNED, ids=NAMES)
def test_config_is_untuned(path):
    """Limits set by hand as one default for every stack (no file, no FDO stats, no per-stack,
    per-table or per-table-total limits: nothing derived from the IDs; jax-tpu-embedding's own
    default, 256, would abort most of them), no stack cap, no limit estimation, pipelining
    on, no dropping: the levers the grid and the tuner move start where a user who set
    nothing per stack would be."""
    cfg = load_config(str(path))
    sc = cfg.sparsecore
    assert sc.stack_max_ids_per_partition is None and sc.stack_max_unique_ids_per_partition is None
    assert not cfg.flags.fdo_stats_dir
    assert sc.max_ids_per_table is None and sc.max_unique_ids_per_table is None
    assert all(t.max_ids_per_partition is None and t.max_unique_ids_per_partition is None for t in cfg.tables)
    assert cfg.flags.xla_sparse_core_max_ids_file == "" and not cfg.flags.xla_sparse_core_estimate_max_ids
    assert sc.max_tables_per_stack == 0 and not sc.disable_table_stacking and not sc.allow_id_dropping
    assert not cfg.flags.tf_xla_disable_full_embedding_pipelining
    assert cfg.flags.maximum_parallel_iterations in (1, 2)


def test_set_covers_the_issue_ranges():
    cfgs = [load_config(str(p)) for p in UNTUNED]
    cl = [claims(p) for p in UNTUNED]
    assert {c.hardware.generation for c in cfgs} == {"v4", "v5p", "v6e"}
    assert {c.hardware.num_chips for c in cfgs} == {1, 2, 4, 8}
    n_tables = [len(c.tables) for c in cfgs]
    assert (min(n_tables), max(n_tables)) == (2, 200)
    widths = {t.width for c in cfgs for t in c.tables}
    assert (min(widths), max(widths)) == (1, 128)
    assert {f.distribution for c in cfgs for f in c.features} == {"zipf", "hot_set"}
    assert sum(c["bound"] == "HOST-BOUND" for c in cl) >= 2
    assert sum(c["bound"] == "SPARSECORE-BOUND" for c in cl) >= 2
    assert any(c["minibatching"] for c in cl) and not all(c["minibatching"] for c in cl)


@pytest.mark.parametrize("path", UNTUNED, ids=NAMES)
def test_config_records_as_its_header_says(path, tmp_path):
    """Records (no compile error, no OOM, no dropped IDs), and chip 0's time is spent as
    the header says: SparseCore-bound = the SparseCore share is the largest; host-bound =
    waiting on input plus idle outweigh device work; minibatching or not."""
    c = claims(path)
    r = record_run(str(path), [], path.stem, 6, str(tmp_path))
    assert r.dropped_ids == 0
    if c["bound"] == "SPARSECORE-BOUND":
        assert r.share_sc > max(r.share_host, r.share_tc, r.share_idle), r
    else:
        assert r.share_host + r.share_idle > r.share_sc + r.share_tc, r
    assert (r.minibatches_per_step > 1) == c["minibatching"], r.minibatches_per_step


def _tune_vs_grid():
    spec = importlib.util.spec_from_file_location("tune_vs_grid", REPO / "benchmarks" / "tune_vs_grid.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grid_is_the_issues_64_points():
    """pipelining x prefetch 1/2/4/8 x derived limits x threads x1/x2 x stack cap {none,
    half the largest stack}: 64 distinct points (v5px4: 8 threads, stacks of 20 -> cap 10)."""
    mod = _tune_vs_grid()
    path = str(REPO / "configs" / "untuned" / "v5px4_hotset_scbound.toml")
    points = mod.grid_points(path)
    assert len(points) == 64
    keys = {(tuple(sorted(p["set"].items())), p["derive_limits"]) for p in points}
    assert len(keys) == 64
    values = lambda k: {p["set"][k] for p in points}  # noqa: E731
    assert values("flags.tf_xla_disable_full_embedding_pipelining") == {False, True}
    assert values("flags.maximum_parallel_iterations") == {1, 2, 4, 8}
    assert values("host.num_threads") == {8, 16}
    assert values("sparsecore.max_tables_per_stack") == {0, 10}
    assert {p["derive_limits"] for p in points} == {False, True}

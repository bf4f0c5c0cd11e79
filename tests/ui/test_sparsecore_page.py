"""The SparseCore page (ui/pages/sparsecore.py): charts on honest scales, tables in natural order,
against the store's sc_partition_stats."""

from __future__ import annotations

import pytest

from profiler.store import Store
from tests.ui.dashkit import find_id
from tests.ui.pages_store import run_id
from tests.ui.test_data import data_table_of
from ui import data as ui_data


@pytest.fixture
def store(pages_db):
    with Store.open(pages_db, read_only=True) as s:
        yield s


def sparsecore_page(store: Store, name: str):
    from ui.pages.sparsecore import render_sparsecore

    run = run_id(store, name)
    steps = ui_data.clamp_steps(ui_data.step_bounds(store, run), None)
    return render_sparsecore(store, {"run": run, "steps": list(steps), "tables": [], "metric": "ids"})


def test_limit_ratio_scale_starts_at_zero_and_marks_the_limit(store):
    """A ratio to the limit cannot be negative: the scale runs from 0, with 1.0 (the limit) a tick;
    before, a diverging scale centred on 1 ran from -15 to +15."""
    run = run_id(store, "skewed")
    ratio_ref = store.rows(
        "SELECT max(ids / max_ids_per_partition) AS r FROM sc_partition_stats WHERE run_id = ?", [run]
    )[0]["r"]
    (heat,) = find_id(sparsecore_page(store, "skewed"), "sc-ratio").figure.data
    assert heat.zmin == 0 and heat.zmid is None and heat.zmax >= ratio_ref
    assert 1.0 in heat.colorbar.tickvals and "1 = limit" in heat.colorbar.ticktext
    assert all(v >= 0 for v in heat.colorbar.tickvals)


def test_skew_axis_starts_at_balanced_and_counts_axis_at_zero(store):
    fig = find_id(sparsecore_page(store, "skewed"), "sc-skew").figure
    assert fig.layout.yaxis.range[0] == 1.0 and fig.layout.yaxis.range[1] >= 1.5
    assert fig.layout.yaxis2.range[0] == 0


def test_tables_are_in_natural_order(store):
    run = run_id(store, "skewed")
    names = [
        r["t"] for r in store.rows("SELECT DISTINCT table_name AS t FROM sc_partition_stats WHERE run_id = ?", [run])
    ]
    expected = sorted(names, key=lambda t: int(t.lstrip("t")))  # t0, t1, t2, ..., t10, t11
    assert len(expected) > 10
    table = find_id(sparsecore_page(store, "skewed"), "sc-tables")
    assert [row[0] for row in data_table_of(table)["rows"]] == expected
    from ui.pages.sparsecore import layout_sparsecore

    dropdown = find_id(layout_sparsecore(store, {"run": str(run)}), "sparsecore-tables")
    assert dropdown.options == expected

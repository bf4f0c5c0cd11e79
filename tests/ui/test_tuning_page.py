"""The Tuning page (ui/pages/tuning.py): a trial's reason shown whole, in a wrapping column."""

from __future__ import annotations

from profiler.store import Store
from tests.ui.dashkit import find_id
from tests.ui.pages_store import run_id
from tests.ui.test_data import data_table_of


def test_tuning_reasons_are_shown_whole_in_a_wrapping_column(whatif_db, tmp_path):
    from tests.ui.pages_store import LONG_REASON, with_long_reason
    from ui.pages.tuning import render_tuning

    db = with_long_reason(whatif_db, tmp_path / "long.duckdb")
    with Store.open(db, read_only=True) as s:
        table = find_id(render_tuning(s, {"run": run_id(s, "baseline")}), "tuning-trials")
    spec = data_table_of(table)
    cells = [(row, i) for row in spec["rows"] for i, t in enumerate(row) if t == LONG_REASON]
    assert len(cells) == 1 and spec["wrap"][cells[0][1]]  # whole, not cut at 100 characters; wrapped

"""Names from the data (runs, ops, tracks, counters; an imported capture sets them) are shown as
written: Plotly reads <b>, <a href>, <br> and %{...} in names and hover text, so they are escaped.
(The Timeline's event details: tests/ui/test_event_details.py.)"""

from __future__ import annotations

from profiler.store import Store
from tests.ui.conftest import renamed_copy
from tests.ui.test_data import find
from ui import render
from ui.pages.compare import render_compare

MARKUP = "<a href='https://evil.example'>click</a> %{x} & <br>"


def test_plain_text_for_plotly():
    assert render.plain(MARKUP) == "&lt;a href='https://evil.example'&gt;click&lt;/a&gt; &#37;{x} &amp; &lt;br&gt;"
    assert render.plain("baseline") == "baseline"


def test_run_names_in_compare_charts_are_text(ui_db, tmp_path):
    db, ids = renamed_copy(ui_db, tmp_path / "names.duckdb", MARKUP)
    with Store.open(str(db), read_only=True) as store:
        page = render_compare(store, {"base": ids[0], "cand": ids[1]})
    names = [t.name for t in find(page, "compare-hist").figure.data]
    assert names[0] == "baseline: " + render.plain(MARKUP) and not any("<a" in n for n in names)

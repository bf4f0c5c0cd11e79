"""The UI's presentation, data level: repeated findings grouped into one card, evidence labelled and
formatted by its keys' units, SparseCore charts on honest scales, natural table order, the SQL
console's error text, schema browser and number cells, times in µs."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from profiler.store import Store
from scprof.cli import main
from tests.ui.polish_store import build_polish_store
from tests.ui.test_data import data_table_of, text_of
from ui import data as D
from ui.evidence import evidence_label, format_evidence
from ui.pages.findings import render_findings


@pytest.fixture(scope="module")
def polish_db(tmp_path_factory) -> str:
    return build_polish_store(tmp_path_factory.mktemp("polish-store"))


@pytest.fixture
def store(polish_db):
    with Store.open(polish_db, read_only=True) as s:
        yield s


def run_id(store: Store, name: str) -> int:
    return store.rows("SELECT run_id FROM runs WHERE name = ?", [name])[0]["run_id"]


def analyze_json(db: str, run: str) -> dict:
    """`scprof analyze RUN --json`'s document: the reference the UI must agree with."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["analyze", run, "--json", "--db", db]) == 0
    return json.loads(out.getvalue())


def walk(component):
    """Every component of a Dash tree, depth first."""
    if isinstance(component, list | tuple):
        for c in component:
            yield from walk(c)
        return
    if component is None or isinstance(component, str | int | float):
        return
    yield component
    yield from walk(getattr(component, "children", None))


def with_class(tree, name: str) -> list:
    return [c for c in walk(tree) if name in (getattr(c, "className", None) or "").split()]


def test_repeated_findings_of_one_rule_are_one_card_with_a_table_most_severe_first(polish_db, store):
    findings = analyze_json(polish_db, "skewed")["findings"]
    rules = list(dict.fromkeys(f["rule"] for f in findings))
    skew = [f for f in findings if f["rule"] == "sc_load_skew"]
    assert len(skew) > 10  # the defect: one card per table, a 7,000 px page
    body = render_findings(store, {"run": run_id(store, "skewed"), "sev": ["critical", "warning", "info"]})
    cards = with_class(body, "finding")
    assert len(cards) == len(rules)  # one card per rule
    (group,) = with_class(body, "finding-grouped")
    (table,) = with_class(group, "group-table")
    body_rows = data_table_of(table)["rows"]
    assert len(body_rows) == len(skew)  # every affected table, the first few shown, the rest folded
    worst = max((f for f in skew if f["severity"] == "critical"), key=lambda f: f["value"])
    first = " ".join(body_rows[0])
    assert first.startswith("critical") and f" {worst['entities']['tables'][0]} " in f" {first} "
    assert f"{worst['value']:.3g}" in first
    assert worst["title"] in text_of(group)  # the most severe one leads the card
    assert "more" in text_of(with_class(group, "group-more"))


def test_a_groups_more_rows_are_in_its_one_table_under_one_header(polish_db, store):
    """The "N more" rows were a second table repeating the header: now one table, one header row,
    the rows after the first SHOWN_ROWS hidden (style.css) while the toggle before it is closed."""
    from ui.pages.findings import SHOWN_ROWS

    skew = [f for f in analyze_json(polish_db, "skewed")["findings"] if f["rule"] == "sc_load_skew"]
    assert len(skew) > SHOWN_ROWS
    body = render_findings(store, {"run": run_id(store, "skewed"), "sev": ["critical", "warning", "info"]})
    (group,) = with_class(body, "finding-grouped")
    (table,) = [c for c in walk(group) if c.__class__.__name__ == "Table"]
    spec = data_table_of(table)  # one table: one head (its columns), its rows (data_views.js builds them)
    assert spec["columns"][0] == "severity" and len(spec["rows"]) == len(skew)
    assert spec["more_after"] == SHOWN_ROWS  # the rows after it get the class "more-row" (folded)
    (more,) = with_class(group, "group-more")
    assert f"{len(skew) - SHOWN_ROWS} more" in text_of(more)
    assert not [c for c in walk(more) if c.__class__.__name__ == "Table"]  # the toggle holds no table of its own


def test_evidence_keys_read_as_words_and_format_by_their_unit_suffix():
    assert evidence_label("peak_ts_ps") == "peak at"
    assert format_evidence("peak_ts_ps", 47_320_039_028, start_ps=20_039_028) == "47.3 ms from the run's start"
    assert evidence_label("hbm_peak_bytes") == "HBM peak" and format_evidence("hbm_peak_bytes", 3 * 2**30) == "3 GiB"
    assert evidence_label("estimated_overhead_ps_per_step") == "estimated overhead per step"
    assert format_evidence("estimated_overhead_ps_per_step", 86_144_807.6) == "86.1 µs"
    assert evidence_label("idle_ps") == "idle time" and format_evidence("idle_ps", 1_013_962_046) == "1.01 ms"
    assert format_evidence("sparsecore_input_wait_share", 0.5257) == "52.6%"
    assert format_evidence("share_of_table_bytes", 0.25) == "25.0%"  # a share, not bytes
    assert format_evidence("dropped_ids", 156704) == "156,704" and evidence_label("dropped_ids") == "dropped IDs"
    assert format_evidence("worst_max_over_mean", 8.1384) == "8.14×"
    assert format_evidence("persistence", 1.0) == "100.0%"
    assert format_evidence("pipelining_disabled", True) == "yes"


def test_findings_page_shows_the_hbm_peak_time_as_a_time_from_the_start(polish_db, store):
    (f,) = [f for f in analyze_json(polish_db, "hbm")["findings"] if "peak_ts_ps" in f["evidence"]]
    run = run_id(store, "hbm")
    start_ps = store.rows("SELECT first_ps FROM runs WHERE run_id = ?", [run])[0]["first_ps"]
    text = text_of(render_findings(store, {"run": run, "sev": ["critical", "warning", "info"]}))
    assert "peak_ts_ps" not in text and "hbm_peak_bytes" not in text
    assert f"peak at {format_evidence('peak_ts_ps', f['evidence']['peak_ts_ps'], start_ps)}" in text
    expected_gib = f["evidence"]["hbm_peak_bytes"] / 2**30
    assert f"HBM peak {expected_gib:.3g} GiB" in text


def sparsecore_page(store: Store, name: str):
    from ui.pages.sparsecore import render_sparsecore

    run = run_id(store, name)
    steps = D.clamp_steps(D.step_bounds(store, run), None)
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


def test_flops_read_in_si_and_times_in_micro_seconds(tmp_path):
    from profiler.units import format_ps, format_value
    from tests.ui.test_event_details import BIG_FLOPS, MARKUP, event_details, record_store
    from ui.render import time_unit

    assert format_value(65_660_780_544, "flop") == "65.7 GFLOP"
    db = record_store(tmp_path)  # an event with 65,660,780,544 FLOPs, 1.5 µs long
    with Store.open(db, read_only=True) as store:
        events = {r["name"]: r for r in store.rows("SELECT run_id, event_id, name FROM slices")}
    got = event_details(db, MARKUP, events)
    assert dict(got["fields"])["flops"] == "65.7 GFLOP" and str(BIG_FLOPS) not in str(got["fields"])
    assert format_ps(got["dur_ps"]) == "1.5 µs"
    assert format_ps(982_300_000) == "982 µs" and time_unit(5e8)[0] == "µs"


def find_id(tree, id_):
    return next(c for c in walk(tree) if getattr(c, "id", None) == id_)


def test_sql_error_keeps_duckdb_line_breaks_so_the_caret_points_at_the_word(store):
    from ui.pages.sql import render_sql

    body = render_sql(store, {"q": "SELECT run_id,\n  name\nFORM runs", "rows": 10})
    pre = find_id(body, "sql-error")
    assert pre.__class__.__name__ == "Pre" and "\n" in pre.children
    lines = pre.children.split("\n")
    (i,) = [n for n, line in enumerate(lines) if line.startswith("LINE 3:")]
    caret = lines[i + 1]
    assert lines[i][caret.index("^") : caret.rindex("^") + 1] == "runs"  # under the word it names


def test_sql_numbers_right_aligned_with_separators_text_left(store):
    from ui.pages.sql import number_text, render_sql

    ref = {r["name"]: r["events"] for r in store.rows("SELECT name, events FROM runs")}
    table = find_id(
        render_sql(store, {"q": "SELECT name, events, events / 3.0 AS third FROM runs", "rows": 10}), "sql-result"
    )
    spec = json.loads(getattr(table, "data-table"))  # its cells, built in the browser (data_views.js)
    assert spec["columns"] == ["name", "events", "third"] and spec["num"] == [False, True, True]
    assert len(spec["rows"]) == len(ref)
    for name, events, third in spec["rows"]:
        assert events == f"{ref[name]:,}" and third == number_text(ref[name] / 3)
    assert number_text(2_657_613_573.0) == "2,657,613,573" and number_text(0.000123456) == "0.000123456"
    assert number_text(1234.56789) == "1,234.57" and number_text(12345678) == "12,345,678"


def test_sql_schema_browser_lists_every_table_and_view_with_columns(store):
    from ui.pages.sql import layout_sql

    browser = find_id(layout_sql(store, {}), "sql-schema")
    items = [c for c in walk(browser) if c.__class__.__name__ == "Details"]
    tables = {getattr(c, "data-insert", None) for c in walk(browser)} - {None}
    expected = {r["table_name"] for r in store.rows("SELECT table_name FROM information_schema.tables")}
    assert expected <= tables and {"runs", "step_times", "slices", "sc_partition_stats"} <= tables
    # a table's columns are data, listed in the browser when it is unfolded (sql_console.js): a
    # component per column cost the page's first view 200 ms
    assert sum(1 for _ in walk(browser)) == 3 * len(items) + 2
    (runs,) = [i for i in items if getattr(i.children.children, "data-insert", None) == "runs"]
    columns = json.loads(getattr(runs, "data-columns"))
    expected_columns = store.rows(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'runs' ORDER BY ordinal_position"
    )
    assert [c[:2] for c in columns] == [[r["column_name"], r["data_type"]] for r in expected_columns]
    assert ["events", "BIGINT"] in [c[:2] for c in columns]
    assert getattr(runs.children, "data-about") == f" table · {len(expected_columns)} columns"


def test_tuning_reasons_are_shown_whole_in_a_wrapping_column(whatif_db, tmp_path):
    from tests.ui.polish_store import LONG_REASON, with_long_reason
    from ui.pages.tuning import render_tuning

    db = with_long_reason(whatif_db, tmp_path / "long.duckdb")
    with Store.open(db, read_only=True) as s:
        table = find_id(render_tuning(s, {"run": run_id(s, "baseline")}), "tuning-trials")
    spec = data_table_of(table)
    cells = [(row, i) for row in spec["rows"] for i, t in enumerate(row) if t == LONG_REASON]
    assert len(cells) == 1 and spec["wrap"][cells[0][1]]  # whole, not cut at 100 characters; wrapped


def test_run_header_names_hardware_only_as_far_as_the_trace_says():
    from ui.pages.common import hardware_text

    assert hardware_text("v5p", 4) == "v5p × 4 chips"
    assert hardware_text("CPU", 1) == "CPU × 1 chip"
    assert hardware_text("", 2) == "2 chips"
    assert hardware_text("v6e", None) == "v6e"
    assert hardware_text(None, 0) == "hardware not recorded"  # was "? × ? chips"

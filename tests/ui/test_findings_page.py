"""The Findings page (ui/pages/findings.py) against `scprof analyze --json` on the same runs:
repeated findings of one rule are one card with one table, most severe first, and evidence reads
as words with its unit."""

from __future__ import annotations

import pytest

from profiler.store import Store
from tests.ui.dashkit import walk, with_class
from tests.ui.pages_store import analyze_json, run_id
from tests.ui.test_data import data_table_of, text_of
from ui.evidence import format_evidence
from ui.pages.findings import render_findings


@pytest.fixture
def store(pages_db):
    with Store.open(pages_db, read_only=True) as s:
        yield s


def test_repeated_findings_of_one_rule_are_one_card_with_a_table_most_severe_first(pages_db, store):
    findings = analyze_json(pages_db, "skewed")["findings"]
    rules = list(dict.fromkeys(f["rule"] for f in findings))
    skew = [f for f in findings if f["rule"] == "sc_load_skew"]
    assert len(skew) > 10  # one card per table would make a 7,000 px page
    body = render_findings(store, {"run": run_id(store, "skewed"), "sev": ["critical", "warning", "info"]})
    cards = with_class(body, "finding")
    assert len(cards) == len(rules)  # one card per rule
    (group,) = with_class(body, "finding-grouped")
    (table,) = with_class(group, "group-table")
    body_rows = data_table_of(table)["rows"]
    assert len(body_rows) == len(skew)  # every affected table, the first few shown, the rest folded
    rank = {"critical": 0, "warning": 1, "info": 2}
    most = min(rank[f["severity"]] for f in skew)  # the skew's severity is what it costs: any level
    worst = max((f for f in skew if rank[f["severity"]] == most), key=lambda f: f["value"])
    first = " ".join(body_rows[0])
    assert first.startswith(worst["severity"]) and f" {worst['entities']['tables'][0]} " in f" {first} "
    assert f"{worst['value']:.3g}" in first
    assert worst["title"] in text_of(group)  # the most severe one leads the card
    assert "more" in text_of(with_class(group, "group-more"))


def test_a_groups_more_rows_are_in_its_one_table_under_one_header(pages_db, store):
    """The "N more" rows were a second table repeating the header: now one table, one header row,
    the rows after the first SHOWN_ROWS hidden (style.css) while the toggle before it is closed."""
    from ui.pages.findings import SHOWN_ROWS

    skew = [f for f in analyze_json(pages_db, "skewed")["findings"] if f["rule"] == "sc_load_skew"]
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


def test_findings_page_shows_the_hbm_peak_time_as_a_time_from_the_start(pages_db, store):
    (f,) = [f for f in analyze_json(pages_db, "hbm")["findings"] if "peak_ts_ps" in f["evidence"]]
    run = run_id(store, "hbm")
    start_ps = store.rows("SELECT first_ps FROM runs WHERE run_id = ?", [run])[0]["first_ps"]
    text = text_of(render_findings(store, {"run": run, "sev": ["critical", "warning", "info"]}))
    assert "peak_ts_ps" not in text and "hbm_peak_bytes" not in text
    assert f"peak at {format_evidence('peak_ts_ps', f['evidence']['peak_ts_ps'], start_ps)}" in text
    expected_gib = f["evidence"]["hbm_peak_bytes"] / 2**30
    assert f"HBM peak {expected_gib:.3g} GiB" in text

"""The UI's presentation in headless Chromium at 1,400 and 1,600 px: a skewed run's findings grouped
into one card per rule, slider tooltips that cover nothing until dragged, the SparseCore page, the
SQL console (an error's caret in place, Ctrl+Enter, the schema browser, numbers right-aligned) and
the Tuning page's reasons wrapped within the page.

Fixtures as tests/ui/test_browser.py (Debian's chromium, the app served by werkzeug on loopback),
over stores of their own (tests/ui/pages_store.py). Screenshots land in test-artifacts/screenshots/.
"""

from __future__ import annotations

import pytest

from tests.ui.browserkit import run_ids, serve, settle, shot, watched_page
from tests.ui.pages_store import LONG_REASON, build_pages_store, with_long_reason
from ui.pages.findings import SHOWN_ROWS

WIDTHS = (1400, 1600)


@pytest.fixture(scope="module")
def pages_server(tmp_path_factory):
    """(url, run ids by name) of a server over the pages store (skewed, hbm, failed)."""
    db = build_pages_store(tmp_path_factory.mktemp("pages-browser"))
    with serve(db) as (url, app):
        yield url, run_ids(app)


@pytest.fixture(scope="module")
def tuning(whatif_db, tmp_path_factory):
    """(url, run ids by name) of a server over the what-if store with a long failed-trial reason."""
    db = with_long_reason(whatif_db, tmp_path_factory.mktemp("pages-tuning") / "long.duckdb")
    with serve(db) as (url, app):
        yield url, run_ids(app)


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def page(browser, request):  # noqa: F811 - the imported fixture
    """A page of the given width that fails the test on any console error or uncaught exception."""
    with watched_page(browser, request.param) as pg:
        yield pg


def test_skewed_findings_are_one_card_per_rule(pages_server, page):
    url, ids = pages_server
    page.goto(f"{url}/findings?run={ids['skewed']}")
    page.wait_for_selector(".finding-grouped .group-table")
    settle(page)
    counts = page.inner_text("#findings-counts")
    total = sum(int(part.split()[0]) for part in counts.split(" · "))
    cards = page.locator(".finding").count()
    assert total > 20 and cards <= 5  # 27 findings: one card per rule, not one per table
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 2500  # was about 7,000 px
    group = page.locator(".finding-grouped")
    rows = group.locator("tbody tr")
    visible = "els => els.filter(e => e.getBoundingClientRect().height > 0).length"
    assert rows.count() == total - (cards - 1)  # every affected table in the group's one table
    assert rows.evaluate_all(visible) == SHOWN_ROWS  # the rest folded under "N more"
    group.locator(".group-more summary").click()
    assert rows.evaluate_all(visible) == rows.count()
    assert group.locator("thead tr").count() == 1  # one header: the more rows do not repeat it
    shot(page, f"pages-findings-skewed-{page.viewport_size['width']}")


def test_findings_evidence_reads_as_words(pages_server, page):
    url, ids = pages_server
    page.goto(f"{url}/findings?run={ids['hbm']}")
    page.wait_for_selector("table.evidence")
    settle(page)
    text = page.inner_text("table.evidence")
    assert "peak at" in text and "from the run's start" in text and "peak_ts_ps" not in text
    assert "HBM peak" in text and "GiB" in text


def test_slider_tooltips_cover_nothing_until_dragged(pages_server, page):
    url, ids = pages_server
    page.goto(f"{url}/sparsecore?run={ids['skewed']}")
    page.wait_for_selector("#sc-heatmap .js-plotly-plot, #sc-heatmap.js-plotly-plot")
    settle(page)
    shown = page.evaluate(
        "[...document.querySelectorAll('#sparsecore-steps .dash-slider-tooltip, #sparsecore-steps .rc-slider-tooltip')]"
        ".filter(e => e.getBoundingClientRect().height > 0).length"
    )
    assert shown == 0
    assert "steps 0–4" in page.inner_text(".slider-range")  # the chosen range, as text beside the slider
    page.hover("#sparsecore-steps [role=slider] >> nth=0")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#sparsecore-steps .dash-slider-tooltip')]"
        ".some(e => e.getBoundingClientRect().height > 0)"
    )
    shot(page, f"pages-sparsecore-{page.viewport_size['width']}")


def test_sparsecore_page_scales(pages_server, page):
    url, ids = pages_server
    page.goto(f"{url}/sparsecore?run={ids['skewed']}")
    page.wait_for_selector("#sc-ratio .colorbar")
    settle(page)
    ticks = page.locator("#sc-ratio .colorbar .cbaxis text").all_text_contents()
    assert "1 = limit" in ticks and not any(t.startswith(("−", "-")) for t in ticks)
    skew_ticks = page.locator("#sc-skew .yaxislayer-above .ytick text").all_text_contents()
    assert skew_ticks and float(skew_ticks[0]) == 1.0  # from 1.0: perfectly balanced
    names = page.locator("#sc-tables tbody tr td:first-child").all_text_contents()
    assert names[:3] == ["t0", "t1", "t2"] and names.index("t10") == 10


def test_sql_console_error_keys_schema_and_numbers(pages_server, page):
    url, _ = pages_server
    page.goto(f"{url}/sql")
    page.wait_for_selector("#sql-schema")
    settle(page)
    page.fill("#sql-text", "SELECT run_id,\n  name\nFORM runs")
    page.press("#sql-text", "Control+Enter")
    page.wait_for_selector("#sql-error")
    settle(page)
    style = page.eval_on_selector("#sql-error", "e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).fontFamily]")
    assert style[0] == "pre" and "mono" in style[1]
    lines = page.inner_text("#sql-error").split("\n")
    (i,) = [n for n, line in enumerate(lines) if line.startswith("LINE 3:")]
    caret = lines[i + 1]
    assert lines[i][caret.index("^") : caret.rindex("^") + 1] == "runs"
    shot(page, f"pages-sql-error-{page.viewport_size['width']}")
    # the schema browser: open a table, click names to write the query
    page.fill("#sql-text", "SELECT name, events FROM ")
    page.click("#sql-text")
    page.press("#sql-text", "End")
    page.press("#sql-text", "Control+End")
    runs = page.locator("#sql-schema .schema-item", has=page.locator("summary [data-insert='runs']"))
    runs.locator("summary").click(position={"x": 2, "y": 6})  # the marker: unfold
    events = runs.locator("li[data-insert='events']")
    events.wait_for(state="visible")  # listed by the details' toggle event, which fires after the click
    assert events.evaluate("e => getComputedStyle(e, '::after').content") == '"BIGINT"'
    # listed when unfolded (sql_console.js), each column with its documentation (schema.py's COMMENT)
    assert events.get_attribute("title") == "Number of events."
    assert runs.locator("li").count() == int(runs.locator("summary").get_attribute("data-about").split()[2])
    runs.locator("summary [data-insert='runs']").click()
    assert page.input_value("#sql-text") == "SELECT name, events FROM runs"
    page.press("#sql-text", "Meta+Enter")
    page.wait_for_selector("#sql-result tbody tr")
    settle(page)
    align = page.eval_on_selector_all(
        "#sql-result tbody tr:first-child td", "tds => tds.map(td => getComputedStyle(td).textAlign)"
    )
    assert align[0] in ("left", "start") and align[1] == "right"
    events = page.locator("#sql-result tbody tr td:nth-child(2)").all_text_contents()
    assert any("," in e for e in events)  # the skewed run's thousands of events, with separators
    shot(page, f"pages-sql-result-{page.viewport_size['width']}")
    # a new query on the same page: the same table rebuilt from its new data; markup is text, a
    # null is NULL (not right-aligned)
    page.fill("#sql-text", "SELECT '<b id=\"x\">bold?</b>' AS markup, NULL::INTEGER AS n, 2 AS two")
    page.press("#sql-text", "Control+Enter")
    page.wait_for_function("() => document.querySelectorAll('#sql-result th').length === 3")
    settle(page)
    cells = page.eval_on_selector_all("#sql-result tbody td", "tds => tds.map(td => [td.textContent, td.className])")
    assert cells == [['<b id="x">bold?</b>', ""], ["NULL", ""], ["2", "num"]]
    assert page.locator("#x").count() == 0


def test_tuning_reasons_wrap_within_the_page(tuning, page):
    url, ids = tuning
    page.goto(f"{url}/tuning?run={ids['baseline']}")
    page.wait_for_selector("#tuning-trials tbody tr")
    settle(page)
    cell = page.locator("#tuning-trials td", has_text=LONG_REASON[:40])
    assert cell.inner_text() == LONG_REASON
    box = cell.bounding_box()
    assert box["x"] + box["width"] <= page.viewport_size["width"]
    wrap = page.eval_on_selector("#tuning-trials", "e => [e.scrollWidth, e.clientWidth]")
    assert wrap[0] <= wrap[1]  # no horizontal scrolling inside the table either
    shot(page, f"pages-tuning-{page.viewport_size['width']}")


def test_tables_and_cards_built_from_their_data(pages_server, page):
    """ui/assets/data_views.js on a table and a card grid added to a page: long text cut at `cut`
    characters (whole on hover), a wrap column whole, number columns right-aligned, a null cell's
    text, rows after `more_after` folded; cards' texts and figure paths; markup shown as text."""
    url, ids = pages_server
    page.goto(f"{url}/runs")
    page.wait_for_selector("#page .page-body")
    settle(page)
    long = "x" * 150
    spec = {
        "columns": ["name", "why", "n"],
        "num": [False, False, True],
        "wrap": [False, True, False],
        "cut": 100,
        "more_after": 1,
        "null": "NULL",
        "rows": [[long, long, "1"], ["<b id='t'>b</b>", None, "2"]],
    }
    cards = [
        {"label": "<i id='c'>l</i>", "value": "3", "detail": "d", "source": "a.b"},
        {"label": "m", "value": "4", "detail": "", "source": ""},
    ]
    built = page.evaluate(
        """([spec, cards]) => new Promise(done => {
             const t = document.createElement('table'); t.setAttribute('data-table', JSON.stringify(spec));
             const g = document.createElement('div'); g.setAttribute('data-kpis', JSON.stringify(cards));
             document.body.append(t, g);
             setTimeout(() => done({
               head: [...t.querySelectorAll('th')].map(e => [e.textContent, e.className]),
               rows: [...t.querySelectorAll('tbody tr')].map(r => [r.className,
                 [...r.children].map(e => [e.textContent, e.className, e.title])]),
               cards: [...g.querySelectorAll('.kpi')].map(e => [e.firstChild.textContent,
                 e.querySelector('.kpi-value').textContent, e.lastChild.textContent, e.dataset.source || null, e.title]),
               markup: document.querySelectorAll('#t, #c').length}), 50);
           })""",
        [spec, cards],
    )
    assert built["head"] == [["name", ""], ["why", ""], ["n", "num"]]
    assert built["rows"] == [
        ["", [["x" * 100 + "…", "", long], [long, "wrap", ""], ["1", "num", ""]]],
        ["more-row", [["<b id='t'>b</b>", "", ""], ["NULL", "", ""], ["2", "num", ""]]],
    ]
    assert built["cards"] == [
        ["<i id='c'>l</i>", "3", "d", "a.b", "scprof analyze --json: figures.a.b"],
        ["m", "4", "4", None, ""],  # no scope: the value is the card's last node
    ]
    assert built["markup"] == 0

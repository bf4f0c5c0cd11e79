"""The Overview and Memory pages in headless Chromium at 1600x1000, on an ok, a
host-bound, a failed run (no steps) and a real capture (tests/ui/overview_store.py): no console
error (a run without steps used to raise "A nonexistent object was used in an `Input`"), no
error text, every Overview card's number equal to `scprof analyze --json`'s figure at the path
the card names, the host-input wait in the step-time split, a failed compile's bytes on the
Memory page, SPMEM drawn. Screenshots in test-artifacts/screenshots/overview-*.png."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from scprof.cli import main
from tests.ui.browserkit import serve, settle, watched_page
from tests.ui.browserkit import shot as kit_shot
from tests.ui.overview_store import RUNS
from tests.ui.test_overview_figures import at, expected_text


@pytest.fixture(scope="module")
def served(overview_db):
    with serve(overview_db) as (url, app):
        yield url, app


@pytest.fixture(scope="module")
def figures(app, overview_db):
    """analyze --json's figures per run (the CLI, in this process: DuckDB's one instance per file)."""
    out = {}
    for name in RUNS:
        with contextlib.redirect_stdout(io.StringIO()) as f:
            assert main(["analyze", name, "--json", "--db", overview_db]) == 0
        out[name] = json.loads(f.getvalue())
    return out


@pytest.fixture
def page(browser):
    with watched_page(browser, 1600) as pg:
        yield pg


def shot(pg, name: str) -> None:
    kit_shot(pg, f"overview-{name}")


def no_error_text(pg) -> None:
    body = pg.inner_text("main")
    assert "internal error" not in body and "Error:" not in body, body[:2000]


@pytest.mark.parametrize("name", RUNS)
def test_overview_cards_are_analyze_figures_in_the_browser(server, page, run_ids, figures, name):
    page.goto(f"{server}/overview?run={run_ids[name]}")
    page.wait_for_selector("#overview-kpis")
    page.wait_for_selector("#overview-analysis h4")  # the top findings' heading: the analysis has rendered
    settle(page)
    no_error_text(page)
    cards = page.eval_on_selector_all(
        ".kpi",
        "els => els.map(e => ({source: e.dataset.source || null, label: e.firstChild.textContent,"
        " value: e.querySelector('.kpi-value').textContent}))",
    )
    assert cards
    for c in cards:
        if c["value"] == "-":
            continue
        assert c["source"], c
        assert c["value"] == expected_text(c["source"], at(figures[name]["figures"], c["source"])), c
    if name in ("host_bound", "real_host_bound"):
        (f,) = [f for f in figures[name]["findings"] if f["rule"] == "host_bound"]
        # a real capture's device: the card counts awaited input, the bar idle time while input ran
        bar, card = ("idle while the host ran input work", "device awaiting host input")
        if name == "host_bound":
            bar, card = ("TensorCore waiting for host input", "TensorCores waiting for host input")
        assert bar in page.inner_text("#overview-split")
        wait = [c for c in cards if c["label"] == card]
        assert wait and wait[0]["value"] == expected_text("x.share", f["value"])
    shot(page, name)


def test_memory_of_a_failed_compile_shows_its_bytes(server, page, run_ids):
    page.goto(f"{server}/memory?run={run_ids['spmem_overflow']}")
    page.wait_for_selector("#memory-spmem .js-plotly-plot .bars path, #memory-spmem .js-plotly-plot .point")
    settle(page)
    no_error_text(page)
    text = page.inner_text("#memory-body")
    assert "150,512 B" in text and "131,072 B" in text
    assert "KiB" in page.inner_text("#memory-spmem")  # the axis in KiB, not GiB
    shot(page, "memory-spmem_overflow")


def test_memory_of_an_ok_run(server, page, run_ids):
    page.goto(f"{server}/memory?run={run_ids['baseline']}&chips=0,1")
    page.wait_for_selector("#memory-peaks .js-plotly-plot")
    page.wait_for_selector("#memory-spmem .js-plotly-plot .bars path, #memory-spmem .js-plotly-plot .point")
    settle(page)
    no_error_text(page)
    assert all(f"TPU:{c}" in page.inner_text("#memory-peaks") for c in range(4))
    shot(page, "memory-baseline")

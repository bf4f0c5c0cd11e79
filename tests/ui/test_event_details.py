"""The Timeline's event details (GET /api/trace/event, shown by ui/assets/trace_panels.js) name every
typed field of an event (the list of profiler/trace_fields.py) with its unit, and show names and
arguments from the data as written: as JSON strings from the API, as text (never markup) in the panel."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from profiler.recorder import Recorder
from profiler.store import Store
from profiler.trace_fields import TYPED_FIELDS
from profiler.trace_to_store import ingest_trace
from ui.app import create_app

# An event with these typed fields set, and what its details read (by hand); any other typed
# field gets a value too and must have its row.
VALUES = {
    "step": 3,
    "table": "tbl_a",
    "sc": 2,
    "minibatch": 1,
    "ids": 12_345,
    "unique_ids": 6_789,
    "dropped_ids": 7,
    "bytes": 3 << 20,
    "flops": 1_000_000,
    "category": "sc_forward",
}
SHOWN = {
    "step": "3",
    "table": "tbl_a",
    "sc": "2",
    "minibatch": "1",
    "ids": "12,345",
    "unique_ids": "6,789",
    "dropped_ids": "7",
    "bytes": "3 MiB",
    "flops": "1 MFLOP",
    "category": "sc_forward",
}

# Markup in a name and an argument: shown as written, never read as HTML.
MARKUP = "<a href='https://evil.example'>click</a> %{x} & <br><b>x</b>"
ARG_KEY, ARG_VALUE = "<i>k</i>", "<b>v</b>"
BIG_FLOPS = 65_660_780_544  # reads 65.7 GFLOP, never 65,660,780,544


def record_store(directory) -> str:
    """A store of one run ("details") on one TensorCore track: `fusion.1` with every typed field
    set (VALUES), then an event named MARKUP with an argument ARG_KEY = ARG_VALUE, BIG_FLOPS and
    1.5 µs long."""
    values = {f.name: VALUES.get(f.name, "s" if f.is_string else 5) for f in TYPED_FIELDS}
    path = directory / "t.sctrace"
    with Recorder(str(path), run_name="details", start_time_unix_ns=0) as rec:
        tr = rec.track("/device:TPU:0", "XLA Ops", kind="tensorcore", chip=0, core=0)
        cols = {k: [v] if isinstance(v, str) else np.array([v], np.int64) for k, v in values.items()}
        cols["step"] = cols["step"].astype(np.int32)
        rec.emit(track=[tr], name=["fusion.1"], start_ps=[1_000], dur_ps=[5_000], **cols)
        rec.emit(
            track=[tr],
            name=[MARKUP],
            start_ps=[10_000],
            dur_ps=[1_500_000],
            flops=np.array([BIG_FLOPS], np.int64),
            args={ARG_KEY: [ARG_VALUE]},
        )
    db = str(directory / "s.duckdb")
    with Store.open(db) as store:
        ingest_trace(store, str(path))
    return db


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return record_store(tmp_path_factory.mktemp("event-details"))


@pytest.fixture(scope="module")
def events(db) -> dict[str, dict[str, Any]]:
    """name -> (run_id, event_id, dur_ps) of the run's events, from the store's slices view."""
    with Store.open(db, read_only=True) as store:
        return {r["name"]: r for r in store.rows("SELECT run_id, event_id, name, dur_ps FROM slices")}


def event_details(db: str, name: str, events) -> dict[str, Any]:
    e = events[name]
    r = create_app(db).server.test_client().get(f"/api/trace/event?run={e['run_id']}&id={e['event_id']}")
    assert r.status_code == 200 and r.mimetype == "application/json", r.get_data(as_text=True)
    return r.get_json()


def test_details_show_every_typed_field_with_its_unit(db, events):
    got = event_details(db, "fusion.1", events)
    assert [k for k, _ in got["fields"]] == [f.name for f in TYPED_FIELDS]
    assert {k: v for k, v in got["fields"] if k in SHOWN} == SHOWN


def test_flops_read_in_si(db, events):
    got = event_details(db, MARKUP, events)
    assert dict(got["fields"])["flops"] == "65.7 GFLOP" and "65,660,780,544" not in str(got)


def test_names_and_args_come_back_as_written(db, events):
    got = event_details(db, MARKUP, events)
    assert got["name"] == MARKUP and got["args"] == [[ARG_KEY, ARG_VALUE]]


def test_details_panel_sets_data_as_text():
    """trace_panels.js builds the DOM with textContent and text nodes only: no markup sink."""
    from tests.tracekit import REPO

    for js in sorted((REPO / "ui" / "assets").glob("trace_*.js")):
        text = js.read_text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser", text), js.name


def test_details_panel_shows_markup_literally(db, events, page):
    from tests.ui.browserkit import serve, settle, shot

    e = events[MARKUP]
    with serve(db) as (url, _app):
        page.goto(f"{url}/timeline?run={e['run_id']}&t0=0&t1=2000000&sel={e['event_id']}")
        page.wait_for_function("() => window.scprofTrace && window.scprofTrace.ready")
        settle(page)
        page.wait_for_selector(".tv-details-name")
        assert page.inner_text(".tv-details-name") == MARKUP
        details = page.inner_text(".tv-details")
        assert f"{ARG_KEY}\t{ARG_VALUE}" in details and "65.7 GFLOP" in details
        assert re.search(r"duration\s+1\.5 µs", details)
        # no element came from the data: the panel holds only what trace_panels.js builds
        assert page.locator(".tv-details a, .tv-details b, .tv-details i, .tv-details br").count() == 0
        shot(page, "trace/event-details-markup")


def test_flops_read_in_si_and_times_in_micro_seconds(tmp_path):
    from profiler.units import format_ps, format_value
    from ui.render import time_unit

    assert format_value(65_660_780_544, "flop") == "65.7 GFLOP"
    db = record_store(tmp_path)  # an event with 65,660,780,544 FLOPs, 1.5 µs long
    with Store.open(db, read_only=True) as store:
        events = {r["name"]: r for r in store.rows("SELECT run_id, event_id, name FROM slices")}
    got = event_details(db, MARKUP, events)
    assert dict(got["fields"])["flops"] == "65.7 GFLOP" and str(BIG_FLOPS) not in str(got["fields"])
    assert format_ps(got["dur_ps"]) == "1.5 µs"
    assert format_ps(982_300_000) == "982 µs" and time_unit(5e8)[0] == "µs"

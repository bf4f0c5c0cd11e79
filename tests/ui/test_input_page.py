"""The Input page's series, figures of the idle_gaps analyzer (idle_gaps.device_by_step,
tensorcore_by_step, host_input_events), against independent references: the awaited time per step
walked in plain Python over the store's events (tests/analyzers/test_step_distribution.py), the
analyzer's own totals, and plain SQL over the store's slices; and the page built from them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from profiler.store import Store
from tests.analyzers.test_step_distribution import awaited_by_step
from tests.ui.input_store import build_input_store, run_id
from ui import data
from ui.pages import input as page


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = build_input_store(tmp_path_factory.mktemp("input-store"))
    with Store.open(db, read_only=True) as s:
        yield s


def figures(store: Store, name: str) -> tuple[dict, dict]:
    """(idle_gaps figures, breakdown figures) of a run's report, as the page reads them."""
    report = data.analysis(store, run_id(store, name))
    return report.analyses["idle_gaps"].figures, report.analyses["breakdown"].figures


def test_host_bound_awaited_per_step_is_the_plain_python_walk_and_sums_to_the_total(store):
    gaps, bd = figures(store, "host_bound")
    rows, dev = gaps["device_by_step"], gaps["device"]
    assert len(rows) == bd["steps"] == 14
    ref = awaited_by_step(store, run_id(store, "host_bound"))
    assert [r["step"] for r in rows] == sorted(ref)
    for r in rows:
        assert (r["host_input_wait_ps"], r["device_ps"]) == ref[r["step"]], r["step"]
    assert sum(r["host_input_wait_ps"] for r in rows) == dev["host_input_wait_ps"]
    assert sum(r["device_ps"] for r in rows) == dev["device_ps"]
    total = dev["device_ps"]
    assert sum(r["busy_ps"] for r in rows) / total == pytest.approx(dev["busy_share"], rel=1e-12)
    assert sum(r["host_input_idle_ps"] for r in rows) / total == pytest.approx(
        dev["wait_share"]["host_input"], rel=1e-12
    )
    assert all(r["host_input_wait_ps"] > 0.3 * r["device_ps"] for r in rows)  # the device waits every step


def test_prefetched_input_runs_every_step_and_is_never_awaited(store):
    gaps, bd = figures(store, "prefetched")
    rows = gaps["device_by_step"]
    assert len(rows) == bd["steps"] == 14 and gaps["device"]["host_input_wait_ps"] == 0
    ref = awaited_by_step(store, run_id(store, "prefetched"))
    for r in rows:
        assert r["host_input_wait_ps"] == ref[r["step"]][0] == 0
        assert r["host_input_idle_ps"] > 0  # input work ran while the device idled: prepared ahead
        parts = page.device_parts(r)
        assert parts[page.AHEAD] == r["host_input_idle_ps"] and parts[page.AWAITED] == 0


def test_device_parts_add_up_to_the_steps_device_time(store):
    for name in ("host_bound", "prefetched"):
        for r in figures(store, name)[0]["device_by_step"]:
            parts = page.device_parts(r)
            assert sum(parts.values()) == r["device_ps"] and min(parts.values()) >= 0
            assert parts["device busy"] == r["busy_ps"]


def test_emulated_tensorcore_host_wait_per_step_totals_the_host_bound_figure(store):
    gaps, bd = figures(store, "emulated")
    rows, host = gaps["tensorcore_by_step"], gaps["tensorcore"]["host"]
    assert len(rows) == bd["steps"] == 4 and "device_by_step" not in gaps
    assert sum(r["host_wait_ps"] for r in rows) == host["gap_ps"]
    assert sum(r["host_wait_ps"] for r in rows) / sum(r["observed_ps"] for r in rows) == pytest.approx(
        host["share"], rel=1e-12
    )
    # the observed time: each counted step's windows (summed over the chips) times the TensorCore op
    # tracks per chip, one whole number for every step
    rid = run_id(store, "emulated")
    windows = dict(
        store.con.execute(
            "SELECT w.step, sum(w.end_ps - w.start_ps) FROM step_windows w JOIN step_times s "
            "ON s.run_id = w.run_id AND s.step = w.step AND s.counted WHERE w.run_id = ? GROUP BY w.step",
            [rid],
        ).fetchall()
    )
    per_chip = {r["observed_ps"] / windows[r["step"]] for r in rows}
    assert len(per_chip) == 1 and next(iter(per_chip)) >= 1 and next(iter(per_chip)).is_integer()


def test_host_input_events_are_the_slices_of_the_counted_steps_by_name(store):
    for name in ("host_bound", "prefetched", "emulated"):
        rid = run_id(store, name)
        ref = store.con.execute(
            "SELECT e.name, count(*), sum(e.dur_ps) FROM slices e JOIN step_times s ON s.run_id = e.run_id "
            "AND s.step = e.step AND s.counted WHERE e.run_id = ? AND e.category = 'host_preprocess' GROUP BY e.name",
            [rid],
        ).fetchall()
        got = figures(store, name)[0]["host_input_events"]
        assert sorted((r["name"], r["events"], r["total_ps"]) for r in got) == sorted(ref), name
    names = [r["name"] for r in figures(store, "host_bound")[0]["host_input_events"]]
    assert any(n.endswith("make_batch") for n in names) and "preprocess_batch" in names


def _text(component) -> str:
    """Every string in a component tree (its children and the tables' data)."""
    out = []

    def walk(c):
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list | tuple):
            for x in c:
                walk(x)
        elif hasattr(c, "to_plotly_json"):
            props = c.to_plotly_json()["props"]
            walk(props.get("children"))
            out.extend(str(v) for k, v in props.items() if k.startswith("data-"))

    walk(component)
    return " ".join(out)


def _ids(component) -> set[str]:
    found = set()

    def walk(c):
        if isinstance(c, list | tuple):
            for x in c:
                walk(x)
        elif hasattr(c, "to_plotly_json"):
            props = c.to_plotly_json()["props"]
            if props.get("id"):
                found.add(props["id"])
            walk(props.get("children"))

    walk(component)
    return found


def test_the_page_draws_the_device_or_the_tensorcores(store):
    hb = page.render_input(store, {"run": run_id(store, "host_bound")})
    assert {"input-device", "input-events"} <= _ids(hb) and "input-tensorcore" not in _ids(hb)
    text = _text(hb)
    assert "device awaiting host input" in text and "preprocess_batch" in text
    em = page.render_input(store, {"run": run_id(store, "emulated")})
    assert {"input-tensorcore", "input-events"} <= _ids(em) and "input-device" not in _ids(em)
    assert "TensorCores waiting for host input" in _text(em)


def test_the_chart_stacks_the_parts_per_step(store):
    rows = figures(store, "host_bound")[0]["device_by_step"]
    fig = page.steps_figure(rows, page.device_parts, page.DEVICE_PARTS, "summed over the chips")
    assert [t.name for t in fig.data] == [n for n, _ in page.DEVICE_PARTS]
    unit, scale = ("ms", 1e9)  # host_bound's steps are about 27 ms
    assert fig.layout.yaxis.title.text.startswith(f"time ({unit}")
    awaited = next(t for t in fig.data if t.name == page.AWAITED)
    assert list(awaited.y) == pytest.approx([r["host_input_wait_ps"] / scale for r in rows])


def _report(idle: dict, breakdown: dict) -> SimpleNamespace:
    return SimpleNamespace(
        analyses={"idle_gaps": SimpleNamespace(figures=idle), "breakdown": SimpleNamespace(figures=breakdown)}
    )


def test_a_run_without_steps_or_device_says_why():
    assert page.NO_STEPS in _text(page.input_sections(_report({}, {"steps": 0})))
    assert page.NO_STEPS in _text(page.input_sections(SimpleNamespace(analyses={})))
    no_device = _text(page.input_sections(_report({"gaps": 0}, {"steps": 3, "covers": "over 3 counted steps"})))
    assert page.NO_DEVICE in no_device and "no input work" in no_device


def test_input_work_per_step_divides_by_the_counted_steps():
    rows = page.event_rows([{"name": "make_batch", "events": 28, "total_ps": 700}], 14)
    assert rows[0]["events_per_step"] == 2 and rows[0]["ps_per_step"] == 50

"""The router and the page callbacks on every kind of run (tests/ui/sweep_store.py), without a
browser: every callback that one of a page's components can trigger finds all its inputs and
states in the page (Dash raises "A nonexistent object was used in an `Input`" in the browser
otherwise: the failed run's `overview-steps`), and a URL naming a run the store lacks is
answered by a page naming it as unknown, never another run's page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ui.sweep_store import KINDS, sweep_db  # noqa: F401 - the fixture

RUN_PAGES = ("/overview", "/timeline", "/sparsecore", "/memory", "/ops", "/input", "/findings", "/tuning")


@pytest.fixture(scope="module")
def app(sweep_db):  # noqa: F811 - the fixture
    from ui.app import create_app

    app = create_app(sweep_db)
    yield app
    app.scprof_access.close()


@pytest.fixture(scope="module")
def ids(app) -> dict[str, int]:
    with app.scprof_access.open() as store:
        return {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}


def _components(root: Any) -> list[Any]:
    if root is None or isinstance(root, str | int | float):
        return []
    if isinstance(root, list | tuple):
        return [c for x in root for c in _components(x)]
    return [root, *(c for c in root._traverse() if hasattr(c, "_prop_names"))]


def _text(root: Any) -> str:
    parts: list[str] = []
    for c in _components(root):
        kids = getattr(c, "children", None)
        for k in kids if isinstance(kids, list | tuple) else [kids]:
            if isinstance(k, str | int | float):
                parts.append(str(k))
    return " ".join(parts)


def _rendered(app, pathname: str, search: str) -> list[Any]:
    """The components a page shows in the browser: the app's frame, the page's layout and what
    its render functions fill in (as ui/routing.filled_page calls them)."""
    from ui import inputs as ui_inputs
    from ui import pages
    from ui.routing import page_for

    access = app.scprof_access
    page, links = page_for(access, pathname, search)
    shown = [*_components(page), *_components(links)]
    state_of = {getattr(c, "id", None): getattr(c, "data", None) for c in shown}
    with access.open() as store:
        for name, outputs, fn in pages.RENDERERS:
            if f"{name}-state" not in state_of:
                continue
            st = ui_inputs.page_state(state_of[f"{name}-state"], ui_inputs.STATE_NEEDS.get(name, ()))
            out = fn(store, st)
            for (_, prop), value in zip(outputs, out if len(outputs) > 1 else (out,), strict=True):
                if prop == "children":
                    shown += _components(value)
    return shown


def _missing_inputs(app, shown: list[Any]) -> list[str]:
    """Callbacks one of whose inputs is shown while another input or a state is not."""
    present = {"_pages_location", "nav", "page"} | {c.id for c in shown if isinstance(getattr(c, "id", None), str)}
    problems = []
    for key, cb in app.callback_map.items():
        inputs = [d["id"] for d in cb["inputs"] if isinstance(d["id"], str)]
        needed = inputs + [d["id"] for d in cb["state"] if isinstance(d["id"], str)]
        if set(inputs) & (present - {"_pages_location"}) and set(needed) - present:
            problems.append(f"{key}: {sorted(set(needed) - present)} absent")
    return problems


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pathname", [*RUN_PAGES, "/compare"])
def test_every_callback_a_page_triggers_finds_its_inputs(app, ids, pathname, kind):
    search = f"?base={ids['emulated_ok']}&cand={ids[kind]}" if pathname == "/compare" else f"?run={ids[kind]}"
    shown = _rendered(app, pathname, search)
    assert f"{kind} (#{ids[kind]})" in {
        o["label"] for c in shown for o in (getattr(c, "options", None) or []) if isinstance(o, dict)
    }
    assert _missing_inputs(app, shown) == []


@pytest.mark.parametrize("ref", ["999", "no_such_run"])
@pytest.mark.parametrize("pathname", RUN_PAGES)
def test_an_unknown_run_is_named_as_unknown(app, ids, pathname, ref):
    from ui.routing import page_for

    page, _ = page_for(app.scprof_access, pathname, f"?run={ref}")
    text = _text(page)
    assert f"The run '{ref}' is not in this store." in text
    newest = max(ids, key=ids.get)  # the store's newest runs are offered in its place, as links only
    assert newest in text
    shown = _components(page)
    assert not [c for c in shown if getattr(c, "id", None) in (f"{pathname[1:]}-state", f"{pathname[1:]}-run")]
    links = [c.href for c in shown if c.__class__.__name__ == "Link"]
    assert f"{pathname}?run={ids[newest]}" in links


@pytest.mark.parametrize("side", ["base", "cand"])
def test_an_unknown_compare_side_is_named_and_the_other_side_kept(app, ids, side):
    from ui.routing import page_for

    other = "cand" if side == "base" else "base"
    page, _ = page_for(app.scprof_access, "/compare", f"?{side}=no_such_run&{other}={ids['failed']}")
    role = {"base": "baseline", "cand": "candidate"}[side]
    assert f"{role}: run 'no_such_run' is not in this store" in _text(page)
    (kept,) = [c for c in _components(page) if getattr(c, "id", None) == f"compare-{other}"]
    assert kept.value == ids["failed"]


@pytest.mark.parametrize("pathname", RUN_PAGES)
def test_every_page_of_a_failed_run_says_why_it_failed(app, ids, pathname):
    import json

    from ui.routing import page_for

    with app.scprof_access.open() as store:
        tags = json.loads(store.rows("SELECT tags FROM runs WHERE run_id = ?", [ids["failed"]])[0]["tags"])
    page, _ = page_for(app.scprof_access, pathname, f"?run={ids['failed']}")
    (status,) = [c for c in _components(page) if "run-status" in (getattr(c, "className", None) or "")]
    assert _text(status) == f"This run failed (spmem_overflow): {tags['error']}"
    assert "(150512 bytes) do not fit in TileSpmem (131072 bytes)" in tags["error"]  # the compile's key fact
    ok, _ = page_for(app.scprof_access, pathname, f"?run={ids['emulated_ok']}")
    assert not [c for c in _components(ok) if "run-status" in (getattr(c, "className", None) or "")]


# (The Timeline page has no chips control: the trace viewer groups tracks per chip and host.)
@pytest.mark.parametrize("pathname,kind", [("/memory", "no_steps")])
def test_a_run_without_chips_says_so_beside_its_empty_chips_control(app, ids, pathname, kind):
    from ui.routing import page_for

    page, _ = page_for(app.scprof_access, pathname, f"?run={ids[kind]}")
    (chips,) = [c for c in _components(page) if getattr(c, "id", None) == pathname[1:] + "-chips"]
    assert chips.options == [] and "chips (none: host tracks only)" in " ".join(_text(page).split())


def test_timeline_opens_the_trace_viewer_on_a_capture_with_nested_host_events(app, ids):
    """The GPU capture's host loop: `train` (a whole step) holds `next_batch` (the input wait the
    host-bound finding points at) on the same track. The page mounts the canvas viewer (which draws
    the nesting as rows: tests/ui/test_trace_viewer.py) and the tile API serves both events."""
    from ui.pages.timeline_page import render_timeline

    with app.scprof_access.open() as store:
        st = {"run": ids["gpu_capture"], "steps": [0, 5], "t0": None, "t1": None}
        body, _ = render_timeline(store, st)
        (train,) = store.rows(
            """SELECT track_id, start_ps, dur_ps FROM slices WHERE run_id = ? AND name = 'train'
            ORDER BY start_ps LIMIT 1""",
            [ids["gpu_capture"]],
        )
    assert body.className == "trace-viewer" and body.to_plotly_json()["props"]["data-run"] == str(ids["gpu_capture"])
    client = app.server.test_client()
    k, i = 10, train["start_ps"] >> 20
    tile = client.get(f"/api/trace/tile?run={ids['gpu_capture']}&k={k}&i={i}&tracks={train['track_id']}").get_json()
    part = tile["tracks"][str(train["track_id"])]
    names = {tile["names"][str(n)] for n in part["ev"]["name"]}
    inside = [
        s
        for s, d, n in zip(part["ev"]["start"], part["ev"]["dur"], part["ev"]["name"], strict=True)
        if tile["names"][str(n)] == "next_batch"
        and train["start_ps"] <= s
        and s + d <= train["start_ps"] + train["dur_ps"]
    ]
    assert "train" in names and inside


def test_timeline_of_a_run_at_one_instant_says_so_instead_of_a_full_width_bar(app, ids):
    """The failed compile's one event has no duration: no chart of a 1 ps window, an empty state."""
    from ui.pages.timeline_page import render_timeline

    with app.scprof_access.open() as store:
        (ev,) = store.rows("SELECT start_ps, dur_ps FROM slices WHERE run_id = ?", [ids["failed"]])
        st = {"run": ids["failed"], "steps": [0, -1], "t0": None, "t1": None}
        body, _ = render_timeline(store, st)
    assert (ev["start_ps"], ev["dur_ps"]) == (0, 0)
    assert not [c for c in _components(body) if getattr(c, "className", None) == "trace-viewer"]
    text = " ".join(_text(body).split())
    assert "Nothing to draw: the run's 1 event(s) all sit at 0 ps with no duration (it failed before" in text


@pytest.mark.parametrize("kind", ["failed", "no_steps"])
def test_compare_with_a_run_without_steps_is_an_empty_state_not_an_error(app, ids, kind):
    """No verdict without steps is what the pair is, not a failure of the page: an empty state
    naming the run and what it lacks (the words of `scprof compare`'s refusal)."""
    from ui import data
    from ui.pages.compare import render_compare_verdict

    with app.scprof_access.open() as store:
        comparison, why = data.compare(store, ids["emulated_ok"], ids[kind])
        out = render_compare_verdict(store, {"base": ids["emulated_ok"], "cand": ids[kind]})
    assert comparison is None and f"candidate '{kind}' (run_id {ids[kind]}) has no steps" in why
    classes = [getattr(c, "className", None) for c in _components(out)]
    assert "error-box" not in classes
    assert "no step-time verdict" in _text(out) and why in _text(out)


NO_SC = ("wild_tf2_gpu_multi_worker", "wild_hta_gpu_train", "torch_cpu", "gpu_capture", "cpu_capture")
WITH_SC = ("emulated_ok", "failed", "limits_too_low")


def _nav_labels(links: Any) -> list[str]:
    return [c.children for c in _components(links) if str(getattr(c, "id", "")).startswith("nav-")]


def _without_sparsecores(app, run: int) -> bool:
    """The reference, read straight from the store's tables: no SparseCores in the run's hardware,
    no SparseCore track, no partition statistics."""
    with app.scprof_access.open() as store:
        (hw,) = store.rows("SELECT coalesce(sparsecores_per_chip, 0) AS n FROM runs WHERE run_id = ?", [run])
        kinds = {r["kind"] for r in store.rows("SELECT DISTINCT kind FROM tracks WHERE run_id = ?", [run])}
        stats = store.rows("SELECT count(*) AS n FROM sc_partition_stats WHERE run_id = ?", [run])[0]["n"]
    return hw["n"] == 0 and not kinds & {"sparsecore", "sc_tile"} and stats == 0


@pytest.mark.parametrize("kind", NO_SC)
def test_a_run_without_sparsecores_has_no_sparsecore_link_page_or_figures(app, ids, kind):
    from ui import data
    from ui.routing import page_for

    run = ids[kind]
    assert _without_sparsecores(app, run)
    for pathname in ("/overview", "/sparsecore", "/compare"):
        _, links = page_for(app.scprof_access, pathname, f"?run={run}")
        assert "SparseCore" not in _nav_labels(links) and "Overview" in _nav_labels(links)
    # a direct URL says so plainly: no empty heatmap boxes
    text = " ".join(_text(_rendered(app, "/sparsecore", f"?run={run}")).split())
    assert "This run has no SparseCores" in text and not any(
        getattr(c, "id", None) == "sc-heatmap" for c in _rendered(app, "/sparsecore", f"?run={run}")
    )
    with app.scprof_access.open() as store:
        labels = [k.label for k in data.overview_kpis(store, run, data.step_bounds(store, run) or (0, -1))]
    assert "SC minibatches per step" not in labels and "dropped IDs" in labels
    # Compare: no SparseCore section when neither run has SparseCores, one when either has
    other = ids["cpu_capture" if kind != "cpu_capture" else "gpu_capture"]
    assert "SparseCore side by side" not in _text(_rendered(app, "/compare", f"?base={other}&cand={run}"))
    assert "SparseCore side by side" in _text(_rendered(app, "/compare", f"?base={ids['emulated_ok']}&cand={run}"))


@pytest.mark.parametrize("kind", WITH_SC)
def test_an_emulated_run_keeps_its_sparsecore_link_page_and_figures(app, ids, kind):
    from ui import data
    from ui.routing import page_for

    run = ids[kind]
    assert not _without_sparsecores(app, run)
    _, links = page_for(app.scprof_access, "/overview", f"?run={run}")
    assert "SparseCore" in _nav_labels(links)
    assert "This run has no SparseCores" not in _text(_rendered(app, "/sparsecore", f"?run={run}"))
    with app.scprof_access.open() as store:
        labels = [k.label for k in data.overview_kpis(store, run, data.step_bounds(store, run) or (0, -1))]
    assert "SC minibatches per step" in labels


def _raw_gpu_planes() -> int:
    """The GPU device planes of the tf2 capture's files, read with the protobuf classes."""
    import glob

    from tests.xplane.helpers import DATA, read_space

    files = glob.glob(f"{DATA}/wild/tf2_gpu_multi_worker/plugins/profile/*/*.xplane.pb")
    return sum(1 for f in files for p in read_space(f).planes if "/device:GPU:" in p.name)


def test_a_gpu_capture_names_its_devices_gpus_not_tpu_chips(app, ids):
    from ui import data, trace_api
    from ui.pages.common import run_header

    run, n = ids["wild_tf2_gpu_multi_worker"], _raw_gpu_planes()
    assert n == 16
    with app.scprof_access.open() as store:
        names = data.chip_names(store, run)
        header = " ".join(_text(run_header(store, run)).split())
        meta = trace_api.meta_json(store, trace_api.run_facts(store, run))
        cpu = data.chip_names(store, ids["cpu_capture"])
    assert sorted(names.values()) == sorted(f"GPU:{c}" for c in range(n))
    assert data.chip_name(names, n) == f"GPU:{n}" and "16 GPUs" in header and "chip" not in header
    assert list(cpu.values()) == ["CPU:0"]
    overview = " ".join(_text(_rendered(app, "/overview", f"?run={run}")).split())
    assert "Per GPU" in overview and "Per chip" not in overview
    # the timeline: a group per GPU with events, labelled as a GPU, never two hosts' GPU:0 together
    chip_of = {t["id"]: t["chip"] for t in meta["tracks"]}
    devices = [g for g in meta["groups"] if g["id"] != "host"]
    assert devices and all(len({chip_of[t] for t in g["tracks"]}) == 1 for g in devices)
    assert all(g["label"].endswith(f"(GPU {chip_of[g['tracks'][0]]})") for g in devices)

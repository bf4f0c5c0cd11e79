"""A store with two recorded runs (baseline and tuned, few steps), shared by the UI tests."""

from __future__ import annotations

import pytest

from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from tests.tracekit import REPO

STEPS = 5


def build_two_run_store(directory) -> str:
    """baseline and tuned recorded by the emulator (synthetic traces when it is unavailable)."""
    db = str(directory / "ui.duckdb")
    with Store.open(db) as store:
        try:
            from sim_backend.recording.record import record_run
        except ImportError:  # the emulator is optional for the UI: fall back to synthetic traces
            from profiler.synthetic import write_synthetic_trace

            for i, name in enumerate(("baseline", "tuned")):
                path = str(directory / f"{name}.sctrace")
                write_synthetic_trace(path, 20_000 - 5_000 * i, seed=i, run_name=name)
                ingest_trace(store, path, name=name)
            return db
        for name in ("baseline", "tuned"):
            result = record_run(
                str(REPO / "configs" / f"{name}.toml"), [], name, STEPS, str(directory / name), progress=False
            )
            ingest_trace(store, result.trace_path, name=name)
    return db


def renamed_copy(ui_db: str, path, *names: str) -> tuple[str, list[int]]:
    """A copy of the UI store at `path` whose first runs are renamed `names` (hostile names
    are data a store may hold); (its path, the run ids in order)."""
    import shutil

    import duckdb

    shutil.copyfile(ui_db, path)
    con = duckdb.connect(str(path))
    try:
        ids = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
        for run_id, name in zip(ids, names, strict=False):
            con.execute("UPDATE runs SET name = ? WHERE run_id = ?", [name, run_id])
    finally:
        con.close()
    return str(path), ids


@pytest.fixture(scope="session")
def ui_db(tmp_path_factory) -> str:
    return build_two_run_store(tmp_path_factory.mktemp("ui-store"))


@pytest.fixture
def ro_store(ui_db):
    with Store.open(ui_db, read_only=True) as store:
        yield store


@pytest.fixture(scope="session")
def whatif_db(ui_db, tmp_path_factory) -> str:
    """The UI store with what-if rows of each purpose (tests/ui/whatif_store.py)."""
    from tests.ui.whatif_store import build_whatif_store

    return build_whatif_store(ui_db, tmp_path_factory.mktemp("whatif-store"))


@pytest.fixture
def whatif_store(whatif_db):
    with Store.open(whatif_db, read_only=True) as store:
        yield store


@pytest.fixture(scope="session")
def overview_db(tmp_path_factory) -> str:
    """An ok, a host-bound, a failed run and a real capture (tests/ui/overview_store.py)."""
    from tests.ui.overview_store import build_overview_store

    return build_overview_store(tmp_path_factory.mktemp("overview-store"))


@pytest.fixture(scope="session")
def pages_db(tmp_path_factory) -> str:
    """The store of tests/ui/pages_store.py (skewed, hbm, failed), shared by the page tests."""
    from tests.ui.pages_store import build_pages_store

    return build_pages_store(tmp_path_factory.mktemp("pages-store"))


@pytest.fixture(scope="session")
def mixed_db(ui_db, tmp_path_factory) -> str:
    """The UI store with a prefetching variant, a failed run and two real captures
    (tests/ui/compare_store.py)."""
    from tests.ui.compare_store import build_mixed_store

    return build_mixed_store(ui_db, tmp_path_factory.mktemp("mixed-store"))


@pytest.fixture
def mixed(mixed_db):
    with Store.open(mixed_db, read_only=True) as store:
        yield store


@pytest.fixture
def mixed_ids(mixed) -> dict[str, int]:
    return {r["name"]: r["run_id"] for r in mixed.rows("SELECT run_id, name FROM runs")}


@pytest.fixture(scope="module")
def browser():
    """Headless chromium for the browser tests (tests/ui/browserkit.py), one per test module."""
    from tests.ui.browserkit import launched_browser

    with launched_browser() as b:
        yield b


@pytest.fixture
def page(browser):
    """A 1400x1000 page (downloads accepted); the test fails on any console error or uncaught exception."""
    from tests.ui.browserkit import watched_page

    with watched_page(browser, accept_downloads=True) as pg:
        yield pg


# A module serving a store defines `served` as (base URL, app) (tests/ui/browserkit.serve); these give
# its parts and the store's run ids by name.
@pytest.fixture(scope="module")
def app(served):
    return served[1]


@pytest.fixture(scope="module")
def server(served):
    return served[0]


@pytest.fixture(scope="module")
def run_ids(app):
    from tests.ui.browserkit import run_ids as ids_of

    return ids_of(app)


@pytest.fixture(scope="module")
def served_ui(ui_db):
    """The UI serving the shared two-run store, one server per test module: (base URL, run ids by name)."""
    from tests.ui.browserkit import run_ids as ids_of
    from tests.ui.browserkit import serve

    with serve(ui_db) as (url, app):
        yield url, ids_of(app)


@pytest.fixture(scope="session")
def ops_db(tmp_path_factory) -> str:
    """An emulated run, the TPU v6e capture and the TF2 GPU capture (tests/ui/ops_store.py)."""
    from tests.ui.ops_store import build_ops_store

    return build_ops_store(tmp_path_factory.mktemp("ops-store"))

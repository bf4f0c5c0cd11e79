"""Fixtures shared by the tests."""

from __future__ import annotations

import shutil

import pytest

from analyzers import materialize
from profiler.store import Store
from profiler.trace_to_store import ingest_trace
from tests.tracekit import record_small


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """Every test runs in its own empty directory without SCPROF_DB, so no test can
    touch ./scprof.duckdb, the user's store or the repository (relative paths land in tmp_path)."""
    monkeypatch.delenv("SCPROF_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def small_trace(tmp_path):
    return record_small(tmp_path / "small.sctrace")


@pytest.fixture(scope="session")
def _store_template(tmp_path_factory):
    d = tmp_path_factory.mktemp("template")
    db = d / "store.duckdb"
    with Store.open(str(db)) as store:  # as `scprof ingest` stores it: the run, then its report
        materialize.build(store, ingest_trace(store, str(record_small(d / "small.sctrace"))).run_id)
    return db


@pytest.fixture
def store_path(tmp_path, _store_template):
    """A store file of its own holding the small run (a copy of one built per session)."""
    db = tmp_path / "store.duckdb"
    shutil.copyfile(_store_template, db)
    return db

"""What every browser test shares: Debian's chromium driven by Playwright, the Dash app served on
a free loopback port in a thread of the test process, pages that fail the test on any console error
or uncaught exception, waiting for Dash to settle, and screenshots for people to look at.

Screenshots land in test-artifacts/screenshots/ (not committed), and in $SCPROF_SHOTS when set.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.tracekit import REPO, missing_extra

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SHOTS = REPO / "test-artifacts" / "screenshots"
TIMEOUT_MS = 60_000


@contextmanager
def launched_browser() -> Iterator[Any]:
    """Headless Debian chromium (make test installs it) driven by Playwright (a test extra):
    the tests that need it skip without it, or fail under `make test`."""
    try:
        from playwright import sync_api
    except ImportError:
        missing_extra("playwright is a test extra: pip install -e '.[test]'")
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if path is None:
        missing_extra(
            f"Debian chromium not installed at {CHROMIUM} (make test installs it: apt-get install -y chromium)"
        )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@contextmanager
def serve(db: str) -> Iterator[tuple[str, Any]]:
    """(base URL, app): the Dash app over the store at `db` on a free loopback port, in a thread."""
    from werkzeug.serving import make_server

    from ui.app import create_app

    app = create_app(db)
    srv = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}", app
    finally:
        srv.shutdown()
        thread.join(timeout=10)
        app.scprof_access.close()  # DuckDB keeps one database instance per file in a process


def run_ids(app: Any) -> dict[str, int]:
    """Run id by name, through the app's own connection (one DuckDB instance per file)."""
    with app.scprof_access.open() as store:
        return {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}


@contextmanager
def watched_page(browser: Any, width: int = 1400, height: int = 1000, **context_args: Any) -> Iterator[Any]:
    """A page of the given viewport; on leaving, the test fails if the browser reported a console
    error or an uncaught exception."""
    context = browser.new_context(viewport={"width": width, "height": height}, **context_args)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    yield pg
    context.close()
    assert not errors, "browser reported errors:\n" + "\n".join(errors)


def requests_of(pg: Any) -> list[str]:
    """The URLs the page asks for from now on (a list that grows as it does)."""
    urls: list[str] = []
    pg.on("request", lambda r: urls.append(r.url))
    return urls


def settle(pg: Any) -> None:
    """Wait until Dash has no callback in flight."""
    pg.wait_for_load_state("networkidle")
    pg.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=TIMEOUT_MS)


def shot(pg: Any, name: str) -> None:
    """A full-page screenshot `name`.png in test-artifacts/screenshots/ (and $SCPROF_SHOTS)."""
    for d in filter(None, (SHOTS, os.environ.get("SCPROF_SHOTS"))):
        path = Path(d) / f"{name}.png"  # `name` may name a sub-folder: "trace/01-colours"
        path.parent.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(path), full_page=True)

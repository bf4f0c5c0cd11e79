"""Who may use the UI (docs/security.md "The web UI"): loopback only by default; off loopback a
warning and an access token checked on every request; a port in use or an unknown host is one line,
exit 2."""

from __future__ import annotations

import re
import socket

import pytest

from profiler.errors import ScprofError
from tests.tracekit import assert_one_error, cli
from ui.app import create_app

TOKEN = "t0ken-for-the-tests-0123456789"
PAGES = ["/", "/runs", "/sql?q=SELECT%201", "/_dash-layout", "/_dash-dependencies", "/assets/style.css"]
DOWNLOADS = ["/download/sql.csv?q=SELECT%201", "/download/perfetto?run=1", "/download/tuned.toml?run=1"]


@pytest.fixture(scope="module")
def guarded_app(ui_db):
    app = create_app(ui_db, token=TOKEN)
    yield app
    app.scprof_access.close()


@pytest.mark.parametrize("path", PAGES + DOWNLOADS)
def test_every_request_needs_the_token(guarded_app, path):
    client = guarded_app.server.test_client()
    r = client.get(path)
    assert r.status_code == 401 and b"access token" in r.data
    assert client.get(path, headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    sep = "&" if "?" in path else "?"
    assert client.get(f"{path}{sep}token=wrong-token-0123456789").status_code == 403


def test_callbacks_need_the_token(guarded_app):
    body = {"output": "sql-body.children", "outputs": {"id": "sql-body", "property": "children"}, "inputs": []}
    assert guarded_app.server.test_client().post("/_dash-update-component", json=body).status_code == 401


def test_the_token_once_in_the_address_then_a_strict_cookie(guarded_app):
    client = guarded_app.server.test_client()
    r = client.get(f"/sql?q=SELECT%201&token={TOKEN}")
    assert r.status_code == 303
    assert r.headers["Location"] == "/sql?q=SELECT+1"  # the token leaves the address bar
    cookie = r.headers["Set-Cookie"]
    assert TOKEN in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    for path in PAGES[:5]:
        assert client.get(path).status_code == 200, path  # the cookie carries it from now on
    r = client.get("/download/sql.csv?q=SELECT%2042%20AS%20x")
    assert (r.status_code, r.data) == (200, b"x\n42\n")


def test_a_bearer_header_works_for_scripts(guarded_app):
    r = guarded_app.server.test_client().get("/_dash-layout", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


@pytest.fixture(scope="module")
def open_app(ui_db):
    app = create_app(ui_db)
    yield app
    app.scprof_access.close()


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8050", "[::1]:8050", "localhost:1", "app.localhost"])
def test_loopback_without_token_answers_loopback_names(open_app, host):
    assert open_app.server.test_client().get("/_dash-layout", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8050", "10.0.0.1:8050", "localhost.evil.example"])
def test_loopback_without_token_refuses_other_host_names(open_app, host):
    # a page on evil.example that rebinds its name to 127.0.0.1 must not reach the SQL console
    r = open_app.server.test_client().get("/download/sql.csv?q=SELECT%201", headers={"Host": host})
    assert r.status_code == 403


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.0.2.7", False),
    ],
)
def test_which_hosts_are_loopback(host, loopback):
    from ui import auth

    assert auth.is_loopback(host) is loopback


def test_an_unresolvable_host_is_named():
    from ui import auth

    with pytest.raises(ScprofError, match="--host: cannot resolve"):
        auth.is_loopback("no-such-host.invalid")


@pytest.fixture
def no_serving(monkeypatch):
    """Record what `scprof ui` would serve instead of serving it."""
    calls = []
    monkeypatch.setattr("ui.app.serve", lambda *a, **k: calls.append((a, k)))
    return calls


def test_off_loopback_warns_and_makes_up_a_token(capsys, ui_db, no_serving):
    r = cli(capsys, "ui", "--host", "0.0.0.0", "--port", str(_free_port()), "--db", ui_db)
    assert r.code == 0
    assert "warning" in r.err and "0.0.0.0" in r.err and "token" in r.err
    (db, host, port, token), kwargs = no_serving[0]
    assert host == "0.0.0.0" and kwargs == {"show_token": True}
    assert re.fullmatch(r"[A-Za-z0-9_-]{32,}", token)  # secrets.token_urlsafe(24)


def test_a_given_token_is_used_and_not_printed(capsys, ui_db, no_serving):
    r = cli(capsys, "ui", "--host", "0.0.0.0", "--port", str(_free_port()), "--token", TOKEN, "--db", ui_db)
    assert r.code == 0 and TOKEN not in r.out + r.err
    assert no_serving[0][0][3] == TOKEN and no_serving[0][1] == {"show_token": False}


def test_loopback_needs_no_token(capsys, ui_db, no_serving):
    r = cli(capsys, "ui", "--port", str(_free_port()), "--db", ui_db)
    assert (r.code, r.err) == (0, "")
    assert no_serving[0][0][3] is None


def test_a_port_in_use_is_one_line(capsys, ui_db, no_serving):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_error(cli(capsys, "ui", "--port", str(port), "--db", ui_db), "--port", str(port), "in use")
    assert no_serving == []


def test_an_unresolvable_host_is_one_line(capsys, ui_db, no_serving):
    assert_one_error(cli(capsys, "ui", "--host", "no-such-host.invalid", "--db", ui_db), "--host", "no-such-host")
    assert no_serving == []


@pytest.mark.parametrize("token", ["short", "has space in it 0123456789", "x" * 300, "semi;colon-0123456789"])
def test_unusable_tokens_are_refused(capsys, ui_db, no_serving, token):
    assert_one_error(cli(capsys, "ui", f"--token={token}", "--db", ui_db), "--token")
    assert no_serving == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

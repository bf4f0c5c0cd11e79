"""Who may use the UI. On a loopback address only this machine can connect, and requests must
name a loopback host (a DNS-rebinding page cannot pass for one). Anywhere else every request
(pages, Dash's layout, assets and callbacks, downloads) needs the access token: once in the
query string (`/?token=...`, which sets an HttpOnly, SameSite=Strict cookie and drops the token
from the address), then by that cookie, or as `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import ipaddress
import re
import secrets
import socket
from typing import Any
from urllib.parse import urlencode

from flask import Flask, Response, redirect, request

from profiler.errors import ScprofError

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~-]{16,256}")


def is_loopback(host: str) -> bool:
    """Whether every address `host` stands for is a loopback one (127.0.0.0/8, ::1); ScprofError
    naming --host when it does not resolve. The wildcard ("", 0.0.0.0, ::) is not loopback."""
    name = host.strip().strip("[]")
    if not name:
        return False
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as e:
        raise ScprofError(f"--host: cannot resolve {host!r} ({getattr(e, 'strerror', None) or e})") from None
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
    return bool(addresses) and all(a.is_loopback for a in addresses)


def check_can_listen(host: str, port: int) -> None:
    """ScprofError (one line naming --host or --port) unless a server could listen on host:port now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as werkzeug chooses
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, family, socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError, OSError) as e:
        raise ScprofError(f"--host: cannot resolve {host!r} ({getattr(e, 'strerror', None) or e})") from None
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        probe.bind(address)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ScprofError(f"--port: {port} is already in use on {host} (pick another with --port)") from None
        if e.errno == errno.EACCES:
            raise ScprofError(f"--port: no permission to listen on port {port} (ports below 1024 need it)") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise ScprofError(f"--host: {host} is not an address of this machine") from None
        raise ScprofError(f"--host/--port: cannot listen on {host}:{port} ({e.strerror or e})") from None
    finally:
        probe.close()


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check_token(token: str) -> str:
    """`token` if it is usable in a URL and long enough to guess at, else ScprofError naming --token."""
    if not TOKEN_PATTERN.fullmatch(token):
        raise ScprofError(
            "--token: use 16 to 256 characters from A-Z a-z 0-9 . _ ~ - (or leave it out for one made up)"
        )
    return token


def url_host(host: str) -> str:
    """How to write `host` in a URL to open: the machine's name for a wildcard, IPv6 in brackets."""
    if host.strip() in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def require_access(server: Flask, token: str | None) -> None:
    """Check every request: the token when there is one, else that the Host header is a loopback name."""
    cookie = "scprof_" + hashlib.sha256((token or "").encode()).hexdigest()[:12]  # one per server's token

    def same(given: str | None) -> bool:
        return given is not None and token is not None and hmac.compare_digest(given.encode(), token.encode())

    @server.before_request
    def _check() -> Any:
        if token is None:
            if _loopback_host_header(request.host):
                return None
            return _deny(403, "this UI answers only to localhost addresses (serve it with --token to reach it by name)")
        given = request.args.get("token")
        if given is not None:
            if not same(given):
                return _deny(403, "wrong access token")
            if request.method == "GET":  # keep the token out of the address bar, history and Referer
                rest = [(k, v) for k, v in request.args.items(multi=True) if k != "token"]
                response = redirect(request.path + ("?" + urlencode(rest) if rest else ""), code=303)
                response.set_cookie(cookie, token, httponly=True, samesite="Strict", path="/")
                return response
            return None
        bearer = request.headers.get("Authorization", "")
        if same(request.cookies.get(cookie)) or (bearer.startswith("Bearer ") and same(bearer[7:])):
            return None
        return _deny(401, "access token needed: open the address `scprof ui` printed (it ends in ?token=...)")


def _loopback_host_header(host: str) -> bool:
    """Whether a Host header (name or address, an optional port) names this machine's loopback."""
    name = host[1 : host.find("]")] if host.startswith("[") else host.split(":")[0]
    name = name.lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _deny(status: int, message: str) -> Response:
    return Response(f"scprof UI: {message}\n", status=status, mimetype="text/plain")

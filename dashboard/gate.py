"""What the dashboard's web server checks before Streamlit sees a request.

- Foreign hosts are refused: an HTTP request or WebSocket upgrade whose Host, or Origin when sent,
  names a host other than the listen address, the loopback names (when listening on loopback) or
  --allowed-hosts, or whose Origin names another port than the one the request came to, gets 403 /
  a refused handshake. This closes DNS rebinding: a page on
  evil.example whose name resolves to 127.0.0.1 reaches the port, but its requests say
  Host: evil.example. (Streamlit's own `server.allowedHosts` checks only the WebSocket's Host.)
- Session cookies: the page cannot set an HttpOnly cookie itself, so it hands the browser a one-time
  code that POST /_jetwatch/session trades for the signed session cookie; POST /_jetwatch/logout
  clears it. The cookie is HttpOnly, SameSite=Strict, and Secure when the request came over HTTPS.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from jetwatch.core.settings import Settings
from jetwatch.dashboard import identities

if TYPE_CHECKING:  # starlette is imported where the routes are made, by the dashboard's server only
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

COOKIE = "jetwatch_session"
SESSION_PATH = "/_jetwatch/session"
LOGOUT_PATH = "/_jetwatch/logout"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(address: str) -> bool:
    if address in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def read_only_reason(s: Settings) -> str | None:
    """Why this dashboard offers no actions, or None when operators can sign in."""
    if s.trusted_user_header or (s.operators_file and Path(s.operators_file).is_file()):
        return None
    legacy = " JETWATCH_OPERATOR_SECRET no longer enables actions." if (s.operator_secret or s.operator_secret_file) else ""
    where = "" if is_loopback(s.address) else f" (listening on {s.address}: anyone who reaches it can view)"
    missing = f" ({s.operators_file} does not exist yet)" if s.operators_file else ""
    return (f"Read-only{where}: no operator identities are configured{missing}.{legacy} Add operators with "
            "`jetwatch operator add NAME` (with JETWATCH_OPERATORS_FILE set), or set --trusted-user-header behind "
            "a proxy that signs users in.")


def allowed_hosts(s: Settings) -> set[str]:
    """The host names this dashboard answers to (lower case, no port)."""
    names = {h.strip().lower().rstrip(".") for h in s.allowed_hosts if h.strip()}
    address = s.address.strip("[]").lower()
    if is_loopback(address):
        names |= {"localhost", "127.0.0.1", "::1", address}
    elif address in ("0.0.0.0", "::"):
        # Every interface: the machine's own names and addresses; other names must be listed.
        host = socket.gethostname().lower()
        names |= {"localhost", "127.0.0.1", "::1", host, socket.getfqdn().lower()}
        try:
            names |= set(socket.gethostbyname_ex(host)[2])
        except OSError:
            pass
    else:
        names.add(address)
    return names


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _host_and_port(value: str) -> tuple[str, int | None, str] | None:
    """(host name, port as written or None, scheme) of a Host or Origin value; None if malformed."""
    try:
        parsed = urlparse(value if "//" in value else f"//{value}")
        port = parsed.port  # a malformed port is a malformed host
    except ValueError:
        return None
    if parsed.username or parsed.password or not parsed.hostname:
        return None
    return parsed.hostname.lower().rstrip("."), port, parsed.scheme.lower()


def foreign(headers: dict[bytes, bytes], allowed: set[str]) -> str | None:
    """Why a request is refused (its Host or Origin names another host), or None.

    An Origin must be this dashboard's own: an allowed name *and* the port the request came to
    (the Host's, or the Origin scheme's default when the Host has none, as behind a proxy on 443).
    Another port of an allowed name is another site to the browser, but the same site to its
    SameSite cookies: a page served by any other local web server (localhost:3000) would otherwise
    open a session with the operator's cookie."""
    host = _host_and_port(headers.get(b"host", b"").decode("latin-1"))
    if host is None or host[0] not in allowed:
        return "Host"
    origin = headers.get(b"origin")
    if origin is not None:
        came_from = _host_and_port(origin.decode("latin-1"))
        if came_from is None or came_from[0] not in allowed or came_from[2] not in DEFAULT_PORTS:
            return "Origin"
        default = DEFAULT_PORTS[came_from[2]]
        if (came_from[1] or default) != (host[1] or default):
            return "Origin"
    return None


class HostGuard:
    """ASGI middleware: refuse requests and WebSocket upgrades from foreign hosts."""

    def __init__(self, app: ASGI, allowed: set[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            why = foreign(dict(scope.get("headers") or []), self.allowed)
            if why is not None:
                if scope["type"] == "websocket":
                    await receive()  # websocket.connect
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = f"refused: this dashboard does not answer to that {why}\n".encode()
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def cookie_header(value: str, max_age_s: float, secure: bool) -> str:
    return (f"{COOKIE}={value}; Path=/; Max-Age={int(max_age_s)}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def routes(s: Settings) -> list[Route]:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def session(request: Request) -> Response:
        code = (await request.body()).decode("ascii", "replace").strip()
        found = identities.redeem(code)
        if found is None:
            return PlainTextResponse("unknown or expired sign-in code\n", status_code=403)
        token, max_age = found
        resp = PlainTextResponse("ok\n")
        resp.headers["set-cookie"] = cookie_header(token, max_age, _secure(request))
        resp.headers["cache-control"] = "no-store"
        return resp

    async def logout(request: Request) -> Response:
        identities.logout_done((await request.body()).decode("ascii", "replace").strip())
        if s.operators_file:
            found = identities.parse(s.operators_file, request.cookies.get(COOKIE))
            if found is not None:
                identities.revoke(found)
        resp = PlainTextResponse("signed out\n")
        resp.headers["set-cookie"] = cookie_header("", 0, _secure(request))
        return resp

    return [Route(SESSION_PATH, session, methods=["POST"]), Route(LOGOUT_PATH, logout, methods=["POST"])]
